"""Hostile numbers, ids and names sent to the receivers (issue 34, items 1 and 2): the OTLP
receiver and Langfuse's batch ingestion answer them with a clear 4xx naming the field (OTLP: the
span rejected in ``partial_success``, as OTLP asks; Langfuse: the event's own error in the 207),
never a 500, and never store a value the API cannot address later. Every usage path (REST turns,
OTLP, Langfuse create and update) shares one bounds check; a Langfuse update that arrives before
its create is kept and applied when the create comes."""

from __future__ import annotations

import base64
import json
from typing import Any
from urllib.parse import quote
from uuid import uuid4

import pytest
from django.test import Client
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from ctxweb.contexts.models import Session, Turn
from tests.support.world import World

pytestmark = pytest.mark.django_db

TRACE = "5b8efff798038103d269b633813fc60c"
SPAN = "00000000000000b1"
MESSAGES = [{"role": "user", "parts": [{"type": "text", "content": "Why does it fail?"}]}]
#: The largest count a token column holds (PostgreSQL's ``integer``).
MAX_COUNT = 2**31 - 1
#: Characters no session id may hold: C0 controls (NUL is refused by PostgreSQL, a newline makes
#: the id unreachable through any route), DEL, and a lone surrogate (no database encodes it).
CONTROL = ["\x00", "\x01", "\t", "\n", "\r", "\x1b", "\x1f", "\x7f", "\ud800"]


def _value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    return {"stringValue": value}


def span(attributes: dict[str, Any], span_id: str = SPAN) -> dict[str, Any]:
    attrs = {
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.input.messages": json.dumps(MESSAGES),
        **attributes,
    }
    return {
        "traceId": TRACE,
        "spanId": span_id,
        "name": "chat gpt-4o",
        "startTimeUnixNano": "1",
        "attributes": [{"key": k, "value": _value(v)} for k, v in attrs.items() if v is not None],
    }


def export(*spans: dict[str, Any], session: str = "sess-1") -> dict[str, Any]:
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": [{"key": "session.id", "value": _value(session)}]},
                "scopeSpans": [{"scope": {"name": "test"}, "spans": list(spans)}],
            }
        ]
    }


def send(world: World, document: dict[str, Any] | bytes, **headers: Any) -> Any:
    body = document if isinstance(document, bytes) else json.dumps(document).encode()
    headers.setdefault("content_type", "application/json")
    return Client(raise_request_exception=False).post(
        "/v1/traces", body, HTTP_AUTHORIZATION=f"Bearer {world.ingest_key}", **headers
    )


def rejected(response: Any) -> str:
    """The reason the one span of an export was rejected (the export itself answered 200)."""
    assert response.status_code == 200, response.content[:500]
    partial = response.json().get("partialSuccess")
    assert partial is not None, response.json()
    assert partial["rejectedSpans"] == "1"
    message: str = partial["errorMessage"]
    return message


# --- OTLP: numbers -------------------------------------------------------------------------------

NUMERIC_ATTRIBUTES = [
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "gen_ai.usage.cache_read.input_tokens",
    "gen_ai.usage.cache_creation.input_tokens",
    "gen_ai.request.max_tokens",
]
BAD_NUMBERS = {
    "5000 digits": "9" * 5000,
    "2^31 as text": str(2**31),
    "2^31": 2**31,
    "2^63-1": 2**63 - 1,
    "negative": -1,
    "negative text": "-5",
    "fraction": 1.5,
    "1e300": 1e300,
    "boolean": True,
    "unicode digits": "²",
    "words": "many",
}


@pytest.mark.parametrize("attribute", NUMERIC_ATTRIBUTES)
@pytest.mark.parametrize("value", BAD_NUMBERS.values(), ids=BAD_NUMBERS.keys())
def test_it_rejects_a_span_whose_count_no_column_holds_naming_the_attribute(
    world: World, attribute: str, value: Any
) -> None:
    usage = {"gen_ai.usage.input_tokens": 40, attribute: value}
    reason = rejected(send(world, export(span(usage))))
    assert attribute in reason
    assert not Turn.objects.exists()


