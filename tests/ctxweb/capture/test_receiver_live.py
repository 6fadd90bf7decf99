"""Issue 34's receiver cases replayed against a live server, as the issue found them: uvicorn on
the test's PostgreSQL and Redis in the production shape, an embedded one with its own SQLite
otherwise. Each gets a clear 4xx naming the field (OTLP: the span rejected in
``partial_success``; Langfuse: the event's error in the 207), or works; none is a 500."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from django.conf import settings
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from tests.support.servers import create_key, embedded_env, live_server

pytestmark = pytest.mark.django_db(transaction=True)  # a server process reads what a test wrote

TRACE = "5b8efff798038103d269b633813fc60c"
MESSAGES = json.dumps([{"role": "user", "parts": [{"type": "text", "content": "Why?"}]}])


@pytest.fixture
def live(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """(the server's URL, an ingest key of its project)."""
    if "postgresql" in settings.DATABASES["default"]["ENGINE"]:
        world = request.getfixturevalue("world")
        yield request.getfixturevalue("start_server")().url, world.ingest_key
        return
    env = embedded_env(tmp_path, CTXWEB_RATE_LIMIT="", CTXWEB_RATE_LIMIT_COSTLY="")
    key = create_key(env, role="ingest")
    with live_server(env) as running:
        yield running.url, key


def call(url: str, key: str, body: bytes, content_type: str = "application/json") -> Any:
    """POST ``body``: (status, answer bytes)."""
    request = urllib.request.Request(
        url,
        data=body,
        method="POST",
        headers={"Authorization": f"Bearer {key}", "Content-Type": content_type},
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def get(url: str, key: str) -> Any:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())


def export(session: str, span_id: str, **attributes: str) -> bytes:
    attrs = {"gen_ai.request.model": "gpt-4o", "gen_ai.input.messages": MESSAGES, **attributes}
    attrs = {k: v for k, v in attrs.items() if v}
    span = {
        "traceId": TRACE,
        "spanId": span_id,
        "name": "chat",
        "startTimeUnixNano": "1",
        "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attrs.items()],
    }
    session_attribute = {"key": "session.id", "value": {"stringValue": session}}
    document = {
        "resourceSpans": [
            {
                "resource": {"attributes": [session_attribute]},
                "scopeSpans": [{"spans": [span]}],
            }
        ]
    }
    return json.dumps(document).encode()


def proto_export(session: str, span_id: str) -> bytes:
    request = trace_service_pb2.ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    attribute = resource_spans.resource.attributes.add()
    attribute.key, attribute.value.string_value = "session.id", session
    span = resource_spans.scope_spans.add().spans.add()
    span.trace_id, span.span_id = bytes.fromhex(TRACE), bytes.fromhex(span_id)
    span.name, span.start_time_unix_nano = "chat", 1
    for key, value in (("gen_ai.request.model", "gpt-4o"), ("gen_ai.input.messages", MESSAGES)):
        kv = span.attributes.add()
        kv.key, kv.value.string_value = key, value
    return bytes(request.SerializeToString())


def test_the_issues_otlp_cases_are_each_a_rejected_span_or_work(live: tuple[str, str]) -> None:
    url, key = live
    traces = f"{url}/v1/traces"
    legacy = {"gen_ai.input.messages": "", "gen_ai.prompt.0.role": "user"}
    rejected = {
        "gen_ai.usage.input_tokens": export(
            "s", "00000000000000a1", **{"gen_ai.usage.input_tokens": "9" * 5000}
        ),
        "session id": export("a\x00b", "00000000000000a2"),
        "model": export("s", "00000000000000a3", **{"gen_ai.request.model": "gpt\x00"}),
    }
    for field, body in rejected.items():
        status, answer = call(traces, key, body)
        assert status == 200, (field, status, answer[:300])
        partial = json.loads(answer)["partialSuccess"]
        assert partial["rejectedSpans"] == "1"
        assert field in partial["errorMessage"]
    status, answer = call(
        traces, key, proto_export("a\x00b", "00000000000000a4"), "application/x-protobuf"
    )
    assert status == 200
    reason = trace_service_pb2.ExportTraceServiceResponse.FromString(answer).partial_success
    assert (reason.rejected_spans, "session id" in reason.error_message) == (1, True)
    works = {
        "5000-digit prompt index": {
            **legacy,
            f"gen_ai.prompt.{'9' * 5000}.role": "user",
            f"gen_ai.prompt.{'9' * 5000}.content": "Why?",
        },
        "tool-call index ²": {
            **legacy,
            "gen_ai.prompt.0.content": "Look.",
            "gen_ai.prompt.1.role": "assistant",
            "gen_ai.prompt.1.tool_calls.².id": "call_1",
        },
    }
    for n, (case, attributes) in enumerate(works.items()):
        status, answer = call(traces, key, export("works", f"00000000000000b{n}", **attributes))
        assert (status, json.loads(answer)) == (200, {}), case
    assert get(f"{url}/api/v1/sessions/works", key)["turn_count"] == 2


def langfuse(url: str, key: str, *events: dict[str, Any]) -> dict[str, Any]:
    credentials = base64.b64encode(f"pk-lf-1:{key}".encode()).decode()
    request = urllib.request.Request(
        f"{url}/api/public/ingestion",
        data=json.dumps({"batch": list(events)}).encode(),
        method="POST",
        headers={"Authorization": f"Basic {credentials}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        assert response.status == 207
        answer: dict[str, Any] = json.loads(response.read())
        return answer


def generation(kind: str, generation_id: str, **body: Any) -> dict[str, Any]:
    return {"id": f"{kind}-{generation_id}", "type": kind, "body": {"id": generation_id, **body}}


def test_the_issues_langfuse_cases_are_each_the_events_400_or_work(live: tuple[str, str]) -> None:
    url, key = live
    create = {
        "traceId": "lf-trace",
        "model": "gpt-4o",
        "input": [{"role": "user", "content": "hi"}],
    }
    for n, value in enumerate((2**31, 2**63, 1e300)):
        name = f"g{n}"
        assert langfuse(url, key, generation("generation-create", name, **create))["errors"] == []
        answer = langfuse(
            url, key, generation("generation-update", name, usageDetails={"input": value})
        )
        [error] = answer["errors"]
        assert (error["status"], "usageDetails.input" in error["message"]) == (400, True), error
    # an update before its create: kept, and reported when the create comes
    early = generation("generation-update", "late", usageDetails={"input": 1234, "output": 5})
    assert langfuse(url, key, early)["errors"] == []
    assert langfuse(url, key, generation("generation-create", "late", **create))["errors"] == []
    turns = get(f"{url}/api/v1/sessions/{quote('lf-trace')}/turns", key)
    assert [t["reported_input_tokens"] for t in turns] == [None, None, None, 1234]
