"""Langfuse's batch ingestion (``POST /api/public/ingestion``), as SDKs and exporters that still
use it send it: the documented example of docs/ingest-formats.md §3.1 (trace, generation-create,
generation-update split over two requests), LiteLLM's one generation-create with everything, and
Langfuse's answer shape (207, successes and errors per event). The Langfuse SDK in use today (v5)
no longer has a client for this endpoint; its OTLP path is tested with the real SDK in
test_otlp_clients.py."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from django.test import Client

from ctxweb.contexts.models import Session, Turn
from tests.support.world import World

pytestmark = pytest.mark.django_db

SYSTEM = {"role": "system", "content": "You are a careful coding agent."}
USER = {"role": "user", "content": "Why does the build fail?"}


def basic(key: str) -> str:
    return "Basic " + base64.b64encode(f"pk-lf-1234:{key}".encode()).decode()


def ingest(world: World, batch: list[dict[str, Any]], key: str | None = None) -> Any:
    return Client().post(
        "/api/public/ingestion",
        json.dumps({"batch": batch, "metadata": {"sdk_name": "python"}}),
        content_type="application/json",
        HTTP_AUTHORIZATION=basic(key or world.ingest_key),
    )


def event(event_id: str, kind: str, body: dict[str, Any]) -> dict[str, Any]:
    return {"id": event_id, "timestamp": "2026-01-01T00:00:00.000Z", "type": kind, "body": body}


def test_the_documented_batch_becomes_a_turn_and_its_later_update_reports_usage(
    world: World,
) -> None:
    first = ingest(
        world,
        [
            event("e1", "trace-create", {"id": "t1", "sessionId": "s1", "name": "agent-turn"}),
            event(
                "e2",
                "generation-create",
                {
                    "id": "g1",
                    "traceId": "t1",
                    "model": "claude-sonnet-4-5",
                    "startTime": "2026-01-01T00:00:00.100Z",
                    "input": [SYSTEM, USER],
                },
            ),
        ],
    )
    assert first.status_code == 207
    assert first.json() == {
        "successes": [{"id": "e1", "status": 201}, {"id": "e2", "status": 201}],
        "errors": [],
    }
    turn = Turn.objects.get(session__project=world.project, session__external_id="s1")
    assert turn.turn_id == "lf:g1"
    assert turn.reported_input_tokens is None
    # The update comes in the next batch, with the output and the usage.
    second = ingest(
        world,
        [
            event(
                "e3",
                "generation-update",
                {
                    "id": "g1",
                    "endTime": "2026-01-01T00:00:03.000Z",
                    "output": {"role": "assistant", "content": "A missing import."},
                    "usageDetails": {"input": 12000, "output": 350, "input_cached_tokens": 9000},
                },
            )
        ],
    )
    assert second.json()["successes"] == [{"id": "e3", "status": 201}]
    turn.refresh_from_db()
    assert turn.reported_input_tokens == 21000  # Langfuse's input is what the cache did not hold
    assert turn.regions["unattributed"] == 21000 - turn.counted_tokens
    session = Session.objects.get(pk=turn.session_id)
    assert session.last_total_tokens == turn.total_tokens == 21000


def test_a_generation_whose_trace_came_earlier_joins_that_session(world: World) -> None:
    ingest(world, [event("e1", "trace-create", {"id": "t9", "sessionId": "later"})])
    body = {"id": "g9", "traceId": "t9", "model": "gpt-4o", "input": [SYSTEM, USER]}
    ingest(world, [event("e2", "generation-create", body)])
    assert Turn.objects.get(turn_id="lf:g9").session.external_id == "later"


def test_litellms_single_create_with_everything(world: World) -> None:
    body = {
        "id": "gen-1",
        "traceId": "trace-1",
        "name": "litellm-acompletion",
        "model": "gpt-4o",
        "modelParameters": {"temperature": "0.2", "max_tokens": "512"},
        "input": {"messages": [SYSTEM, USER]},
        "output": {"role": "assistant", "content": "Checking."},
        "usage": {"promptTokens": 40, "completionTokens": 3, "totalTokens": 43},
    }
    response = ingest(world, [event("x1", "generation-create", body)])
    assert response.json()["errors"] == []
    turn = Turn.objects.get(turn_id="lf:gen-1")
    assert turn.session.external_id == "trace-1"  # no session: the trace
    assert turn.reported_input_tokens == 40
    assert turn.session.source == "langfuse"


def test_the_same_batch_again_doubles_nothing(world: World) -> None:
    batch = [event("e1", "generation-create", {"id": "g2", "traceId": "t2", "input": [USER]})]
    ingest(world, batch)
    ingest(world, batch)
    assert Turn.objects.count() == 1


def test_bad_events_get_their_own_errors_and_the_rest_land(world: World) -> None:
    response = ingest(
        world,
        [
            event("ok", "generation-create", {"id": "g3", "traceId": "t3", "input": [USER]}),
            event("bad-input", "generation-create", {"id": "g4", "traceId": "t3", "input": 42}),
            event("unknown", "hologram-create", {"id": "h"}),
            {"id": "no-body", "type": "span-create"},
            event("span", "span-create", {"id": "sp", "traceId": "t3"}),
            event("score", "score-create", {"id": "sc", "name": "q", "value": 1}),
        ],
    )
    assert response.status_code == 207
    answer = response.json()
    assert {s["id"] for s in answer["successes"]} == {"ok", "span", "score"}
    errors = {e["id"]: e for e in answer["errors"]}
    assert set(errors) == {"bad-input", "unknown", "no-body"}
    assert errors["bad-input"]["status"] == 400
    assert "input" in errors["bad-input"]["message"]
    assert Turn.objects.count() == 1


def test_a_body_that_is_no_batch_is_a_400_and_no_key_a_401(world: World) -> None:
    response = Client().post(
        "/api/public/ingestion",
        json.dumps({"events": []}),
        content_type="application/json",
        HTTP_AUTHORIZATION=basic(world.ingest_key),
    )
    assert response.status_code == 400
    anonymous = Client().post("/api/public/ingestion", "{}", content_type="application/json")
    assert anonymous.status_code in (401, 403)


def test_another_projects_key_writes_into_its_own_project(world: World) -> None:
    body = {"id": "g5", "traceId": "shared", "input": [USER]}
    ingest(world, [event("e", "generation-create", body)])
    ingest(
        world,
        [event("e", "generation-create", {**body, "input": [SYSTEM, USER]})],
        world.outsider_key,
    )
    assert Session.objects.get(project=world.project, external_id="shared").turn_count == 1
    assert Session.objects.get(project=world.other_project, external_id="shared").turn_count == 1