@pytest.mark.parametrize("attribute", NUMERIC_ATTRIBUTES)
def test_it_keeps_a_count_at_the_bound_and_whole_numbers_as_text_or_floats(
    world: World, attribute: str
) -> None:
    response = send(
        world,
        export(
            span({attribute: MAX_COUNT}, "00000000000000c1"),
            span({attribute: "40"}, "00000000000000c2"),
            span({attribute: 40.0}, "00000000000000c3"),
        ),
    )
    assert response.status_code == 200
    assert response.json() == {}
    assert Turn.objects.count() == 3


def test_it_refuses_usage_whose_parts_add_up_past_the_bound(world: World) -> None:
    """OpenInference's prompt count and its cache reads are each in range; the cache writes
    added by a Langfuse-style usage too: what is stored is their sum."""
    document = export(
        span(
            {
                "langfuse.observation.type": "generation",
                "langfuse.observation.input": json.dumps([{"role": "user", "content": "hi"}]),
                "langfuse.observation.usage_details": json.dumps(
                    {"input": MAX_COUNT, "input_cached_tokens": MAX_COUNT}
                ),
            }
        )
    )
    reason = rejected(send(world, document))
    assert "input" in reason
    assert not Turn.objects.exists()


def test_an_intvalue_past_64_bits_or_infinite_is_a_400_naming_it(world: World) -> None:
    for raw in (f'"{"9" * 5000}"', f'"{2**63}"', "Infinity", "1e400"):
        document = json.dumps(export(span({}))).replace(
            '"attributes": [', f'"attributes": [{{"key": "x", "value": {{"intValue": {raw}}}}}, ', 1
        )
        response = send(world, document.encode())
        assert response.status_code == 400, response.content[:300]
        assert "intValue" in response.json()["message"]
    assert not Turn.objects.exists()


@pytest.mark.parametrize(
    ("document", "field"),
    [
        ({"resourceSpans": [{"resource": [None, None], "scopeSpans": []}]}, "resource"),
        ({"resourceSpans": [{"scopeSpans": [{"scope": "x", "spans": []}]}]}, "scope"),
        (
            export({**span({}), "attributes": [{"key": "k", "value": {"doubleValue": "x"}}]}),
            "double",
        ),
    ],
    ids=["resource", "scope", "doubleValue"],
)
def test_a_field_of_the_wrong_type_is_a_400_naming_it(
    world: World, document: dict[str, Any], field: str
) -> None:
    response = send(world, document)
    assert response.status_code == 400, response.content[:300]
    assert field in response.json()["message"]


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_a_request_carrying_nan_is_rejected_and_the_api_keeps_answering(
    world: World, constant: str
) -> None:
    raw = '{"model": "gpt-4o", "temperature": %s, "messages": [{"role": "user", "content": "hi"}]}'
    document = export(span({"input.value": raw % constant, "input.mime_type": "application/json"}))
    reason = rejected(send(world, document))
    assert "input.value" in reason
    assert not Turn.objects.exists()


# --- OTLP: legacy indices ------------------------------------------------------------------------


def test_a_legacy_prompt_index_of_5000_digits_works_as_the_last_message(world: World) -> None:
    attributes = {
        "gen_ai.input.messages": None,
        "gen_ai.prompt.0.role": "system",
        "gen_ai.prompt.0.content": "Be terse.",
        f"gen_ai.prompt.{'9' * 5000}.role": "user",
        f"gen_ai.prompt.{'9' * 5000}.content": "Why?",
        "gen_ai.prompt.10.role": "user",
        "gen_ai.prompt.10.content": "First?",
    }
    response = send(world, export(span(attributes)))
    assert response.status_code == 200
    assert response.json() == {}
    turn = world.api(world.ingest_key).get("/api/v1/sessions/sess-1/turns/0").json()
    assert [m["role"] for m in turn["messages"]] == ["system", "user", "user"]
    assert turn["messages"][-1]["message"]["parts"][0]["text"] == "Why?"


