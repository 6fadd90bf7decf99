"""The proxy's key check on the event loop (:func:`ctxweb.proxy.relay._admit_here`): only for a
key found in the process's own cache, never a database read on the loop, never with a shared
cache; anything else goes to the key threads."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path
from typing import Any

import pytest
from django.core.cache import cache

from ctxweb.accounts.selectors import api_key_cache_name, api_key_get_active
from ctxweb.proxy import relay
from tests.support.world import World


def on_a_loop(raw_key: str) -> Any:
    """``_admit_here`` as the relay calls it: from a coroutine on a running event loop (where
    Django refuses a database query)."""

    async def admit() -> Any:
        return relay._admit_here(raw_key)

    return asyncio.run(admit())


@pytest.mark.django_db(transaction=True)
def test_a_cached_key_is_checked_on_the_loop_and_an_uncached_one_is_not(world: World) -> None:
    cache.clear()
    assert on_a_loop(world.ingest_key) is None  # not cached: the database, so a thread
    assert on_a_loop("not-a-key") is None
    key = api_key_get_active(raw_key=world.ingest_key)  # cached now, as a thread's check does
    assert key is not None
    admitted = on_a_loop(world.ingest_key)
    assert admitted is not None
    assert admitted[0].pk == key.pk
    assert admitted[1] is None  # under its rate


@pytest.mark.django_db(transaction=True)
def test_no_check_on_the_loop_with_a_shared_cache_or_inline_tasks(
    world: World, settings: Any, tmp_path: Path
) -> None:
    cache.clear()
    assert api_key_get_active(raw_key=world.ingest_key) is not None
    settings.CTXWEB_TASKS_INLINE = True  # a use would be recorded inline: a database write
    assert on_a_loop(world.ingest_key) is None
    settings.CTXWEB_TASKS_INLINE = False
    assert on_a_loop(world.ingest_key) is not None
    # a cache other processes share (on disk here, as Redis is over the network): its reads
    # are I/O, so the check goes to a thread though the key is in it
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
            "LOCATION": str(tmp_path / "cache"),
        }
    }
    assert api_key_get_active(raw_key=world.ingest_key) is not None
    assert cache.get(api_key_cache_name(hashlib.sha256(world.ingest_key.encode()).hexdigest()))
    assert on_a_loop(world.ingest_key) is None
