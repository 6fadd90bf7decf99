"""The receivers' bounds (issue 33, item 5): what one OTLP export or Langfuse batch may hold,
checked before anything is built from it. Over a per-export bound the spans past it are counted
and rejected in ``partial_success``; over a per-span bound that span is rejected by its id and
the others land; an export too large even to count, and a Langfuse batch past Langfuse's own
bounds, is a 413 naming the setting."""

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
MESSAGES = json.dumps([{"role": "user", "parts": [{"type": "text", "content": "Why?"}]}])


def span_id(n: int) -> str:
    return f"{n:016x}"


def call_span(n: int, **extra: Any) -> dict[str, Any]:
    """A model-call span in OTLP JSON, its attributes as AnyValues."""
    attributes = [
        {"key": "gen_ai.request.model", "value": {"stringValue": "gpt-4o"}},
        {"key": "gen_ai.input.messages", "value": {"stringValue": MESSAGES}},
        *extra.pop("attributes", []),
    ]
    return {
        "traceId": TRACE,
        "spanId": span_id(n),
        "name": "chat gpt-4o",
        "startTimeUnixNano": str(n),
        "attributes": attributes,
        **extra,
    }


def export(*spans: dict[str, Any]) -> dict[str, Any]:
    session = {"key": "session.id", "value": {"stringValue": "sess-bounds"}}
    return {
        "resourceSpans": [
            {"resource": {"attributes": [session]}, "scopeSpans": [{"spans": list(spans)}]}
        ]
    }


def as_protobuf(document: dict[str, Any]) -> bytes:
    """The same export in protobuf (OTLP JSON's ids are hex, protobuf's JSON mapping base64)."""
    for resource_spans in document["resourceSpans"]:
        for scope_spans in resource_spans["scopeSpans"]:
            for span in scope_spans["spans"]:
                for name in ("traceId", "spanId"):
                    span[name] = base64.b64encode(bytes.fromhex(span[name])).decode()
    from google.protobuf import json_format

    message = json_format.ParseDict(document, trace_service_pb2.ExportTraceServiceRequest())
    return bytes(message.SerializeToString())


def send(world: World, body: bytes, content_type: str, **headers: Any) -> Any:
    return Client(raise_request_exception=False).post(
        "/v1/traces",
        body,
        content_type=content_type,
        HTTP_AUTHORIZATION=f"Bearer {world.ingest_key}",
        **headers,
    )


def answer(world: World, document: dict[str, Any], encoding: str) -> tuple[int, str]:
    """(rejected spans, error message) of the export sent in ``encoding``."""
    if encoding == "json":
        response = send(world, json.dumps(document).encode(), "application/json")
        assert response.status_code == 200, response.content[:500]
        partial = response.json().get("partialSuccess", {})
        return int(partial.get("rejectedSpans", 0)), partial.get("errorMessage", "")
    response = send(world, as_protobuf(document), "application/x-protobuf")
    assert response.status_code == 200, response.content[:500]
    message = trace_service_pb2.ExportTraceServiceResponse.FromString(response.content)
    partial = message.partial_success
    return partial.rejected_spans, partial.error_message


def stored() -> set[str]:
    return {turn_id for turn_id in Turn.objects.values_list("turn_id", flat=True) if turn_id}


def raw_spans(count: int) -> bytes:
    """An export of ``count`` empty spans in one scope, as the attack sent them: two bytes each."""

    def field(tag: int, payload: bytes) -> bytes:
        length, size = bytearray(), len(payload)
        while True:
            byte, size = size & 0x7F, size >> 7
            length.append(byte | 0x80 if size else byte)
            if not size:
                return bytes([tag]) + bytes(length) + payload

    return field(0x0A, field(0x12, b"\x12\x00" * count))


ENCODINGS = ["json", "protobuf"]


# --- OTLP: per export ----------------------------------------------------------------------------


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_spans_past_the_export_bound_are_counted_and_the_first_ones_land(
    world: World, settings: Any, encoding: str
) -> None:
    settings.CTXWEB_OTLP_MAX_SPANS = 3
    count, message = answer(world, export(*(call_span(n) for n in range(1, 6))), encoding)
    assert count == 2
    assert "CTXWEB_OTLP_MAX_SPANS" in message
    assert "at most 3 spans" in message
    assert stored() == {span_id(1), span_id(2), span_id(3)}


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_an_export_at_the_span_bound_is_read_whole(
    world: World, settings: Any, encoding: str
) -> None:
    settings.CTXWEB_OTLP_MAX_SPANS = 3
    assert answer(world, export(*(call_span(n) for n in range(1, 4))), encoding) == (0, "")
    assert len(stored()) == 3


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_spans_past_the_values_bound_are_counted_and_named_by_the_setting(
    world: World, settings: Any, encoding: str
) -> None:
    # a resource, a scope, its session attribute; then a span and its two attributes each
    settings.CTXWEB_OTLP_MAX_VALUES = 3 + 3 * 2
    count, message = answer(world, export(*(call_span(n) for n in range(1, 5))), encoding)
    assert count == 2
    assert "CTXWEB_OTLP_MAX_VALUES" in message
    assert stored() == {span_id(1), span_id(2)}