@pytest.mark.parametrize("index", ["²", "٣", "9" * 5000])
def test_a_legacy_tool_call_index_of_unicode_or_many_digits_never_fails(
    world: World, index: str
) -> None:
    attributes = {
        "gen_ai.input.messages": None,
        "gen_ai.prompt.0.role": "user",
        "gen_ai.prompt.0.content": "List the files.",
        "gen_ai.prompt.1.role": "assistant",
        "gen_ai.prompt.1.tool_calls.0.id": "call_1",
        "gen_ai.prompt.1.tool_calls.0.name": "ls",
        "gen_ai.prompt.1.tool_calls.0.arguments": "{}",
        f"gen_ai.prompt.1.tool_calls.{index}.id": "call_2",
        f"gen_ai.prompt.1.tool_calls.{index}.name": "pwd",
        f"gen_ai.prompt.1.tool_calls.{index}.arguments": "{}",
        "gen_ai.prompt.2.role": "tool",
        "gen_ai.prompt.2.tool_call_id": "call_1",
        "gen_ai.prompt.2.content": "a.py",
    }
    response = send(world, export(span(attributes)))
    assert response.status_code == 200, response.content[:300]
    assert response.json() == {}
    assert Turn.objects.count() == 1


def test_an_openinference_tool_call_index_of_unicode_digits_never_fails(world: World) -> None:
    attributes = {
        "gen_ai.input.messages": None,
        "openinference.span.kind": "LLM",
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.content": "List the files.",
        "llm.input_messages.1.message.role": "assistant",
        "llm.input_messages.1.message.tool_calls.².tool_call.id": "call_1",
        "llm.input_messages.1.message.tool_calls.².tool_call.function.name": "ls",
    }
    response = send(world, export(span(attributes)))
    assert response.status_code == 200, response.content[:300]
    assert response.json() == {}
    assert Turn.objects.count() == 1


# --- OTLP: ids and names -------------------------------------------------------------------------


def proto_export(session: str, model: str = "gpt-4o") -> bytes:
    request = trace_service_pb2.ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    attribute = resource_spans.resource.attributes.add()
    attribute.key, attribute.value.string_value = "session.id", session
    item = resource_spans.scope_spans.add().spans.add()
    item.trace_id, item.span_id = bytes.fromhex(TRACE), bytes.fromhex(SPAN)
    item.name, item.start_time_unix_nano = "chat", 5
    for key, value in (("gen_ai.request.model", model), ("gen_ai.input.messages", MESSAGES)):
        kv = item.attributes.add()
        kv.key, kv.value.string_value = key, value if isinstance(value, str) else json.dumps(value)
    return bytes(request.SerializeToString())


@pytest.mark.parametrize("character", CONTROL, ids=[f"U+{ord(c):04X}" for c in CONTROL])
def test_a_session_id_holding_a_control_character_is_rejected_naming_it(
    world: World, character: str
) -> None:
    reason = rejected(send(world, export(span({}), session=f"a{character}b")))
    assert "session" in reason
    assert not Session.objects.exists()


@pytest.mark.parametrize("character", ["\x00", "\x01", "\n"], ids=["NUL", "U+0001", "LF"])
def test_a_protobuf_session_id_holding_a_control_character_is_rejected(
    world: World, character: str
) -> None:
    response = send(world, proto_export(f"a{character}b"), content_type="application/x-protobuf")
    assert response.status_code == 200
    answer = trace_service_pb2.ExportTraceServiceResponse.FromString(response.content)
    assert answer.partial_success.rejected_spans == 1
    assert "session" in answer.partial_success.error_message
    assert not Session.objects.exists()


@pytest.mark.parametrize(
    ("attribute", "character"),
    [
        ("gen_ai.request.model", "\x00"),
        ("gen_ai.request.model", "\ud800"),
        ("gen_ai.conversation.id", "\x00"),
    ],
    ids=["model NUL", "model surrogate", "conversation NUL"],
)
def test_a_name_or_id_attribute_no_database_stores_is_rejected(
    world: World, attribute: str, character: str
) -> None:
    document = export(span({attribute: f"x{character}y"}), session="")
    reason = rejected(send(world, document))
    assert "model" in reason or "session" in reason
    assert not Session.objects.exists()


def test_a_protobuf_model_name_with_a_nul_is_rejected(world: World) -> None:
    response = send(world, proto_export("ok", "gpt\x004o"), content_type="application/x-protobuf")
    answer = trace_service_pb2.ExportTraceServiceResponse.FromString(response.content)
    assert answer.partial_success.rejected_spans == 1
    assert "model" in answer.partial_success.error_message
    assert not Session.objects.exists()


