"""Rate limits counted in fixed windows of Django's cache, one cache round trip a request.

A rate such as ``1200/min`` (``CTXWEB_RATE_LIMIT``) allows that many requests per caller in each
window of the period, the windows aligned on the clock (as GitHub's API counts its limits); a
caller over it waits until its window ends (``Retry-After``). Each request adds one to its
window's counter: with Redis (:class:`ctxweb.cache.RedisCache`) an ``INCR`` and an ``EXPIRE``
sent together, one round trip of a few bytes, where DRF's throttle read and wrote back the list
of the caller's request times (up to 1,200 floats, pickled: two round trips); with another
cache, ``add`` then ``incr``.

Budgets of bytes (:func:`debit`, the proxy's ``CTXWEB_PROXY_KEY_MB_PER_MINUTE``) refill
continuously instead, so that a key over its budget is slowed to its rate, not let through in
bursts at each window's start: the generic cell rate algorithm, one value a caller (the time at
which its budget is whole again), one round trip to Redis (a script).
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass

from django.core.exceptions import ImproperlyConfigured

#: A period's length in seconds, by the first letter of its unit (``s``, ``min``, ``hour``,
#: ``day``), as DRF reads rates.
PERIODS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


@dataclass(frozen=True)
class Rate:
    """``allowed`` requests per ``seconds``."""

    allowed: int
    seconds: int


def parse_rate(text: str | None) -> Rate | None:
    """The rate ``text`` writes (``"1200/min"``, ``"10/s"``), or None for no limit (empty);
    :class:`ImproperlyConfigured` naming the value when it is not a rate."""
    if not text or not text.strip():
        return None
    number, slash, period = text.strip().partition("/")
    seconds = PERIODS.get(period.strip()[:1].lower()) if slash else None
    if not number.strip().isdigit() or seconds is None or int(number) < 1:
        raise ImproperlyConfigured(
            f"{text!r} is not a rate: write requests/period, such as 1200/min (periods: s, min,"
            " hour, day)"
        )
    return Rate(int(number), seconds)


@dataclass(frozen=True)
class Hit:
    """One request counted: the requests of its window so far (itself included), and the
    seconds left in the window."""

    count: int
    remaining: float

    def wait(self, rate: Rate) -> int | None:
        """Whole seconds to wait before the next request is allowed (``Retry-After``), or None
        when this one is within ``rate``."""
        if self.count <= rate.allowed:
            return None
        return max(1, math.ceil(self.remaining))


def hit(name: str, rate: Rate, *, now: float | None = None) -> Hit:
    """Count one request of the caller ``name`` in its current window of ``rate``. Raises what
    the cache raises when it cannot be reached (callers let the request through)."""
    from django.core.cache import caches  # the cache reads the settings: not at import

    from ctxweb.cache import RedisCache

    now = time.time() if now is None else now
    window = int(now // rate.seconds)
    key = f"{name}:{rate.seconds}:{window}"
    lifetime = rate.seconds + 1  # the window's end, and a second for clocks apart
    backend = caches["default"]
    if isinstance(backend, RedisCache):
        count = backend.incr_expiring(key, lifetime)
    elif backend.add(key, 1, lifetime):
        count = 1
    else:
        try:
            count = backend.incr(key)
        except ValueError:  # expired between the two calls: a new window's first request
            backend.add(key, 1, lifetime)
            count = 1
    return Hit(count, rate.seconds - now % rate.seconds)


#: Budgets kept in a cache other than Redis: read and written back under this process's lock.
_DEBITS = threading.Lock()


def debit(
    name: str, amount: int, *, per_second: float, burst: float, now: float | None = None
) -> float | None:
    """Take ``amount`` (bytes) from the budget of the caller ``name``, which refills at
    ``per_second`` and holds ``burst`` seconds of it: None when it is taken, else the seconds
    until the caller's budget is back within ``burst`` (nothing taken). A caller within its
    budget is never refused for the size of what it sends: the budget goes into debt by it, and
    the caller waits for the debt to be repaid before its next. Raises what the cache raises
    when it cannot be reached (callers let the request through)."""
    from django.core.cache import caches  # the cache reads the settings: not at import

    from ctxweb.cache import RedisCache

    now = time.time() if now is None else now
    cost = amount / per_second
    key = f"{name}:debit"
    backend = caches["default"]
    if isinstance(backend, RedisCache):
        wait = backend.debit(key, now=now, cost=cost, burst=burst)
    else:
        with _DEBITS:
            full = max(float(backend.get(key) or 0.0), now)  # when the budget is whole again
            wait = full - now - burst
            if wait <= 0:
                full += cost
                backend.set(key, full, math.ceil(full - now) + 1)
    return wait if wait > 0 else None
