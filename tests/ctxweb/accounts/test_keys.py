"""API keys: a read records the key's use without writing on the request's path."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from ctxweb.accounts.models import ApiKey
from ctxweb.accounts.services import api_key_touches_wait
from tests.support.world import World


def writes(queries: CaptureQueriesContext) -> list[str]:
    return [
        q["sql"]
        for q in queries.captured_queries
        if q["sql"].lstrip().upper().startswith(("UPDATE", "INSERT", "DELETE"))
    ]


@pytest.mark.django_db(transaction=True)
def test_a_read_writes_nothing_and_the_use_is_recorded_in_the_background(
    world: World, settings: Any
) -> None:
    settings.CTXWEB_TASKS_INLINE = False
    client = world.api(world.ingest_key)
    key = ApiKey.objects.get(project=world.project, role="ingest")
    assert key.last_used_at is None
    with CaptureQueriesContext(connection) as queries:
        assert client.get("/api/v1/sessions").status_code == 200
    assert writes(queries) == []
    api_key_touches_wait()
    key.refresh_from_db()
    assert key.last_used_at is not None
    first = key.last_used_at
    # Within the minute: nothing more to write.
    assert client.get("/api/v1/sessions").status_code == 200
    api_key_touches_wait()
    key.refresh_from_db()
    assert key.last_used_at == first


@pytest.mark.django_db
def test_inline_tasks_record_the_use_at_once(world: World, settings: Any) -> None:
    settings.CTXWEB_TASKS_INLINE = True
    world.api(world.operator_key).get("/api/v1/sessions")
    assert ApiKey.objects.get(project=world.project, role="operator").last_used_at is not None