def test_empty_spans_past_the_bound_are_counted_not_built(world: World, settings: Any) -> None:
    settings.CTXWEB_OTLP_MAX_SPANS = 10
    response = send(world, raw_spans(10 + 16 * 10), "application/x-protobuf")
    assert response.status_code == 200
    partial = trace_service_pb2.ExportTraceServiceResponse.FromString(response.content)
    assert partial.partial_success.rejected_spans == 160
    assert "CTXWEB_OTLP_MAX_SPANS" in partial.partial_success.error_message


def test_the_attack_of_16_million_empty_spans_is_refused_without_building_them(
    world: World,
) -> None:
    """Issue 33's attack: 31 KB of gzip, 32 MB once inflated; it cost 6.2 GB and 109 s."""
    body = gzip.compress(raw_spans(16_000_000), 9)
    assert len(body) < 40_000
    response = send(world, body, "application/x-protobuf", HTTP_CONTENT_ENCODING="gzip")
    assert response.status_code == 413
    status = status_pb2.Status.FromString(response.content)
    assert status.code == 8  # RESOURCE_EXHAUSTED
    assert "CTXWEB_OTLP_MAX_SPANS" in status.message
    assert not Session.objects.exists()


def test_an_export_past_what_can_be_counted_is_a_413(world: World, settings: Any) -> None:
    settings.CTXWEB_OTLP_MAX_SPANS = 10
    response = send(world, raw_spans(10 + 16 * 10 + 1), "application/x-protobuf")
    assert response.status_code == 413
    assert "CTXWEB_OTLP_MAX_SPANS" in status_pb2.Status.FromString(response.content).message


def test_empty_resources_are_held_to_the_span_bound(world: World, settings: Any) -> None:
    settings.CTXWEB_OTLP_MAX_SPANS = 10
    response = send(world, b"\x0a\x00" * 1000, "application/x-protobuf")
    assert response.status_code == 413
    assert "CTXWEB_OTLP_MAX_SPANS" in status_pb2.Status.FromString(response.content).message


def test_a_json_export_of_empty_objects_is_refused_before_it_is_decoded(
    world: World, settings: Any
) -> None:
    settings.CTXWEB_OTLP_MAX_VALUES = 1000
    spans = ",".join(["{}"] * 5000)
    body = f'{{"resourceSpans":[{{"scopeSpans":[{{"spans":[{spans}]}}]}}]}}'.encode()
    response = send(world, body, "application/json")
    assert response.status_code == 413
    assert response.json()["code"] == 8
    assert "CTXWEB_OTLP_MAX_VALUES" in response.json()["message"]


def test_braces_inside_json_strings_do_not_count_toward_the_bound(
    world: World, settings: Any
) -> None:
    settings.CTXWEB_OTLP_MAX_VALUES = 100
    braces = {"key": "note", "value": {"stringValue": "{[" * 1000}}
    assert answer(world, export(call_span(1, attributes=[braces])), "json") == (0, "")
    assert stored() == {span_id(1)}


# --- OTLP: per span ------------------------------------------------------------------------------


def many_attributes(count: int) -> list[dict[str, Any]]:
    return [{"key": f"x.{i}", "value": {"intValue": str(i)}} for i in range(count)]


