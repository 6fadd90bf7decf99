"""Ingesting turns and reading them back through the REST API."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ctxweb.contexts.models import Message, Session, Turn
from tests.ctxweb.conftest import World

pytestmark = pytest.mark.django_db


def chat(*messages: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"model": "gpt-4o", "messages": list(messages), **extra}


SYSTEM = {"role": "system", "content": "You are a careful coding agent."}
ASK = {"role": "user", "content": "List the files in the repository."}
CALL = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "ls", "arguments": '{"path": "."}'},
        }
    ],
}
RESULT = {"role": "tool", "tool_call_id": "call_1", "content": "README.md\nsetup.py\nsrc/\n" * 50}


def post(client: Any, external_id: str, body: dict[str, Any]) -> Any:
    return client.post(
        f"/api/v1/sessions/{external_id}/turns",
        data=json.dumps(body),
        content_type="application/json",
    )


def test_it_ingests_a_first_turn_and_creates_the_session(world: World) -> None:
    response = post(
        world.api(world.ingest_key), "s1", {"format": "openai-chat", "request": chat(SYSTEM, ASK)}
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["session"] == "s1"
    assert body["index"] == 0
    assert body["context_window"] == 128_000  # gpt-4o from the model table
    assert sum(body["regions"].values()) == body["total_tokens"]
    assert body["regions"]["system"] > 0
    assert body["regions"]["user"] > 0
    assert body["usage_ratio"] == pytest.approx(body["total_tokens"] / 128_000)
    session = Session.objects.get(external_id="s1")
    assert session.encoding == "o200k_base"
    assert not session.approximate


def test_each_message_is_stored_once_across_turns(world: World) -> None:
    client = world.api(world.ingest_key)
    post(client, "s1", {"format": "openai-chat", "request": chat(SYSTEM, ASK)})
    post(client, "s1", {"format": "openai-chat", "request": chat(SYSTEM, ASK, CALL, RESULT)})
    third = post(
        client, "s1", {"format": "openai-chat", "request": chat(SYSTEM, ASK, CALL, RESULT, ASK)}
    )
    assert third.json()["index"] == 2
    assert Message.objects.count() == 4  # system, ask, call, result: the repeated ask is one row
    turns = client.get("/api/v1/sessions/s1/turns").json()
    assert [t["index"] for t in turns] == [0, 1, 2]
    assert turns[1]["regions"]["tool_results"] > turns[0]["regions"]["tool_results"] == 0
    assert all(sum(t["regions"].values()) == t["total_tokens"] for t in turns)


def test_a_retried_turn_id_returns_the_same_turn(world: World) -> None:
    client = world.api(world.ingest_key)
    body = {"format": "openai-chat", "request": chat(SYSTEM, ASK), "turn_id": "t-1"}
    first = post(client, "s1", body)
    again = post(client, "s1", body)
    assert first.status_code == 201
    assert again.status_code == 200
    assert again.json()["index"] == first.json()["index"] == 0
    assert Turn.objects.count() == 1


def test_a_turn_id_reused_with_another_body_is_a_conflict(world: World) -> None:
    client = world.api(world.ingest_key)
    post(client, "s1", {"format": "openai-chat", "request": chat(SYSTEM, ASK), "turn_id": "t-1"})
    response = post(client, "s1", {"format": "openai-chat", "request": chat(ASK), "turn_id": "t-1"})
    assert response.status_code == 409
    assert response.json()["error"]["fields"] == {"turn_id": "reused with a different body"}
    assert Turn.objects.count() == 1


def test_reported_usage_is_kept_and_the_excess_is_unattributed(world: World) -> None:
    body = {
        "format": "anthropic-messages",
        "request": {
            "model": "claude-sonnet-4-5",
            "max_tokens": 1024,
            "messages": [{"role": "user", "content": "hi"}],
        },
        "usage": {"input_tokens": 10, "cache_read_input_tokens": 5000, "output_tokens": 3},
    }
    response = post(world.api(world.ingest_key), "s1", body)
    data = response.json()
    assert data["reported_input_tokens"] == 5010  # Anthropic excludes cache reads: added back
    assert data["regions"]["unattributed"] == 5010 - sum(
        v for k, v in data["regions"].items() if k != "unattributed"
    )
    assert data["total_tokens"] == 5010
    assert Session.objects.get().approximate  # Claude has no public tokenizer


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"format": "nope", "request": {}}, "format"),
        ({"format": "openai-chat"}, "request"),
        (
            {"format": "openai-chat", "request": {"messages": [{"role": "robot", "content": "x"}]}},
            "messages.0.role",
        ),
        (
            {
                "format": "openai-chat",
                "request": {
                    "messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]
                },
            },
            "messages.0.content.0.text",
        ),
        (
            {
                "format": "openai-chat",
                "request": {"messages": [{"role": "user", "content": "a\x00b"}]},
            },
            "messages.0",
        ),
    ],
)
def test_bad_input_gets_a_400_naming_the_field(
    world: World, body: dict[str, Any], field: str
) -> None:
    response = post(world.api(world.ingest_key), "s1", body)
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert any(path.startswith(field) for path in error["fields"]), error
    assert not Turn.objects.exists()


def test_malformed_json_is_a_400(world: World) -> None:
    response = world.api(world.ingest_key).post(
        "/api/v1/sessions/s1/turns", data="{not json", content_type="application/json"
    )
    assert response.status_code == 400
    assert "error" in response.json()


def test_a_body_over_the_limit_is_a_413(world: World, settings: Any) -> None:
    settings.CTXWEB_MAX_REQUEST_BYTES = 1000
    body = {"format": "openai-chat", "request": chat({"role": "user", "content": "x" * 5000})}
    response = post(world.api(world.ingest_key), "s1", body)
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "too_large"


def test_an_outsider_sees_nothing_of_the_project(world: World) -> None:
    post(world.api(world.ingest_key), "s1", {"format": "openai-chat", "request": chat(ASK)})
    outsider = world.api(world.outsider_key)
    assert outsider.get("/api/v1/sessions/s1").status_code == 404
    assert outsider.get("/api/v1/sessions/s1/turns").status_code == 404
    assert outsider.get("/api/v1/sessions/s1/turns/0").status_code == 404
    assert outsider.get("/api/v1/sessions").json()["count"] == 0
    logged_in = world.login(world.outsider)
    assert logged_in.get("/api/v1/sessions/s1").status_code == 404


def test_a_teammate_logged_in_reads_the_session(world: World) -> None:
    post(world.api(world.ingest_key), "s1", {"format": "openai-chat", "request": chat(ASK)})
    client = world.login(world.teammate)
    assert client.get("/api/v1/sessions/s1").json()["turn_count"] == 1


def test_requests_without_credentials_or_with_a_revoked_key_are_refused(world: World) -> None:
    assert world.api().get("/api/v1/sessions").status_code in (401, 403)
    from ctxweb.accounts.models import ApiKey
    from ctxweb.accounts.services import api_key_revoke, hash_key

    api_key_revoke(key=ApiKey.objects.get(key_hash=hash_key(world.ingest_key)))
    response = world.api(world.ingest_key).get("/api/v1/sessions")
    assert response.status_code == 401
    assert response.json()["error"]["message"] == "Invalid or revoked API key."


def test_the_turn_detail_lists_messages_with_regions_and_tokens(world: World) -> None:
    client = world.api(world.ingest_key)
    post(client, "s1", {"format": "openai-chat", "request": chat(SYSTEM, ASK, CALL, RESULT)})
    detail = client.get("/api/v1/sessions/s1/turns/0").json()
    assert [m["role"] for m in detail["messages"]] == ["system", "user", "assistant", "tool"]
    assert [m["region"] for m in detail["messages"]] == [
        "system",
        "user",
        "tool_calls",
        "tool_results",
    ]
    assert all(m["tokens"] > 0 for m in detail["messages"])
    assert client.get("/api/v1/sessions/s1/turns/9").status_code == 404


def test_sessions_list_sorts_filters_and_pages(world: World) -> None:
    client = world.api(world.ingest_key)
    for name in ("a", "b", "c"):
        post(client, name, {"format": "openai-chat", "request": chat(ASK)})
    post(client, "b", {"format": "openai-chat", "request": chat(ASK, CALL, RESULT)})
    listing = client.get("/api/v1/sessions?sort=-fill&limit=2").json()
    assert listing["count"] == 3
    assert listing["results"][0]["external_id"] == "b"
    assert len(listing["results"]) == 2
    assert client.get("/api/v1/sessions?q=c").json()["count"] == 1
    assert client.get("/api/v1/sessions?sort=bogus").status_code == 400


def test_a_big_drop_between_turns_is_a_compaction_event(world: World) -> None:
    client = world.api(world.ingest_key)
    post(client, "s1", {"format": "openai-chat", "request": chat(SYSTEM, ASK, CALL, RESULT)})
    response = post(client, "s1", {"format": "openai-chat", "request": chat(SYSTEM, ASK)})
    events = response.json()["events"]
    assert events
    assert events[0]["type"] == "compaction"
    assert Session.objects.get().compaction_count == 1


def test_the_schema_and_docs_are_served_offline(world: World) -> None:
    client = world.login(world.owner)
    schema = client.get("/api/schema/")
    assert schema.status_code == 200
    assert b"/api/v1/sessions/{external_id}/turns" in schema.content
    docs = client.get("/api/docs/")
    assert docs.status_code == 200
    assert b"cdn" not in docs.content.lower()
