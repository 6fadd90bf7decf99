"""Unread calls (raw, never masked) do not outlive what they belong to: deleting a session deletes
the calls kept on it and those kept on its project before it existed, naming it; a project's
retention deletes its unread calls older than its cutoff, session or not."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from ctxweb import tasks
from ctxweb.contexts.models import AuditEvent, UnreadCall
from ctxweb.contexts.services.unread import unread_call_record
from tests.support.builders import body, history
from tests.support.world import World

pytestmark = pytest.mark.django_db

RAW = json.dumps({"model": "m", "messages": [{"role": "user", "content": 5}]}).encode()


def keep(world: World, external_id: str) -> UnreadCall:
    return unread_call_record(
        project=world.project,
        session_external_id=external_id,
        format="openai-chat",
        request_body=RAW,
        response_body=b"{}",
        streamed=False,
        compressed=False,
        error="messages.0.content: expected text",
    )


def post_turn(world: World, external_id: str) -> None:
    answer = world.api(world.ingest_key).post(
        f"/api/v1/sessions/{external_id}/turns",
        data=json.dumps(body(history(1))),
        content_type="application/json",
    )
    assert answer.status_code == 201, answer.content


def test_deleting_a_session_deletes_the_calls_kept_before_it_existed_naming_it(
    world: World,
) -> None:
    early = keep(world, "later")
    assert early.session is None, "no session of that name yet"
    post_turn(world, "later")
    linked = keep(world, "later")
    assert linked.session is not None
    other = keep(world, "another")
    assert world.api(world.operator_key).delete("/api/v1/sessions/later").status_code == 204
    assert list(UnreadCall.objects.values_list("pk", flat=True)) == [other.pk]
    entry = AuditEvent.objects.get(action="session.delete")
    assert entry.detail["unread_calls"] == 2


def test_a_projects_retention_deletes_its_old_unread_calls(world: World) -> None:
    old, recent = keep(world, ""), keep(world, "gone-before")
    UnreadCall.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=8))
    tasks.sessions_expire()
    assert UnreadCall.objects.count() == 2, "no retention set: kept"
    world.project.retention_days = 7
    world.project.save()
    tasks.sessions_expire()
    assert list(UnreadCall.objects.values_list("pk", flat=True)) == [recent.pk]
