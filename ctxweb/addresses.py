"""The client address of a request: the one place ctxweb reads it (login lockouts count against it).

A client can write any ``X-Forwarded-For`` it likes; only the entries that the operator's own
proxies appended can be believed. With ``CTXWEB_PROXY_COUNT`` = N (the reverse proxies every
request passes through, 0 when clients connect to ctxweb directly), the connection's address
(``REMOTE_ADDR``) is the nearest proxy's, each proxy appended the address it saw, and the client
is the N-th entry counted from the right. Entries left of it came from the client and are
ignored, so a forged header changes nothing. The server itself must pass ``X-Forwarded-For``
through untouched and keep the connection's address in ``REMOTE_ADDR`` (daphne without
``--proxy-headers``, uvicorn with ``--no-proxy-headers``): this reads only what every server
puts in a Django request.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from django.conf import settings


def address_of(remote: str | None, forwarded: str | None, proxies: int) -> str | None:
    """The client's address, given the connection's address ``remote``, the ``X-Forwarded-For``
    value ``forwarded`` (repeated headers joined with commas) and the number of trusted
    ``proxies`` in front of the server; None when there is no valid address at all.

    With fewer entries than proxies (a request that did not pass through all of them) the
    leftmost entry is taken: every entry then came from a proxy. An entry that is not an IP
    address (only a misconfigured count can reach one) falls back to the connection's address.

    >>> address_of("10.0.0.2", "6.6.6.6, 198.51.100.4", 1)
    '198.51.100.4'
    >>> address_of("198.51.100.4", "6.6.6.6", 0)
    '198.51.100.4'
    """
    connection = _valid(remote)
    if proxies <= 0:
        return connection
    hops = [entry.strip() for entry in (forwarded or "").split(",") if entry.strip()]
    chain = [*hops, remote or ""]
    chosen = chain[max(0, len(chain) - 1 - proxies)]
    return _valid(chosen) or connection


def client_address(request: Any) -> str | None:
    """The address of the client that sent the Django ``request`` (see the module's docstring);
    django-axes reads it through ``AXES_CLIENT_IP_CALLABLE``."""
    meta = request.META
    return address_of(
        meta.get("REMOTE_ADDR"),
        meta.get("HTTP_X_FORWARDED_FOR"),
        settings.CTXWEB_PROXY_COUNT,
    )


def _valid(text: str | None) -> str | None:
    """``text`` as a canonical IP address (an IPv4 address mapped into IPv6 as IPv4, IPv6
    brackets and zone dropped: PostgreSQL's ``inet`` refuses a zone), or None when it is not
    one."""
    if not text:
        return None
    value = text.strip()
    if value.startswith("[") and value.endswith("]"):
        value = value[1:-1]
    value = value.partition("%")[0]
    try:
        address = ipaddress.ip_address(value)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(address)
