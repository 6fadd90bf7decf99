"""ctxweb's Redis cache backend: Django's, with one Redis client per server for the process,
shared by threads; values round-trip as with Django's. Against the real Redis of the production
pass (``REDIS_URL``); skipped without one."""

from __future__ import annotations

import threading
import uuid

import pytest
from django.conf import settings
from django.core.cache import caches
from django.core.cache.backends.locmem import LocMemCache

from ctxweb.cache import RedisCache


@pytest.fixture
def redis_cache() -> RedisCache:
    if not settings.REDIS_URL:
        pytest.skip("the Redis cache: REDIS_URL is not set (the production pass sets it)")
    return RedisCache(settings.REDIS_URL, {"KEY_PREFIX": f"test-{uuid.uuid4().hex}"})


def test_the_settings_use_it_with_redis_and_local_memory_without() -> None:
    backend = caches.create_connection("default")
    assert isinstance(backend, RedisCache if settings.REDIS_URL else LocMemCache)


def test_one_client_serves_every_call_and_thread(redis_cache: RedisCache) -> None:
    cache = redis_cache
    clients = []

    def work(n: int) -> None:
        for i in range(20):
            cache.set(f"k{n}-{i}", {"n": n, "i": i}, 30)
            assert cache.get(f"k{n}-{i}") == {"n": n, "i": i}
        clients.append(cache._cache.get_client(write=True))

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(clients) == 4
    assert all(client is clients[0] for client in clients)
    assert cache._cache.get_client() is clients[0]  # one server: reads use the same pool
    # what Django's backend does with values: integers stay integers (incr works), the rest
    # is pickled
    cache.set("n", 41, 30)
    assert cache.incr("n") == 42
    assert cache.get_many(["n", "k0-0", "missing"]) == {"n": 42, "k0-0": {"n": 0, "i": 0}}
    cache.delete_many(["n", *(f"k{n}-{i}" for n in range(4) for i in range(20))])
    assert cache.get("n") is None
