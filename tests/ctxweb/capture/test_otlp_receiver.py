"""The OTLP receiver's protocol: encodings, compression, authentication, errors in OTLP's shape,
partial success, idempotent re-exports, project isolation. Exports here are written as the OTLP
JSON specification and the protobuf schema say (the real clients are in test_otlp_clients.py)."""

from __future__ import annotations

import base64
import gzip
import json
from typing import Any

import pytest
from django.test import Client
from google.rpc import status_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from ctxweb.contexts.models import Session, Turn
from tests.support.world import World

pytestmark = pytest.mark.django_db

TRACE = "5b8efff798038103d269b633813fc60c"


def text(value: str) -> dict[str, Any]:
    return {"stringValue": value}


def llm_span(
    span_id: str, start: int, messages: list[dict[str, Any]], **attributes: Any
) -> dict[str, Any]:
    attrs = {
        "gen_ai.operation.name": text("chat"),
        "gen_ai.request.model": text("gpt-4o"),
        "gen_ai.input.messages": text(json.dumps(messages)),
        "gen_ai.usage.input_tokens": {"intValue": "40"},
        "gen_ai.usage.output_tokens": {"intValue": 5},
        **attributes,
    }
    return {
        "traceId": TRACE,
        "spanId": span_id,
        "name": "chat gpt-4o",
        "startTimeUnixNano": str(start),
        "attributes": [{"key": k, "value": v} for k, v in attrs.items()],
    }


def message(role: str, content: str) -> dict[str, Any]:
    return {"role": role, "parts": [{"type": "text", "content": content}]}


CALL_1 = [message("system", "You are terse."), message("user", "Hi")]
CALL_2 = [*CALL_1, message("assistant", "Hello"), message("user", "Bye")]


def export(*spans: dict[str, Any], session: str = "sess-1") -> dict[str, Any]:
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": [{"key": "session.id", "value": text(session)}]},
                "scopeSpans": [{"scope": {"name": "test"}, "spans": list(spans)}],
            }
        ]
    }


def post(
    client: Client,
    body: bytes,
    key: str | None,
    content_type: str = "application/json",
    **headers: Any,
) -> Any:
    if key is not None:
        headers.setdefault("HTTP_AUTHORIZATION", f"Bearer {key}")
    return client.post("/v1/traces", body, content_type=content_type, **headers)


def post_json(client: Client, document: dict[str, Any], key: str | None, **headers: Any) -> Any:
    return post(client, json.dumps(document).encode(), key, **headers)


def test_llm_spans_become_turns_in_start_order_and_other_spans_are_ignored(world: World) -> None:
    tool_span = {
        "traceId": TRACE,
        "spanId": "00000000000000a1",
        "name": "execute_tool read",
        "startTimeUnixNano": "150",
        "attributes": [{"key": "gen_ai.tool.name", "value": text("read")}],
    }
    # Out of order within the export: the later call first.
    document = export(
        llm_span("00000000000000b2", 200, CALL_2),
        tool_span,
        llm_span("00000000000000b1", 100, CALL_1),
    )
    response = post_json(Client(), document, world.ingest_key)
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response.json() == {}
    session = Session.objects.get(project=world.project, external_id="sess-1")
    turns = list(Turn.objects.filter(session=session).order_by("index"))
    assert [t.turn_id for t in turns] == ["00000000000000b1", "00000000000000b2"]
    assert [t.message_count for t in turns] == [2, 4]
    assert turns[1].reported_input_tokens == 40


def test_the_same_export_twice_doubles_nothing(world: World) -> None:
    document = export(
        llm_span("00000000000000c1", 1, CALL_1), llm_span("00000000000000c2", 2, CALL_2)
    )
    for _ in range(2):
        assert post_json(Client(), document, world.ingest_key).status_code == 200
    assert Turn.objects.filter(session__project=world.project).count() == 2


def test_protobuf_and_gzip_are_read_and_answered_in_kind(world: World) -> None:
    request = trace_service_pb2.ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    attribute = resource_spans.resource.attributes.add()
    attribute.key, attribute.value.string_value = "session.id", "proto-session"
    span = resource_spans.scope_spans.add().spans.add()
    span.trace_id, span.span_id = bytes.fromhex(TRACE), bytes.fromhex("00000000000000d1")
    span.name, span.start_time_unix_nano = "chat", 5
    for key, value in (
        ("gen_ai.request.model", "gpt-4o"),
        ("gen_ai.input.messages", json.dumps(CALL_1)),
    ):
        kv = span.attributes.add()
        kv.key, kv.value.string_value = key, value
    body = gzip.compress(request.SerializeToString())
    response = post(
        Client(), body, world.ingest_key, "application/x-protobuf", HTTP_CONTENT_ENCODING="gzip"
    )
    assert response.status_code == 200
    assert response["Content-Type"] == "application/x-protobuf"
    answer = trace_service_pb2.ExportTraceServiceResponse.FromString(response.content)
    assert answer.partial_success.rejected_spans == 0
    assert Turn.objects.get(session__external_id="proto-session").message_count == 2


