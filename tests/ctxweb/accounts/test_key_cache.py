"""The API key cache: a known key costs one cache read and no query; any change to the key or
its project (revoked by the service or in the admin, deleted, the project renamed or deleted)
is seen by the very next request; a cache that is down falls back to the database."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from ctxweb.accounts.models import ApiKey, hash_key
from ctxweb.accounts.selectors import api_key_get_active
from ctxweb.accounts.services import api_key_revoke
from tests.support.world import World


def stored(world: World) -> ApiKey:
    return ApiKey.objects.get(key_hash=hash_key(world.ingest_key))


def test_a_known_key_is_found_without_a_query(world: World) -> None:
    first = api_key_get_active(raw_key=world.ingest_key)
    assert first is not None
    with CaptureQueriesContext(connection) as queries:
        again = api_key_get_active(raw_key=world.ingest_key)
    assert queries.captured_queries == []
    assert again is not None
    assert again.pk == first.pk
    assert again.project.name == world.project.name  # the project comes with it


def test_a_revoked_key_is_refused_by_the_next_request(world: World) -> None:
    client = world.api(world.ingest_key)
    assert client.get("/api/v1/sessions").status_code == 200  # now cached
    api_key_revoke(key=stored(world))
    assert client.get("/api/v1/sessions").status_code == 401


def test_a_key_revoked_or_deleted_in_the_admin_is_refused_at_once(world: World) -> None:
    assert api_key_get_active(raw_key=world.ingest_key) is not None
    key = stored(world)
    key.revoked_at = timezone.now()  # what the admin's change form saves
    key.save()
    assert api_key_get_active(raw_key=world.ingest_key) is None
    key.revoked_at = None
    key.save()
    assert api_key_get_active(raw_key=world.ingest_key) is not None
    ApiKey.objects.filter(pk=key.pk).delete()  # the admin's bulk delete
    assert api_key_get_active(raw_key=world.ingest_key) is None


def test_a_renamed_or_deleted_project_is_seen_at_once(world: World) -> None:
    assert api_key_get_active(raw_key=world.ingest_key) is not None
    world.project.name = "renamed"
    world.project.save()
    found = api_key_get_active(raw_key=world.ingest_key)
    assert found is not None
    assert found.project.name == "renamed"
    world.project.delete()
    assert api_key_get_active(raw_key=world.ingest_key) is None


def test_a_cache_that_is_down_falls_back_to_the_database(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ctxweb.accounts import selectors

    def down(*args: Any, **kwargs: Any) -> Any:
        raise ConnectionError("cache down")

    monkeypatch.setattr(selectors.cache, "get", down)
    monkeypatch.setattr(selectors.cache, "set", down)
    monkeypatch.setattr(selectors.cache, "delete_many", down)
    found = api_key_get_active(raw_key=world.ingest_key)
    assert found is not None
    assert found.pk == stored(world).pk
    api_key_revoke(key=stored(world))  # forgetting fails quietly; the database still decides
    assert api_key_get_active(raw_key=world.ingest_key) is None