def test_a_session_id_with_printable_unicode_is_stored_and_addressable(world: World) -> None:
    session = "sess é/日本/🙂 #?%"
    response = send(world, export(span({}), session=session))
    assert response.json() == {}
    answer = world.api(world.ingest_key).get(f"/api/v1/sessions/{quote(session)}")
    assert answer.status_code == 200
    assert answer.json()["external_id"] == session


@pytest.mark.parametrize("encoding", ["utf-16", "utf-32"])
def test_an_export_in_another_unicode_encoding_is_read(world: World, encoding: str) -> None:
    body = json.dumps(export(span({})), ensure_ascii=False).encode(encoding)
    assert send(world, body).json() == {}
    assert Turn.objects.count() == 1


def test_an_export_in_latin_1_is_a_400(world: World) -> None:
    body = json.dumps(export(span({}), session="café"), ensure_ascii=False).encode("latin-1")
    response = send(world, body)
    assert response.status_code == 400
    assert not Turn.objects.exists()


@pytest.mark.parametrize("character", ["\x00", "\ud800"], ids=["NUL", "lone surrogate"])
@pytest.mark.parametrize("where", ["request", "message", "tool schema"])
def test_a_key_no_database_stores_in_a_captured_request_is_rejected_naming_it(
    world: World, where: str, character: str
) -> None:
    """The API's parser refuses such keys in a posted body; a receiver decodes JSON itself."""
    key = f"k{character}"
    request: dict[str, Any] = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
    if where == "request":
        request[key] = 1
    elif where == "message":
        request["messages"][0][key] = 1
    else:
        function = {"name": "f", "parameters": {"type": "object", key: 1}}
        request["tools"] = [{"type": "function", "function": function}]
    attributes = {"input.value": json.dumps(request), "input.mime_type": "application/json"}
    reason = rejected(send(world, export(span(attributes))))
    assert "key" in reason
    assert not Session.objects.exists()


def test_a_protobuf_string_of_bad_utf_8_is_a_400(world: World) -> None:
    body = proto_export("ABCD").replace(b"ABCD", b"\xff\xfe\xc0\x80")
    response = send(world, body, content_type="application/x-protobuf")
    assert response.status_code == 400
    assert not Session.objects.exists()


# --- Langfuse ------------------------------------------------------------------------------------


#: This test's own generation and trace ids: traces' sessions and early updates are remembered in
#: the cache, which outlives a test's database (and SQLite hands rolled-back ids out again).
RUN = {"id": ""}


@pytest.fixture(autouse=True)
def own_ids() -> None:
    RUN["id"] = uuid4().hex[:12]


def own(name: str) -> str:
    return f"{name}-{RUN['id']}"


def turn_of(generation: str = "g1") -> Turn:
    return Turn.objects.get(turn_id=f"lf:{own(generation)}")


def ingest(world: World, *events: dict[str, Any], raw: bytes | None = None) -> Any:
    credentials = base64.b64encode(f"pk-lf-1:{world.ingest_key}".encode()).decode()
    body = raw if raw is not None else json.dumps({"batch": list(events)}).encode()
    return Client(raise_request_exception=False).post(
        "/api/public/ingestion",
        body,
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Basic {credentials}",
    )


def event(event_id: str, kind: str, body: dict[str, Any]) -> dict[str, Any]:
    return {"id": event_id, "timestamp": "2026-01-01T00:00:00.000Z", "type": kind, "body": body}


def create(generation: str = "g1", **body: Any) -> dict[str, Any]:
    fields = {"id": own(generation), "traceId": own("t1"), "model": "gpt-4o", **body}
    fields.setdefault("input", [{"role": "user", "content": "hi"}])
    return event(f"create-{generation}", "generation-create", fields)


def update(generation: str = "g1", **body: Any) -> dict[str, Any]:
    return event(f"update-{generation}", "generation-update", {"id": own(generation), **body})


def errors(response: Any) -> dict[str, dict[str, Any]]:
    assert response.status_code == 207, response.content[:500]
    return {e["id"]: e for e in response.json()["errors"]}


LANGFUSE_BAD = {
    "2^31": 2**31,
    "2^63": 2**63,
    "1e300": 1e300,
    "negative": -1,
    "fraction": 1.5,
    "boolean": True,
    "5000 digits as text": "9" * 5000,
    "words": "many",
}


