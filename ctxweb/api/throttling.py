"""Rate limits of the REST API: per API key, or per user for a dashboard login.

Two budgets, both read from settings at request time (``CTXWEB_RATE_LIMIT`` and
``CTXWEB_RATE_LIMIT_COSTLY``, such as ``"1200/min"``): every request counts against the first;
previews, operations and imports, which plan over a whole context, also count against the
second, lower one. Over a budget the API answers ``429`` with ``Retry-After`` and the contract's
error shape (:mod:`ctxweb.api.errors`). Requests are counted in fixed windows of the period
(:mod:`ctxweb.ratelimit`: one cache round trip a request), in Django's cache, shared by every
process when ``REDIS_URL`` is set.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from django.conf import settings
from rest_framework.throttling import BaseThrottle

from ctxweb import ratelimit

if TYPE_CHECKING:  # DRF imports this module while rest_framework.views is still loading
    from rest_framework.request import Request
    from rest_framework.views import APIView

logger = logging.getLogger(__name__)

#: Routes that plan or apply a strategy over a whole context, or import a transcript.
COSTLY_ROUTES = frozenset(
    {
        "api-preview",
        "api-session-preview",
        "api-operations",
        "api-operation-undo",
        "api-import",
        "api-replays",
        # Pages: the preview page plans on every load; its Apply form queues an operation.
        "session-preview",
        "session-operation-apply",
    }
)


class ApiRateThrottle(BaseThrottle):
    """Every authenticated API request: ``CTXWEB_RATE_LIMIT`` per key or user."""

    scope = "api"
    setting = "CTXWEB_RATE_LIMIT"

    def __init__(self) -> None:
        self._wait: int | None = None

    def applies(self, request: Request, view: APIView) -> bool:
        return True

    def allow_request(self, request: Request, view: APIView) -> bool:
        # Read at each request: a changed setting applies at once.
        rate = ratelimit.parse_rate(str(getattr(settings, self.setting, "") or ""))
        if rate is None:
            return True
        name = self.get_cache_key(request, view)
        if name is None:
            return True
        # A limit guards the service; it must not become a way for a Redis outage to take the
        # API down with it: when the cache cannot be reached the request goes through.
        try:
            hit = ratelimit.hit(name, rate)
        except Exception:
            logger.warning("rate limit %s not checked: the cache is unavailable", self.scope)
            return True
        self._wait = hit.wait(rate)
        return self._wait is None

    def wait(self) -> float | None:
        """Seconds until the caller's window ends, after a refused request."""
        return self._wait

    def get_cache_key(self, request: Request, view: APIView) -> str | None:
        from ctxweb.accounts.access import caller_ident  # models load after the settings

        ident = caller_ident(request)
        if ident is None or not self.applies(request, view):
            return None
        return f"ctxweb-throttle:{self.scope}:{ident}"


class CostlyRateThrottle(ApiRateThrottle):
    """Previews, operations and imports: ``CTXWEB_RATE_LIMIT_COSTLY`` per key or user."""

    scope = "costly"
    setting = "CTXWEB_RATE_LIMIT_COSTLY"

    def applies(self, request: Request, view: APIView) -> bool:
        match: Any = getattr(request, "resolver_match", None)
        return match is not None and match.url_name in COSTLY_ROUTES


def page_throttles() -> list[ApiRateThrottle]:
    """The limits a page request counts against: the same budgets, and the same counters, as
    the API's (:class:`ApiRateThrottle`, :class:`CostlyRateThrottle`)."""
    return [ApiRateThrottle(), CostlyRateThrottle()]
