"""WebSocket origins: a socket opens only from a page served at one of ``CTXWEB_ALLOWED_ORIGINS``.

Each configured origin is exact: a scheme (``http`` or ``https``), a host and a port (the
scheme's default when left out). Another port on the same host, a subdomain or another scheme is
another origin, and refused, as is a handshake with no ``Origin`` at all. The list is read at
each handshake, and checked when the settings load (:func:`parse_origins`).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured

#: Each scheme an origin may have, and its default port.
DEFAULT_PORTS = {"http": 80, "https": 443}

#: A DNS name: labels of letters, digits, ``-`` and ``_``, none empty, none starting with ``-``.
HOST_NAME = re.compile(r"(?!-)[a-z0-9_-]{1,63}(?:\.(?!-)[a-z0-9_-]{1,63})*\.?", re.IGNORECASE)

Origin = tuple[str, str, int]


def origin_of(text: str) -> Origin | None:
    """``text`` as ``(scheme, host, port)``, lower-cased and with the scheme's default port
    filled in, or None when it is not an origin (a path, a query, credentials, another scheme,
    ``null``).

    >>> origin_of("HTTP://LocalHost")
    ('http', 'localhost', 80)
    """
    try:
        parts = urlsplit(text.strip())
        port = parts.port
    except ValueError:
        return None
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    if scheme not in DEFAULT_PORTS or not _is_host(host):
        return None
    if parts.path not in ("", "/") or parts.query or parts.fragment or "@" in parts.netloc:
        return None
    return (scheme, host, port if port is not None else DEFAULT_PORTS[scheme])


def _is_host(name: str) -> bool:
    """Whether ``name`` is an IP address or a DNS name (ASCII, as browsers send it): no wildcard,
    no empty label."""
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return HOST_NAME.fullmatch(name) is not None
    return True


def parse_origins(values: Iterable[str]) -> frozenset[Origin]:
    """The configured origins, or :class:`ImproperlyConfigured` naming the first one that is not
    ``scheme://host[:port]`` (wildcards included: every origin is exact)."""
    origins = set()
    for value in values:
        origin = origin_of(value)
        if origin is None:
            raise ImproperlyConfigured(
                f"CTXWEB_ALLOWED_ORIGINS: {value!r} is not an origin: write scheme://host[:port],"
                " such as https://ctxweb.example.com or http://127.0.0.1:8000"
            )
        origins.add(origin)
    return frozenset(origins)


#: Hosts a browser reaches only from the machine itself (``make run``): never checked.
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})


def check_origins_cover_hosts(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """A deploy check (``manage.py check --deploy``): a warning naming each host of
    ``ALLOWED_HOSTS`` (loopback and wildcards aside) that no configured origin has, since the
    pages served there could not open their WebSocket (live updates)."""
    hosts = {host for _, host, _ in parse_origins(settings.CTXWEB_ALLOWED_ORIGINS)}
    missing = [
        name
        for name in settings.ALLOWED_HOSTS
        if name != "*"
        and not name.startswith(".")
        and name.strip("[]").lower() not in hosts | LOOPBACK_HOSTS
    ]
    if not missing:
        return []
    return [
        checks.Warning(
            f"No origin in CTXWEB_ALLOWED_ORIGINS has the host(s) {', '.join(missing)} of"
            " ALLOWED_HOSTS: the pages served there cannot open their WebSocket (live updates).",
            hint="Set CTXWEB_ALLOWED_ORIGINS to the pages' origins, such as"
            " https://ctxweb.example.com (scheme, host and port).",
            id="ctxweb.W001",
        )
    ]


class OriginValidator:
    """ASGI middleware for WebSockets: the handshake is refused (403) unless its ``Origin``
    header is exactly one of ``CTXWEB_ALLOWED_ORIGINS``; the wrapped application sees only
    sockets that passed."""

    def __init__(self, application: Any) -> None:
        self.application = application

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "websocket":
            raise ValueError(f"WebSocket only, not {scope['type']!r}")
        if self.allowed(scope):
            await self.application(scope, receive, send)
            return
        # Answering the handshake's connect with a close refuses it (the ASGI spec: HTTP 403).
        message = await receive()
        if message["type"] == "websocket.connect":
            await send({"type": "websocket.close"})

    @staticmethod
    def allowed(scope: Any) -> bool:
        values = [value for name, value in scope.get("headers") or [] if name == b"origin"]
        if len(values) != 1:
            return False
        origin = origin_of(values[0].decode("latin-1"))
        # Read at each handshake: a changed setting applies at once.
        return origin is not None and origin in parse_origins(settings.CTXWEB_ALLOWED_ORIGINS)
