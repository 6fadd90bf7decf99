"""Secrets outside a call's messages (issue 34, item 6): its options (``user``, ``metadata``, any
other top-level key, nested or not), its tool definitions and its response are scanned like its
messages, credentials in URIs are found wherever they are, and with masking on no way content is
served (the context, both exports, a preview, the turn's API and page) gives a value back."""

from __future__ import annotations

import io
import json
import zipfile
from typing import Any

import pytest

from ctxweb.contexts.models import Session, ToolSet, Turn
from ctxweb.contexts.services.unread import unread_call_record
from tests.support.secrets import GITHUB_PAT
from tests.support.world import World

pytestmark = pytest.mark.django_db

POSTGRES = "postgres://admin:pw@host/db"
AMQP = "amqp://u:p@h"
REDIS = "redis://:pw@h"
HTTPS = "https://u:p@h"
#: What no served text may hold once masked: each URI's password with what surrounds it.
VALUES = [GITHUB_PAT, "admin:pw@", "u:p@h", ":pw@h"]
#: URIs without a password, and text that merely looks like them: never flagged, never changed.
CLEAN = ["https://example.com/docs?a=b:c@d", "postgres://admin@host/db", "ssh://git@host:22/r"]


def body(**options: Any) -> dict[str, Any]:
    messages = [
        {"role": "user", "content": f"Connect to {REDIS} and read {CLEAN[0]}"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "fetch", "arguments": json.dumps({"url": HTTPS})},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "fetched"},
    ]
    tool = {
        "type": "function",
        "function": {
            "name": "query",
            "description": f"Runs SQL on {POSTGRES}; see {CLEAN[1]}",
            "parameters": {"type": "object", "properties": {"sql": {"type": "string"}}},
        },
    }
    request = {
        "model": "gpt-4o",
        "messages": messages,
        "tools": [tool],
        "user": GITHUB_PAT,
        "metadata": {"db": POSTGRES, "clean": CLEAN[2]},
        "extra_options": {"broker": {"urls": [AMQP]}},
        **options,
    }
    response = {
        "id": "r1",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": f"Done; the broker is {AMQP}."},
                "finish_reason": "stop",
            }
        ],
    }
    return {"format": "openai-chat", "request": request, "response": response}


def post(world: World, external_id: str, data: dict[str, Any]) -> dict[str, Any]:
    response = world.api(world.ingest_key).post(
        f"/api/v1/sessions/{external_id}/turns", data=data, format="json"
    )
    assert response.status_code == 201, response.content
    return dict(response.json())


def masking(world: World) -> None:
    world.project.mask_secrets = True
    world.project.save()


def streamed(response: Any) -> str:
    assert response.status_code == 200, response
    return b"".join(response.streaming_content).decode()


def served(world: World, external_id: str) -> dict[str, str]:
    """Every way the session's content is served, as text."""
    api = world.api(world.operator_key)
    base = f"/api/v1/sessions/{external_id}"
    context = api.get(f"{base}/context")
    preview = api.post(f"{base}/preview", {"strategy": "nanobot-trim"}, format="json")
    turn = api.get(f"{base}/turns/0")
    page = world.login(world.owner).get(f"/sessions/{external_id}/turns/0/")
    for response in (context, preview, turn, page):
        assert response.status_code == 200, response.content[:500]
    return {
        "context": context.content.decode(),
        "jsonl": streamed(api.get(f"{base}/export?format=jsonl")),
        "otlp-json": streamed(api.get(f"{base}/export?format=otlp-json")),
        "preview": preview.content.decode(),
        "turn": turn.content.decode(),
        "page": page.content.decode(),
    }


def test_with_masking_on_no_option_tool_or_uri_password_is_served_anywhere(world: World) -> None:
    masking(world)
    post(world, "s1", body())
    for way, text in served(world, "s1").items():
        for value in VALUES:
            # JSON and HTML may escape slashes and quotes, never these characters
            assert value not in text, f"{value!r} served by {way}"
        assert "[SECRET:uri-password]" in text, way
        # the turn's API and page show messages and tools, not the options
        for clean in CLEAN if way not in ("turn", "page") else CLEAN[:2]:
            assert clean.replace("&", "&amp;") in text or clean in text, f"{clean} lost in {way}"


def test_with_masking_on_nothing_stored_holds_an_option_or_tool_secret(world: World) -> None:
    masking(world)
    post(world, "s1", body())
    turn = Turn.objects.get(session__external_id="s1")
    stored = json.dumps(
        [turn.request_extra, turn.response, [t.data for t in ToolSet.objects.all()]]
    )
    for value in VALUES:
        assert value not in stored
    assert turn.request_extra["user"] == "[SECRET:github-pat]"
    assert turn.request_extra["metadata"] == {
        "db": "postgres://admin:[SECRET:uri-password]@host/db",
        "clean": CLEAN[2],
    }
    assert turn.request_extra["extra_options"] == {
        "broker": {"urls": ["amqp://u:[SECRET:uri-password]@h"]}
    }


