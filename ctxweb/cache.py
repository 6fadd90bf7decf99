"""Django's Redis cache backend, with each server's client made once, and a counter that
expires in one round trip (:meth:`RedisCache.incr_expiring`, for :mod:`ctxweb.ratelimit`), as
does a budget's debit (:meth:`RedisCache.debit`).

Django's client makes a new ``redis.Redis`` for every cache call (55 µs on this machine), around
a command whose round trip to Redis costs about 130 µs: reading a small value took 210 µs, and
135 µs with the client made once. Every API request reads the cache at least once (its API key,
then each rate limit). A ``redis.Redis`` is safe to share between threads (each command takes a
connection from the pool and gives it back), and after a fork its pool opens new connections:
one client per pool is enough (Django makes a cache object per thread, and each its client).
"""

from __future__ import annotations

from typing import Any

from django.core.cache.backends import redis as django_redis


class RedisCacheClient(django_redis.RedisCacheClient):
    """Django's client, but for one ``redis.Redis`` per connection pool."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._clients: dict[int, Any] = {}

    def get_client(self, key: Any = None, *, write: bool = False) -> Any:
        django_client: Any = self  # Django's private parts, which its type stubs do not declare
        pool = django_client._get_connection_pool(write)
        client = self._clients.get(id(pool))  # a pool lives as long as this client
        if client is None:
            client = self._clients[id(pool)] = django_client._client(connection_pool=pool)
        return client


class RedisCache(django_redis.RedisCache):
    """``django.core.cache.backends.redis.RedisCache`` with :class:`RedisCacheClient`."""

    def __init__(self, server: Any, params: dict[str, Any]) -> None:
        super().__init__(server, params)
        self._class = RedisCacheClient

    def incr_expiring(self, key: str, timeout: int) -> int:
        """Add one to the counter ``key`` (created at 0 if missing) and have it expire
        ``timeout`` seconds from now: one round trip (Django's ``incr`` asks whether the key
        exists first, and cannot set an expiry)."""
        name = self.make_and_validate_key(key)
        client = self._cache.get_client(name, write=True)
        pipeline = client.pipeline(transaction=False)
        pipeline.incr(name)
        pipeline.expire(name, timeout)
        count, _ = pipeline.execute()
        return int(count)

    def debit(self, key: str, *, now: float, cost: float, burst: float) -> float:
        """The budget ``key`` (the time at which it is whole again) charged ``cost`` seconds
        when it is within ``burst`` seconds of whole at ``now``: the seconds past ``burst``
        (not charged when above 0). One round trip: a script run by Redis, whole."""
        name = self.make_and_validate_key(key)
        client = self._cache.get_client(name, write=True)
        script = _DEBIT_SCRIPTS.get(id(client))
        if script is None:
            script = _DEBIT_SCRIPTS[id(client)] = client.register_script(_DEBIT)
        return float(script(keys=[name], args=[repr(now), repr(cost), repr(burst)]))


#: Numbers go to Redis and back as text: a Lua number returned is cut to an integer.
_DEBIT = """
local now, cost, burst = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local full = math.max(tonumber(redis.call('GET', KEYS[1]) or '0'), now)
local wait = full - now - burst
if wait <= 0 then
  full = full + cost
  redis.call('SET', KEYS[1], string.format('%.6f', full), 'EX', math.ceil(full - now) + 1)
end
return string.format('%.6f', wait)
"""
_DEBIT_SCRIPTS: dict[int, Any] = {}