@pytest.mark.parametrize("key", ["input", "output", "input_cached_tokens", "input_cache_creation"])
@pytest.mark.parametrize("value", LANGFUSE_BAD.values(), ids=LANGFUSE_BAD.keys())
def test_an_update_with_usage_no_column_holds_is_the_events_400(
    world: World, key: str, value: Any
) -> None:
    assert errors(ingest(world, create())) == {}
    response = ingest(world, update(usageDetails={"input": 10, key: value}))
    error = errors(response)["update-g1"]
    assert error["status"] == 400
    assert f"usageDetails.{key}" in error["message"]
    turn = turn_of()
    assert turn.reported_input_tokens is None
    assert turn.usage is None


@pytest.mark.parametrize("value", LANGFUSE_BAD.values(), ids=LANGFUSE_BAD.keys())
def test_a_create_with_usage_no_column_holds_names_the_field_it_sent(
    world: World, value: Any
) -> None:
    error = errors(ingest(world, create(usage={"promptTokens": value})))["create-g1"]
    assert error["status"] == 400
    assert "usage.promptTokens" in error["message"]
    assert not Turn.objects.exists()


def test_an_update_at_the_bound_is_reported(world: World) -> None:
    ingest(world, create())
    assert errors(ingest(world, update(usageDetails={"input": MAX_COUNT, "output": 0}))) == {}
    assert turn_of().reported_input_tokens == MAX_COUNT


def test_an_update_before_its_create_is_kept_and_applied_when_the_create_comes(
    world: World,
) -> None:
    early = ingest(world, update(usageDetails={"input": 1200, "output": 30}))
    assert errors(early) == {}
    assert not Turn.objects.exists()
    assert errors(ingest(world, create())) == {}
    turn = turn_of()
    assert turn.reported_input_tokens == 1200
    assert turn.usage == {
        "input_tokens": 1200,
        "output_tokens": 30,
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
    }
    session = Session.objects.get(pk=turn.session_id)
    assert session.last_total_tokens == turn.total_tokens == 1200