def test_each_finding_names_where_it_is_and_the_options_count_once(world: World) -> None:
    answer = post(world, "s1", body())
    places = sorted((s["kind"], s["field"], s["position"]) for s in answer["secrets"])
    assert places == sorted(
        [
            ("uri-password", "parts.0.text", 0),
            ("uri-password", "parts.0.arguments", 1),
            ("uri-password", "tools.0.description", None),
            ("github-pat", "request.user", None),
            ("uri-password", "request.metadata.db", None),
            ("uri-password", "request.extra_options.broker.urls.0", None),
            ("uri-password", "response.choices.0.message.content", None),
        ]
    )
    assert Session.objects.get(external_id="s1").secret_count == 6, "a response's not counted"
    second = body()
    second["request"]["messages"].append({"role": "assistant", "content": "ok"})
    again = post(world, "s1", second)
    assert sorted(s["field"] for s in again["secrets"]) == [
        "request.extra_options.broker.urls.0",
        "request.metadata.db",
        "request.user",
        "response.choices.0.message.content",
    ], "the turn lists its options' secrets; its tools and messages were the previous turn's"
    assert Session.objects.get(external_id="s1").secret_count == 6, "the same options again"
    detail = world.api(world.ingest_key).get("/api/v1/sessions/s1/turns/1").json()
    fields = {s["field"] for s in detail["secrets"]}
    assert {"tools.0.description", "request.user", "parts.0.text"} <= fields


def test_without_masking_options_are_kept_as_sent_and_flagged(world: World) -> None:
    post(world, "s1", body())
    context = world.api(world.ingest_key).get("/api/v1/sessions/s1/context").json()
    request = context.get("request", context)
    assert request["user"] == GITHUB_PAT
    assert request["metadata"]["db"] == POSTGRES
    page = world.login(world.owner).get("/sessions/s1/turns/0/").content.decode()
    assert "the request&#x27;s options" in page or "the request's options" in page
    assert "the tool definitions" in page


def test_a_request_without_passwords_has_no_findings_and_is_stored_as_sent(world: World) -> None:
    masking(world)
    data = {
        "format": "openai-chat",
        "request": {
            "model": "gpt-4o",
            "messages": [{"role": "user", "content": " ".join(CLEAN)}],
            "metadata": {"links": CLEAN},
            "user": "alice",
        },
    }
    answer = post(world, "s2", data)
    assert answer["secrets"] == []
    turn = Turn.objects.get(session__external_id="s2")
    assert turn.request_extra["metadata"] == {"links": CLEAN}


def test_with_masking_on_a_call_that_could_not_be_read_is_kept_masked(world: World) -> None:
    masking(world)
    request = {"model": "m", "metadata": {"db": POSTGRES}, "messages": [{"role": "?", "x": AMQP}]}
    answer = f'{{"type": "message", "content": "use {REDIS}"}}'
    call = unread_call_record(
        project=world.project,
        session_external_id="s9",
        format="anthropic-messages",
        request_body=json.dumps(request).encode() + b"\xff",
        response_body=answer.encode(),
        streamed=False,
        compressed=False,
        error="unreadable",
    )
    raw = world.api(world.ingest_key).get(f"/api/v1/unread-calls/{call.pk}/raw")
    assert raw.status_code == 200
    with zipfile.ZipFile(
        io.BytesIO(b"".join(raw.streaming_content) if raw.streaming else raw.content)
    ) as zipped:
        files = {name: zipped.read(name) for name in zipped.namelist()}
    kept = b"".join(files.values())
    for value in (b"admin:pw@", b"u:p@h", b":pw@h"):
        assert value not in kept
    assert files["request.json"].endswith(b"\xff"), "bytes that are not text are kept as they are"
    stored = json.loads(files["request.json"][:-1])
    assert stored["metadata"]["db"] == "postgres://admin:[SECRET:uri-password]@host/db"


def test_the_turn_after_masking_is_turned_on_masks_the_same_options(world: World) -> None:
    first = body()
    post(world, "s3", first)
    assert Turn.objects.get(session__external_id="s3", index=0).request_extra["user"] == GITHUB_PAT
    masking(world)
    second = body()
    second["request"]["messages"].append({"role": "assistant", "content": "ok"})
    post(world, "s3", second)
    latest = Turn.objects.get(session__external_id="s3", index=1)
    assert latest.request_extra["user"] == "[SECRET:github-pat]"