def nested(depth: int) -> dict[str, Any]:
    """An AnyValue of arrays and key-value lists nested ``depth`` levels."""
    value: dict[str, Any] = {"stringValue": "leaf"}
    for level in range(depth):
        if level % 2:
            value = {"arrayValue": {"values": [value]}}
        else:
            value = {"kvlistValue": {"values": [{"key": "k", "value": value}]}}
    return value


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_a_span_with_too_many_attributes_is_rejected_by_id_and_the_others_land(
    world: World, settings: Any, encoding: str
) -> None:
    settings.CTXWEB_OTLP_MAX_SPAN_ATTRIBUTES = 10
    document = export(
        call_span(1, attributes=many_attributes(8)),  # ten with its own two: at the bound
        call_span(2, attributes=many_attributes(9)),
        call_span(3),
    )
    count, message = answer(world, document, encoding)
    assert count == 1
    assert f"span {span_id(2)}" in message
    assert "more than 10 attributes (CTXWEB_OTLP_MAX_SPAN_ATTRIBUTES)" in message
    assert stored() == {span_id(1), span_id(3)}


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_a_span_with_too_many_events_is_rejected_by_id(
    world: World, settings: Any, encoding: str
) -> None:
    settings.CTXWEB_OTLP_MAX_SPAN_EVENTS = 2
    events = [{"name": f"e{i}", "timeUnixNano": "1"} for i in range(3)]
    document = export(call_span(1, events=events[:2]), call_span(2, events=events))
    count, message = answer(world, document, encoding)
    assert count == 1
    assert f"span {span_id(2)}: more than 2 events (CTXWEB_OTLP_MAX_SPAN_EVENTS)" in message
    assert stored() == {span_id(1)}


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_a_span_with_values_nested_too_deeply_is_rejected_by_id(
    world: World, settings: Any, encoding: str
) -> None:
    settings.CTXWEB_OTLP_MAX_DEPTH = 4
    document = export(
        call_span(1, attributes=[{"key": "deep", "value": nested(4)}]),
        call_span(2, attributes=[{"key": "deep", "value": nested(5)}]),
    )
    count, message = answer(world, document, encoding)
    assert count == 1
    assert f"span {span_id(2)}: values nested deeper than 4 levels" in message
    assert "CTXWEB_OTLP_MAX_DEPTH" in message
    assert stored() == {span_id(1)}


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_the_default_bounds_keep_a_genai_span_with_thousands_of_legacy_attributes(
    world: World, encoding: str
) -> None:
    legacy = []
    for i in range(2500):  # a conversation of 2,500 messages, two attributes each
        role = "user" if i % 2 == 0 else "assistant"
        legacy.append({"key": f"gen_ai.prompt.{i}.role", "value": {"stringValue": role}})
        legacy.append({"key": f"gen_ai.prompt.{i}.content", "value": {"stringValue": f"m{i}"}})
    span = call_span(1, attributes=[{"key": "deep", "value": nested(32)}])
    span["attributes"] = [span["attributes"][0], span["attributes"][2], *legacy]
    assert answer(world, export(span), encoding) == (0, "")
    assert stored() == {span_id(1)}


# --- Langfuse ------------------------------------------------------------------------------------


def ingest(world: World, body: bytes) -> Any:
    credentials = base64.b64encode(f"pk-lf-1:{world.ingest_key}".encode()).decode()
    return Client(raise_request_exception=False).post(
        "/api/public/ingestion",
        body,
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Basic {credentials}",
    )


def batch(count: int) -> bytes:
    events = [
        {"id": f"e{i}", "type": "sdk-log", "timestamp": "2026-01-01T00:00:00Z", "body": {}}
        for i in range(count)
    ]
    return json.dumps({"batch": events}).encode()


def test_a_langfuse_batch_past_the_event_bound_is_a_413_naming_it(
    world: World, settings: Any
) -> None:
    settings.CTXWEB_LANGFUSE_MAX_BATCH_EVENTS = 5
    assert ingest(world, batch(5)).status_code == 207
    response = ingest(world, batch(6))
    assert response.status_code == 413
    assert "CTXWEB_LANGFUSE_MAX_BATCH_EVENTS" in response.json()["message"]
    assert response.json()["error"]


def test_a_langfuse_batch_past_the_byte_bound_is_a_413_naming_it(
    world: World, settings: Any
) -> None:
    body = batch(20)
    settings.CTXWEB_LANGFUSE_MAX_BATCH_BYTES = len(body)
    assert ingest(world, body).status_code == 207
    settings.CTXWEB_LANGFUSE_MAX_BATCH_BYTES = len(body) - 1
    response = ingest(world, body)
    assert response.status_code == 413
    assert "CTXWEB_LANGFUSE_MAX_BATCH_BYTES" in response.json()["message"]


def test_a_langfuse_batch_over_the_bound_stores_nothing(world: World, settings: Any) -> None:
    settings.CTXWEB_LANGFUSE_MAX_BATCH_EVENTS = 1
    generation = {
        "id": "g-bounds",
        "traceId": "t-bounds",
        "model": "gpt-4o",
        "input": [{"role": "user", "content": "hi"}],
    }
    events = [
        {"id": "c", "type": "generation-create", "timestamp": "2026-01-01T00:00:00Z", "body": b}
        for b in (generation, {**generation, "id": "g-bounds-2"})
    ]
    response = ingest(world, json.dumps({"batch": events}).encode())
    assert response.status_code == 413
    assert not Turn.objects.exists()