def test_an_update_before_its_create_is_kept_per_project(world: World) -> None:
    ingest(world, update(usageDetails={"input": 1200}))
    credentials = base64.b64encode(f"pk-lf-1:{world.outsider_key}".encode()).decode()
    Client().post(
        "/api/public/ingestion",
        json.dumps({"batch": [create()]}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Basic {credentials}",
    )
    assert Turn.objects.get(session__project=world.other_project).reported_input_tokens is None
    ingest(world, create())
    assert Turn.objects.get(session__project=world.project).reported_input_tokens == 1200


def test_an_early_update_with_bad_usage_is_refused_and_not_kept(world: World) -> None:
    assert (
        errors(ingest(world, update(usageDetails={"input": 2**31})))["update-g1"]["status"] == 400
    )
    assert errors(ingest(world, create())) == {}
    assert turn_of().reported_input_tokens is None


@pytest.mark.parametrize("character", CONTROL[1:-1], ids=[f"U+{ord(c):04X}" for c in CONTROL[1:-1]])
def test_a_langfuse_session_id_with_a_control_character_is_the_traces_400(
    world: World, character: str
) -> None:
    trace = event("trace", "trace-create", {"id": own("t1"), "sessionId": f"a{character}b"})
    response = ingest(world, trace, create())
    error = errors(response)["trace"]
    assert error["status"] == 400
    assert "body.sessionId" in error["message"]
    assert "create-g1" not in errors(response)  # its generation goes to its trace's session
    assert list(Session.objects.values_list("external_id", flat=True)) == [own("t1")]


@pytest.mark.parametrize("character", CONTROL[1:-1], ids=[f"U+{ord(c):04X}" for c in CONTROL[1:-1]])
def test_a_langfuse_trace_id_naming_a_session_with_a_control_character_is_the_events_400(
    world: World, character: str
) -> None:
    error = errors(ingest(world, create(traceId=f"a{character}b")))["create-g1"]
    assert error["status"] == 400
    assert "session id" in error["message"]
    assert not Session.objects.exists()


@pytest.mark.parametrize("escape", ["\\u0000", "\\ud800"])
def test_a_langfuse_batch_holding_a_nul_or_a_lone_surrogate_is_a_400(
    world: World, escape: str
) -> None:
    raw = json.dumps({"batch": [create(model="gpt")]}).replace('"gpt"', f'"gpt{escape}"')
    response = ingest(world, raw=raw.encode())
    assert response.status_code == 400
    assert not Session.objects.exists()


@pytest.mark.parametrize("encoding", ["utf-16", "utf-32", "latin-1"])
def test_a_langfuse_batch_in_another_encoding_than_utf_8_is_a_400(
    world: World, encoding: str
) -> None:
    """JSON between systems is UTF-8 (RFC 8259), as Langfuse's SDKs send it; the OTLP receiver
    also reads UTF-16 and UTF-32 (above), as :func:`json.loads` detects them."""
    raw = json.dumps({"batch": [create(model="gpt-4o-café")]}, ensure_ascii=False)
    response = ingest(world, raw=raw.encode(encoding))
    assert response.status_code == 400
    assert "UTF-8" in response.json()["error"]["message"]
    assert not Session.objects.exists()


def test_a_langfuse_generation_id_longer_than_a_turn_id_is_the_events_400(world: World) -> None:
    longest = "g" * (200 - len("lf:"))
    response = ingest(
        world, event("fits", "generation-create", {**create()["body"], "id": longest})
    )
    assert errors(response) == {}
    too_long = event("long", "generation-create", {**create()["body"], "id": longest + "g"})
    error = errors(ingest(world, too_long))["long"]
    assert error["status"] == 400
    assert "body.id" in error["message"]
    assert Turn.objects.count() == 1


def test_a_langfuse_model_of_5000_characters_is_the_events_400(world: World) -> None:
    error = errors(ingest(world, create(model="m" * 5000)))["create-g1"]
    assert error["status"] == 400
    assert "model" in error["message"]


# --- REST turns share the same check -------------------------------------------------------------

REST_BAD = {
    "2^31": 2**31,
    "1e300": 1e300,
    "negative": -1,
    "fraction": 1.5,
    "boolean": True,
    "text": "12",
}


@pytest.mark.parametrize(
    "key", ["prompt_tokens", "completion_tokens", "cache_read_input_tokens", "output_tokens"]
)
@pytest.mark.parametrize("value", REST_BAD.values(), ids=REST_BAD.keys())
def test_a_rest_turns_usage_out_of_range_is_a_400_naming_the_key(
    world: World, key: str, value: Any
) -> None:
    usage = {"input_tokens": 10, key: value}
    if key in ("prompt_tokens", "completion_tokens"):  # OpenAI Chat's shape
        usage = {"prompt_tokens": 10, key: value}
    body = {
        "format": "openai-chat",
        "request": {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]},
        "usage": usage,
    }
    response = world.api(world.ingest_key).post(
        "/api/v1/sessions/s1/turns", json.dumps(body), content_type="application/json"
    )
    assert response.status_code == 400, response.content[:300]
    assert f"usage.{key}" in response.json()["error"]["fields"]
    assert not Session.objects.exists()


def rest_turn(world: World, session: str, model: str = "gpt-4o") -> Any:
    body = {
        "format": "openai-chat",
        "request": {"model": model, "messages": [{"role": "user", "content": "hi"}]},
    }
    return world.api(world.ingest_key).post(
        f"/api/v1/sessions/{quote(session)}/turns",
        json.dumps(body),
        content_type="application/json",
    )


@pytest.mark.parametrize("character", ["\x01", "\t", "\x1f", "\x7f", "\x85"])
def test_a_rest_session_id_holding_a_control_character_is_a_400(
    world: World, character: str
) -> None:
    response = rest_turn(world, f"a{character}b")
    assert response.status_code == 400, response.content[:300]
    assert not Session.objects.exists()


@pytest.mark.parametrize("character", ["\x01", "\n", "\x7f"])
def test_a_rest_model_name_holding_a_control_character_is_a_400_naming_it(
    world: World, character: str
) -> None:
    response = rest_turn(world, "s1", model=f"gpt{character}4o")
    assert response.status_code == 400, response.content[:300]
    assert "request.model" in response.json()["error"]["fields"]
    assert not Session.objects.exists()
