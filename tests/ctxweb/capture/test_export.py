"""A session out again: ``GET sessions/{id}/export`` as JSON lines (the requests as ingested) and
as OTLP JSON, which the receiver reads back whole: a round trip through another project keeps
every message, region and reported count."""

from __future__ import annotations

import html
import json
from typing import Any

import pytest
from django.test import Client

from tests.support.builders import history
from tests.support.world import World

pytestmark = pytest.mark.django_db

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read",
            "description": "Read a file",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
]
ANTHROPIC = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 1024,
    "system": [{"type": "text", "text": "You are terse."}],
    "tools": [{"name": "ls", "description": "List", "input_schema": {"type": "object"}}],
    "messages": [
        {"role": "user", "content": "What is here?"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "tu1", "name": "ls", "input": {}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "tu1", "content": "a.py b.py"}],
        },
    ],
}


def post_turn(world: World, session: str, body: dict[str, Any]) -> None:
    response = world.api(world.ingest_key).post(
        f"/api/v1/sessions/{session}/turns", data=json.dumps(body), content_type="application/json"
    )
    assert response.status_code == 201, response.content


def chat_session(world: World) -> list[dict[str, Any]]:
    bodies = []
    for steps in (1, 2, 3):
        request = {"model": "gpt-4o", "messages": history(steps), "tools": TOOLS}
        usage = {"prompt_tokens": 900 * steps, "completion_tokens": 12}
        body = {"format": "openai-chat", "request": request, "usage": usage}
        post_turn(world, "agent/run-1", body)
        bodies.append(body)
    return bodies


def export(world: World, session: str, format: str) -> Any:
    response = world.api(world.ingest_key).get(f"/api/v1/sessions/{session}/export?format={format}")
    assert response.status_code == 200
    return response


def turns(world: World, key: str, session: str) -> list[dict[str, Any]]:
    client = world.api(key)
    listed = client.get(f"/api/v1/sessions/{session}/turns").json()
    return [client.get(f"/api/v1/sessions/{session}/turns/{t['index']}").json() for t in listed]


def test_jsonl_holds_each_request_as_ingested(world: World) -> None:
    bodies = chat_session(world)
    response = export(world, "agent/run-1", "jsonl")
    assert response["Content-Type"] == "application/x-ndjson"
    assert 'filename="agent_run-1.jsonl"' in response["Content-Disposition"]
    lines = [
        json.loads(line) for line in b"".join(response.streaming_content).decode().splitlines()
    ]
    assert [line["index"] for line in lines] == [0, 1, 2]
    assert [line["request"] for line in lines] == [b["request"] for b in bodies]
    assert [line["usage"]["input_tokens"] for line in lines] == [900, 1800, 2700]


@pytest.mark.parametrize("kind", ["openai-chat", "anthropic-messages"])
def test_an_otlp_export_read_back_by_the_receiver_keeps_every_message_and_count(
    world: World, kind: str
) -> None:
    if kind == "openai-chat":
        chat_session(world)
        session = "agent/run-1"
    else:
        post_turn(
            world,
            "claude",
            {
                "format": kind,
                "request": ANTHROPIC,
                "usage": {"input_tokens": 10, "output_tokens": 2, "cache_read_input_tokens": 500},
            },
        )
        session = "claude"
    document = b"".join(export(world, session, "otlp-json").streaming_content)
    # Read back by the receiver, into another project (the outsider's key).
    response = Client().post(
        "/v1/traces",
        document,
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {world.outsider_key}",
    )
    assert response.status_code == 200
    assert response.json() == {}
    original = turns(world, world.ingest_key, session)
    copy = turns(world, world.outsider_key, session)
    assert len(copy) == len(original)
    for before, after in zip(original, copy, strict=True):
        assert after["messages"] == before["messages"]
        for field in ("total_tokens", "regions", "reported_input_tokens", "context_window"):
            assert after[field] == before[field], field
    again = Client().post(
        "/v1/traces",
        document,
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {world.outsider_key}",
    )
    assert again.status_code == 200
    assert len(turns(world, world.outsider_key, session)) == len(original)  # doubles nothing


def test_an_unknown_export_format_is_a_400_and_the_page_offers_both(world: World) -> None:
    chat_session(world)
    response = world.api(world.ingest_key).get("/api/v1/sessions/agent/run-1/export?format=csv")
    assert response.status_code == 400
    assert "format" in response.json()["error"]["fields"]
    page = world.login(world.owner).get("/sessions/agent/run-1/")
    assert b"/api/v1/sessions/agent/run-1/export?format=otlp-json" in page.content
    assert b"/api/v1/sessions/agent/run-1/export?format=jsonl" in page.content


def test_the_setup_page_shows_every_way_in_for_this_server(world: World) -> None:
    page = world.login(world.teammate).get("/setup/")
    assert page.status_code == 200
    text = html.unescape(page.content.decode())
    for needle in (
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://testserver/v1/traces",
        "Authorization=Bearer%20$CTXWEB_API_KEY",
        "using_session",
        "TRACELOOP_BASE_URL=http://testserver",
        "LANGFUSE_HOST=http://testserver",
        "create_api_key --project alpha --role ingest",
        "ANTHROPIC_BASE_URL=http://testserver/proxy/anthropic",
        'base_url = "http://testserver/proxy/openai/v1"',
        "X-Ctxweb-Managed: 1",
    ):
        assert needle in text, needle
    assert 'data-copy="setup-otlp"' in text