def test_a_span_that_cannot_be_read_is_rejected_and_the_others_land(world: World) -> None:
    bad = llm_span("00000000000000e2", 2, CALL_1)
    bad["attributes"][2]["value"] = text("[{not json")
    response = post_json(
        Client(), export(llm_span("00000000000000e1", 1, CALL_1), bad), world.ingest_key
    )
    assert response.status_code == 200
    partial = response.json()["partialSuccess"]
    assert partial["rejectedSpans"] == "1"
    assert "00000000000000e2" in partial["errorMessage"]
    assert "gen_ai.input.messages" in partial["errorMessage"]
    assert Turn.objects.filter(session__project=world.project).count() == 1


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (b"\xff\xfe garbage", "application/x-protobuf"),
        (b"{not json", "application/json"),
        (json.dumps({"resourceSpans": "nope"}).encode(), "application/json"),
        (json.dumps(export({"traceId": "zz", "spanId": "1"})).encode(), "application/json"),
        (b"[" * 100_000, "application/json"),
    ],
    ids=["protobuf", "json", "shape", "ids", "nested"],
)
def test_garbage_is_a_400_in_otlp_shape_and_stores_nothing(
    world: World, body: bytes, content_type: str
) -> None:
    response = post(Client(), body, world.ingest_key, content_type)
    assert response.status_code == 400
    if content_type == "application/json":
        assert response.json()["code"] == 3
    else:
        assert status_pb2.Status.FromString(response.content).code == 3
    assert not Turn.objects.exists()


def test_a_gzip_bomb_is_a_413(world: World, settings: Any) -> None:
    settings.CTXWEB_MAX_REQUEST_BYTES = 100_000
    bomb = gzip.compress(b"0" * 10_000_000)
    assert len(bomb) < 100_000
    response = post(Client(), bomb, world.ingest_key, HTTP_CONTENT_ENCODING="gzip")
    assert response.status_code == 413
    assert "inflates" in response.json()["message"]


def test_an_unknown_media_type_is_a_415(world: World) -> None:
    response = post(Client(), b"x", world.ingest_key, "text/plain")
    assert response.status_code == 415


@pytest.mark.parametrize("content_type", ["application/json", "application/x-protobuf"])
def test_no_key_is_a_401_in_otlp_shape(world: World, content_type: str) -> None:
    response = post(Client(), b"{}", None, content_type)
    assert response.status_code == 401
    if content_type == "application/json":
        assert response.json()["code"] == 16
    else:
        assert status_pb2.Status.FromString(response.content).code == 16
    wrong = post(Client(), b"{}", "ctx_not-a-key", content_type)
    assert wrong.status_code == 401


def test_basic_auth_takes_the_key_as_its_password_on_langfuses_path(world: World) -> None:
    credentials = base64.b64encode(f"pk-lf-anything:{world.ingest_key}".encode()).decode()
    response = Client().post(
        "/api/public/otel/v1/traces",
        json.dumps(export(llm_span("00000000000000f1", 1, CALL_1))),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Basic {credentials}",
    )
    assert response.status_code == 200
    assert Turn.objects.filter(session__project=world.project).count() == 1
    wrong = base64.b64encode(b"pk-lf-anything:sk-lf-not-ctxweb").decode()
    refused = Client().post(
        "/api/public/otel/v1/traces",
        b"{}",
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Basic {wrong}",
    )
    assert refused.status_code == 401


def test_another_projects_key_writes_into_its_own_project_only(world: World) -> None:
    post_json(Client(), export(llm_span("0000000000000101", 1, CALL_1)), world.ingest_key)
    post_json(Client(), export(llm_span("0000000000000102", 1, CALL_2)), world.outsider_key)
    mine = Session.objects.get(project=world.project, external_id="sess-1")
    theirs = Session.objects.get(project=world.other_project, external_id="sess-1")
    assert (mine.turn_count, theirs.turn_count) == (1, 1)
    assert world.api(world.outsider_key).get("/api/v1/sessions/sess-1/turns/0").json()["index"] == 0
    assert Turn.objects.get(session=mine).message_count == 2  # untouched by the other export


def test_a_viewers_dashboard_login_cannot_export(world: World) -> None:
    client = Client()
    client.force_login(world.teammate)
    response = post_json(client, export(llm_span("0000000000000201", 1, CALL_1)), None)
    assert response.status_code == 401  # keys only: no session login, no CSRF to forge
    assert not Turn.objects.exists()
