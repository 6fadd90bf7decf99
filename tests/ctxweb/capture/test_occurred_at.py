"""Captured turns dated when their call started (issue 36): an OTLP span's start time, a
Langfuse generation's ``startTime``; an absent or absurd start leaves the recording time."""

from __future__ import annotations

import base64
import datetime
import json
from typing import Any

import pytest
from django.test import Client

from ctxweb.contexts.models import AttributionDay, Turn
from tests.support.world import World

pytestmark = pytest.mark.django_db

UTC = datetime.UTC
#: 2025-09-25T02:12:23.966123Z in nanoseconds since the epoch.
START = 1_758_766_343_966_123_456
SYSTEM = {"role": "system", "content": "You are terse."}
USER = {"role": "user", "content": "Hi"}


def llm_span(span_id: str, start: int, messages: list[dict[str, Any]]) -> dict[str, Any]:
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.input.messages": json.dumps(messages),
    }
    return {
        "traceId": "5b8efff798038103d269b633813fc60c",
        "spanId": span_id,
        "name": "chat gpt-4o",
        "startTimeUnixNano": str(start),
        "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attributes.items()],
    }


def otlp(world: World, *spans: dict[str, Any]) -> Any:
    document = {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [{"key": "session.id", "value": {"stringValue": "sess-1"}}]
                },
                "scopeSpans": [{"scope": {"name": "test"}, "spans": list(spans)}],
            }
        ]
    }
    return Client().post(
        "/v1/traces",
        json.dumps(document).encode(),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {world.ingest_key}",
    )


def event(event_id: str, kind: str, body: dict[str, Any]) -> dict[str, Any]:
    return {"id": event_id, "timestamp": "2025-09-25T02:12:24.000Z", "type": kind, "body": body}


def langfuse_ingest(world: World, batch: list[dict[str, Any]]) -> Any:
    basic = base64.b64encode(f"pk-lf-1234:{world.ingest_key}".encode()).decode()
    return Client().post(
        "/api/public/ingestion",
        json.dumps({"batch": batch}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Basic {basic}",
    )


def parts(role: str, content: str) -> dict[str, Any]:
    return {"role": role, "parts": [{"type": "text", "content": content}]}


CALL_1 = [parts("system", "You are terse."), parts("user", "Hi")]
CALL_2 = [*CALL_1, parts("assistant", "Hello"), parts("user", "Bye")]


def test_an_otlp_spans_start_dates_its_turn_and_its_day(world: World) -> None:
    answer = otlp(
        world,
        llm_span("00000000000000c1", START, CALL_1),
        llm_span("00000000000000c2", 150, CALL_2),  # a clock that says 1970: ignored
    )
    assert answer.status_code == 200
    first = Turn.objects.get(turn_id="00000000000000c1")
    second = Turn.objects.get(turn_id="00000000000000c2")
    assert first.occurred_at == datetime.datetime(2025, 9, 25, 2, 12, 23, 966123, tzinfo=UTC)
    assert second.occurred_at is None
    days = dict(AttributionDay.objects.filter(session=first.session).values_list("day", "turns"))
    assert days[datetime.date(2025, 9, 25)] == 1
    assert sum(days.values()) == 2


def test_a_langfuse_generations_start_time_dates_its_turn(world: World) -> None:
    answer = langfuse_ingest(
        world,
        [
            event("e1", "trace-create", {"id": "t1", "sessionId": "lf-dated"}),
            event(
                "e2",
                "generation-create",
                {
                    "id": "g1",
                    "traceId": "t1",
                    "model": "gpt-4o",
                    "startTime": "2025-09-25T04:12:23.966+02:00",
                    "input": [SYSTEM, USER],
                },
            ),
            event(
                "e3",
                "generation-create",
                {"id": "g2", "traceId": "t1", "model": "gpt-4o", "input": [SYSTEM, USER]},
            ),
        ],
    )
    assert answer.status_code == 207
    assert answer.json()["errors"] == []
    dated = Turn.objects.get(turn_id="lf:g1")
    assert dated.occurred_at == datetime.datetime(2025, 9, 25, 2, 12, 23, 966000, tzinfo=UTC)
    assert Turn.objects.get(turn_id="lf:g2").occurred_at is None


def test_a_sessions_exports_carry_each_turns_date_and_a_read_back_keeps_it(world: World) -> None:
    otlp(
        world,
        llm_span("00000000000000c1", START, CALL_1),
        llm_span("00000000000000c2", 150, CALL_2),  # undated: exported as when it was recorded
    )
    dated = datetime.datetime(2025, 9, 25, 2, 12, 23, 966123, tzinfo=UTC)
    originals = list(Turn.objects.filter(session__project=world.project).order_by("index"))
    assert sorted((t.turn_id, t.occurred_at) for t in originals) == [
        ("00000000000000c1", dated),
        ("00000000000000c2", None),
    ]
    api = world.api(world.ingest_key)
    lines = b"".join(api.get("/api/v1/sessions/sess-1/export?format=jsonl").streaming_content)
    assert [json.loads(line)["occurred_at"] for line in lines.splitlines()] == [
        t.occurred_at.isoformat() if t.occurred_at else None for t in originals
    ]
    document = b"".join(
        api.get("/api/v1/sessions/sess-1/export?format=otlp-json").streaming_content
    )
    spans = json.loads(document)["resourceSpans"][0]["scopeSpans"][0]["spans"]
    moments = [t.occurred_at or t.created_at for t in originals]
    assert [span["startTimeUnixNano"] for span in spans] == [
        str(int(m.timestamp()) * 10**9 + m.microsecond * 1000) for m in moments
    ]
    assert str(START // 1000 * 1000) in {span["startTimeUnixNano"] for span in spans}
    read_back = Client().post(
        "/v1/traces",
        document,
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {world.outsider_key}",
    )
    assert read_back.status_code == 200
    copies = Turn.objects.filter(session__project=world.other_project).order_by("index")
    # the undated one dated when it was recorded (the receiver orders spans by their start)
    assert sorted(turn.occurred_at for turn in copies) == sorted(moments)
