"""The client address (ctxweb.addresses): ``X-Forwarded-For`` is believed only as far as the
configured proxies appended to it, counted from the right; whatever a client wrote itself is
ignored, and nothing that is not an IP address comes out."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import RequestFactory

from ctxweb.addresses import address_of, client_address

CLIENT = "198.51.100.66"
NGINX = "127.0.0.1"


@pytest.mark.parametrize(
    ("remote", "forwarded", "proxies", "expected"),
    [
        # No proxy configured: the header is the client's own, and ignored.
        (CLIENT, "192.0.2.1", 0, CLIENT),
        (CLIENT, None, 0, CLIENT),
        # One proxy that overwrites the header (the deploy guide's nginx).
        (NGINX, CLIENT, 1, CLIENT),
        # One proxy that appends to what the client sent: the rightmost entry is the client.
        (NGINX, f"192.0.2.1, {CLIENT}", 1, CLIENT),
        (NGINX, f"192.0.2.1,10.0.0.1,{CLIENT}", 1, CLIENT),
        # Two proxies (a load balancer, then nginx): the second entry from the right.
        (NGINX, f"192.0.2.1, {CLIENT}, 10.0.0.5", 2, CLIENT),
        # Fewer entries than proxies: every entry came from a proxy; the leftmost is the client.
        (NGINX, CLIENT, 2, CLIENT),
        # No header behind a proxy (a health check on loopback): the connection's address.
        (NGINX, None, 1, NGINX),
        (NGINX, " , ", 1, NGINX),
        # The proxy's entry is not an address (a miscounted chain): the connection's address.
        (NGINX, "192.0.2.1, not-an-address", 1, NGINX),
        (NGINX, "192.0.2.1, unknown", 1, NGINX),
        # Canonical forms: one address is counted as one, however it is written.
        (NGINX, "2001:DB8::0:1", 1, "2001:db8::1"),
        (NGINX, "[2001:db8::1]", 1, "2001:db8::1"),
        (NGINX, "::ffff:198.51.100.66", 1, CLIENT),
        ("::ffff:198.51.100.66", None, 0, CLIENT),
        (NGINX, "fe80::1%eth0", 1, "fe80::1"),  # no zone: PostgreSQL's inet refuses one
        # Hostile entries never come out.
        (NGINX, "198.51.100.66\x00", 1, NGINX),
        (NGINX, "999.1.1.1", 1, NGINX),
        (NGINX, "," * 10_000, 1, NGINX),
        (NGINX, "x" * 10_000, 1, NGINX),
        # No valid address anywhere.
        (None, None, 0, None),
        ("", "192.0.2.1", 0, None),
    ],
)
def test_it_takes_the_client_from_the_configured_hops(
    remote: str | None, forwarded: str | None, proxies: int, expected: str | None
) -> None:
    assert address_of(remote, forwarded, proxies) == expected


def test_it_reads_the_request_as_the_settings_say(settings: Any) -> None:
    request = RequestFactory().get(
        "/", REMOTE_ADDR=NGINX, HTTP_X_FORWARDED_FOR=f"192.0.2.1, {CLIENT}"
    )
    settings.CTXWEB_PROXY_COUNT = 0
    assert client_address(request) == NGINX
    settings.CTXWEB_PROXY_COUNT = 1
    assert client_address(request) == CLIENT


@pytest.mark.django_db
@pytest.mark.parametrize(
    "forwarded",
    [
        "198.51.100.66\x00",
        "fe80::1%eth0",
        "::ffff:198.51.100.66",
        "2001:DB8::1",
        "9" * 5000,
        ", " * 5000,
        "\u00b2.1.1.1",
    ],
)
def test_a_login_with_any_forwarded_value_is_answered_not_failed(
    forwarded: str, settings: Any
) -> None:
    """Each value reaches axes' address column (PostgreSQL's ``inet``) only as a valid address."""
    from django.test import Client

    settings.CTXWEB_PROXY_COUNT = 1
    answer = Client().post(
        "/accounts/login/",
        {"username": "nobody", "password": "wrong"},
        REMOTE_ADDR=NGINX,
        HTTP_X_FORWARDED_FOR=forwarded,
    )
    assert answer.status_code == 200
