"""Bad input through HTTP: each gets a 4xx in the contract's error shape naming the field, and
nothing is stored or changed (every table's row count and the stored session stay as they were).

Cases already in ``test_turns.py`` (the basic malformed shapes) are not repeated here.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from ctxweb.contexts.models import (
    Artifact,
    ManagedContext,
    Message,
    Operation,
    Session,
    ToolSet,
    Turn,
)
from tests.support.world import World

pytestmark = pytest.mark.django_db

TURNS = "/api/v1/sessions/s1/turns"
USER = {"role": "user", "content": "Read the config file."}
CALL = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "read", "arguments": "{}"}}
    ],
}
RESULT = {"role": "tool", "tool_call_id": "call_1", "content": "debug = true"}


def chat(*messages: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "format": "openai-chat",
        "request": {"model": "gpt-4o", "messages": list(messages)},
        **extra,
    }


def snapshot() -> tuple[Any, ...]:
    """Everything a bad request must leave as it was."""
    session = Session.objects.filter(external_id="s1").values().first()
    counts = tuple(
        model.objects.count()
        for model in (Session, Turn, Message, ToolSet, Artifact, Operation, ManagedContext)
    )
    return (*counts, session)


@pytest.fixture
def client(world: World) -> Any:
    """An operator key of a project that already holds session ``s1`` with one turn."""
    client = world.api(world.operator_key)
    response = post(client, TURNS, chat(USER, CALL, RESULT, turn_id="t0"))
    assert response.status_code == 201, response.content
    return client


def post(client: Any, url: str, body: Any) -> Any:
    data = body if isinstance(body, bytes | str) else json.dumps(body)
    return client.post(url, data=data, content_type="application/json")


def refused(response: Any, status: int, field: str) -> dict[str, Any]:
    """Assert the contract's error naming ``field`` (or a path under it); return the error."""
    assert response.status_code == status, response.content[:500]
    error = response.json()["error"]
    assert set(error) == {"code", "message", "fields"}
    assert any(path == field or path.startswith(field + ".") for path in error["fields"]), error
    return error


# --- unreadable bodies ---------------------------------------------------------------------------

JSON_ENDPOINTS = [
    TURNS,
    "/api/v1/preview",
    "/api/v1/sessions/s1/preview",
    "/api/v1/sessions/s1/operations",
]


@pytest.mark.parametrize("url", JSON_ENDPOINTS)
def test_malformed_json_is_a_400_naming_the_body(client: Any, url: str) -> None:
    before = snapshot()
    error = refused(post(client, url, '{"format": "openai-chat",'), 400, "body")
    assert error["code"] == "parse_error"
    assert snapshot() == before


@pytest.mark.parametrize("url", JSON_ENDPOINTS)
def test_a_body_that_is_not_utf8_is_a_400(client: Any, url: str) -> None:
    before = snapshot()
    raw = b'{"format": "openai-chat", "request": {"messages": [{"content": "\xff\xfe"}]}}'
    error = refused(post(client, url, raw), 400, "body")
    assert "UTF-8" in error["message"]
    assert snapshot() == before


def test_nan_is_not_json(client: Any) -> None:
    before = snapshot()
    refused(post(client, TURNS, '{"format": "openai-chat", "context_window": NaN}'), 400, "body")
    assert snapshot() == before


@pytest.mark.parametrize("url", [TURNS, "/api/v1/preview", "/api/v1/sessions/s1/operations"])
def test_a_body_that_is_not_an_object_is_a_400(client: Any, url: str) -> None:
    before = snapshot()
    response = post(client, url, [1, 2, 3])
    assert response.status_code == 400
    assert response.json()["error"]["fields"]
    assert snapshot() == before


# --- wrong types, unknown roles, missing fields -----------------------------------------------


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"format": 5, "request": {"messages": [USER]}}, "format"),
        ({"format": "openai-chat", "request": "a string"}, "request"),
        ({**chat(USER), "context_window": "big"}, "context_window"),
        ({**chat(USER), "context_window": 0}, "context_window"),
        ({**chat(USER), "turn_id": {"id": 1}}, "turn_id"),
        ({**chat(USER), "usage": [1, 2]}, "usage"),
        ({**chat(USER), "allow_orphans": "perhaps"}, "allow_orphans"),
        ({"format": "openai-chat", "request": {"messages": "hello"}}, "messages"),
        (chat({"role": "user", "content": 5}), "messages.0.content"),
        (chat({"role": "assistant", "tool_calls": "read"}), "messages.0.tool_calls"),
        (chat({"content": "no role"}), "messages.0.role"),
        (chat({"role": 7, "content": "beep"}), "messages.0.role"),
        ({"request": {"messages": [USER]}}, "format"),
        ({"format": "openai-chat", "request": {}}, "messages"),
        ({"format": "openai-chat", "request": {"messages": [USER]}, "model": "x" * 201}, "model"),
        ({"format": "cohere-chat", "request": {"messages": [USER]}}, "format"),
    ],
)
def test_a_malformed_turn_is_a_400_naming_the_field(client: Any, body: Any, field: str) -> None:
    before = snapshot()
    refused(post(client, TURNS, body), 400, field)
    assert snapshot() == before


@pytest.mark.parametrize(
    "body",
    [
        chat(USER, {"role": "robot", "content": "beep"}),
        {
            "format": "anthropic-messages",
            "request": {
                "max_tokens": 100,
                "messages": [{"role": "user", "content": "hi"}, {"role": "system", "content": "x"}],
            },
        },
        {
            "format": "openai-responses",
            "request": {"input": [{"type": "message", "role": "robot", "content": "x"}]},
        },
    ],
)
def test_a_role_ctxweb_does_not_know_is_kept_not_refused(client: Any, body: Any) -> None:
    session = f"/api/v1/sessions/roles-{body['format']}"
    response = post(client, f"{session}/turns", body)
    assert response.status_code == 201, response.content
    assert client.get(f"{session}/turns/0").json()["messages"]
    assert client.get(f"{session}/context").json()["request"] == body["request"]


def test_a_session_id_longer_than_the_column_is_a_400(client: Any) -> None:
    before = snapshot()
    refused(post(client, f"/api/v1/sessions/{'x' * 201}/turns", chat(USER)), 400, "external_id")
    assert snapshot() == before


# --- orphaned tool calls and results --------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (chat(USER, RESULT), "messages.1.tool_call_id"),
        (chat(USER, CALL, USER), "messages.1.tool_calls.0.id"),
        (
            {
                "format": "anthropic-messages",
                "request": {
                    "max_tokens": 100,
                    "messages": [
                        {
                            "role": "user",
                            "content": [
                                {"type": "text", "text": "go on"},
                                {"type": "tool_result", "tool_use_id": "toolu_9", "content": "ok"},
                            ],
                        }
                    ],
                },
            },
            "messages.0.content.1.tool_use_id",
        ),
        (
            {
                "format": "anthropic-messages",
                "request": {
                    "messages": [
                        USER,
                        {
                            "role": "assistant",
                            "content": [
                                {"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {}}
                            ],
                        },
                        {"role": "user", "content": "never mind"},
                    ]
                },
            },
            "messages.1.content.0.id",
        ),
        (
            {
                "format": "openai-responses",
                "request": {
                    "input": [
                        {"role": "user", "content": "hi"},
                        {"type": "function_call_output", "call_id": "fc_1", "output": "ok"},
                    ]
                },
            },
            "input.1.call_id",
        ),
    ],
)
def test_orphaned_tool_results_and_calls_are_a_400_naming_the_id(
    client: Any, body: Any, field: str
) -> None:
    before = snapshot()
    error = refused(post(client, TURNS, body), 400, field)
    assert error["code"] == "orphaned_tool_messages"
    assert "allow_orphans" in error["message"]
    assert snapshot() == before


def test_an_orphan_a_growing_session_adds_is_refused_whatever_the_turns_before(
    client: Any,
) -> None:
    """Later turns are checked from where the previous one left off: what they add is checked
    against the calls before it, and a rewritten history is checked whole."""
    second = {**CALL, "tool_calls": [{**CALL["tool_calls"][0], "id": "call_2"}]}
    grown = [USER, CALL, RESULT, USER, second]
    before = snapshot()
    refused(post(client, TURNS, chat(*grown)), 400, "messages.4.tool_calls.0.id")
    stray = {**RESULT, "tool_call_id": "call_9"}
    refused(post(client, TURNS, chat(USER, CALL, RESULT, stray)), 400, "messages.3.tool_call_id")
    assert snapshot() == before
    answered = {**RESULT, "tool_call_id": "call_2"}
    assert post(client, TURNS, chat(*grown, answered)).status_code == 201
    # The agent rewrites its history: the first call's result is gone.
    refused(post(client, TURNS, chat(USER, CALL, USER, second, answered)), 400, "messages.1")
    # A result answering a call that an earlier turn already answered has no call left.
    again = chat(*grown, answered, {**RESULT, "tool_call_id": "call_1"})
    refused(post(client, TURNS, again), 400, "messages.6.tool_call_id")


def test_an_agent_that_sends_orphans_may_say_so(client: Any) -> None:
    response = post(client, TURNS, {**chat(USER, RESULT), "allow_orphans": True})
    assert response.status_code == 201, response.content
    assert response.json()["index"] == 1


def test_a_responses_request_continuing_a_stored_response_answers_its_calls(client: Any) -> None:
    body = {
        "format": "openai-responses",
        "request": {
            "model": "gpt-5",
            "previous_response_id": "resp_1",
            "input": [{"type": "function_call_output", "call_id": "fc_1", "output": "ok"}],
        },
    }
    assert post(client, "/api/v1/sessions/r1/turns", body).status_code == 201


# --- NUL characters, surrogates -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({**chat(USER), "model": "gpt\x00"}, "model"),
        ({**chat(USER), "turn_id": "t\x001"}, "turn_id"),
        ({**chat(USER), "usage": {"input_tokens": 3, "note": "a\x00"}}, "usage.note"),
        ({**chat(USER), "response": {"choices": [{"text": "\x00"}]}}, "response.choices.0.text"),
        ({**chat(USER), "usage": {"in\x00put": 3}}, "usage"),
        (
            {"format": "openai-chat", "request": {"messages": [USER], "metadata": {"k\x00": 1}}},
            "metadata",
        ),
        (chat({"role": "user", "content": "\ud800 lone"}), "messages.0.content"),
    ],
)
def test_strings_no_database_can_hold_are_a_400_naming_the_field(
    client: Any, body: Any, field: str
) -> None:
    before = snapshot()
    error = refused(post(client, TURNS, json.dumps(body)), 400, field)
    assert error["code"] == "invalid"
    assert snapshot() == before


@pytest.mark.parametrize(
    ("body", "field"),
    [
        # a new message after the stored turn's three (only the new ones are looked at)
        (chat(USER, CALL, RESULT, {"role": "user", "content": "next\x00"}), "messages.3.content"),
        (
            chat(
                USER, CALL, RESULT, {"role": "user", "content": [{"type": "text", "text": "\x00"}]}
            ),
            "messages.3.content.0.text",
        ),
        (chat(USER, CALL, RESULT, {"role": "user", "content": "x", "me\x00ta": 1}), "messages.3"),
        # a session's first request: every message is new
        (chat({"role": "user", "content": "a\x00"}, session="other"), "messages.0.content"),
        (
            {
                "format": "anthropic-messages",
                "request": {
                    "model": "claude-sonnet-4-5",
                    "max_tokens": 10,
                    "messages": [{"role": "user", "content": [{"type": "text", "text": "\x00"}]}],
                },
                "session": "third",
            },
            "messages.0.content.0.text",
        ),
        (
            {
                "format": "openai-responses",
                "request": {"model": "gpt-4o", "input": [{"role": "user", "content": "b\x00"}]},
                "session": "fourth",
            },
            "input.0.content",
        ),
    ],
)
def test_a_nul_in_a_message_is_a_400_naming_it(client: Any, body: Any, field: str) -> None:
    session = body.pop("session", "s1")
    before = snapshot()
    error = refused(post(client, f"/api/v1/sessions/{session}/turns", body), 400, field)
    assert error["code"] == "invalid"
    assert "NUL" in error["message"]
    assert snapshot() == before
    assert not Session.objects.filter(external_id=session).exclude(external_id="s1").exists()


def test_a_refused_message_is_looked_at_again_when_it_comes_back(client: Any) -> None:
    # the refused request is not remembered as the session's latest: sent again, it is refused
    # again, and the good turn after it is stored
    bad = chat(USER, CALL, RESULT, {"role": "user", "content": "next\x00"})
    for _ in range(2):
        refused(post(client, TURNS, bad), 400, "messages.3.content")
    good = chat(USER, CALL, RESULT, {"role": "user", "content": "next"})
    assert post(client, TURNS, good).status_code == 201
    assert Turn.objects.filter(session__external_id="s1").count() == 2


def test_a_nul_in_the_operation_params_is_a_400(client: Any) -> None:
    before = snapshot()
    body = {"strategy": "baseagent-prune", "params": {"protect\x00": 1}}
    refused(post(client, "/api/v1/sessions/s1/operations", body), 400, "params")
    assert snapshot() == before


def test_a_nul_in_the_path_or_the_query_is_a_400(client: Any) -> None:
    before = snapshot()
    refused(post(client, "/api/v1/sessions/s%001/turns", chat(USER)), 400, "path")
    refused(client.get("/api/v1/sessions?q=a%00b"), 400, "q")
    assert snapshot() == before


# --- sizes and depth ----------------------------------------------------------------------------


def test_a_body_over_the_limit_is_a_413_before_it_is_read(client: Any, settings: Any) -> None:
    settings.CTXWEB_MAX_REQUEST_BYTES = 10_000
    before = snapshot()
    for url in JSON_ENDPOINTS:
        body = chat({"role": "user", "content": "x" * 20_000}, strategy="nanobot-trim")
        response = post(client, url, body)
        assert response.status_code == 413
        assert response.json()["error"]["code"] == "too_large"
    assert snapshot() == before


@pytest.mark.parametrize("where", ["response", "request", "usage"])
def test_json_nested_ten_thousand_deep_is_a_400_naming_the_path(client: Any, where: str) -> None:
    before = snapshot()
    deep = "[" * 10_000 + "]" * 10_000
    head = json.dumps(chat(USER))[:-1]  # the body without its closing brace
    if where == "request":
        text = '{"format": "openai-chat", "request": {"messages": [], "tools": ' + deep + "}}"
        field = "tools"
    else:
        text = f'{head}, "{where}": {deep}}}'
        field = where
    error = refused(post(client, TURNS, text), 400, field)
    assert "nested deeper than" in error["message"]
    assert snapshot() == before


def test_json_nested_nine_hundred_deep_is_a_400_too(client: Any) -> None:
    """Deep enough to break a recursive encoder when stored, shallow enough to decode."""
    before = snapshot()
    deep: Any = []
    for _ in range(900):
        deep = [deep]
    text = json.dumps({**chat(USER), "response": deep}, check_circular=False)
    refused(post(client, TURNS, text), 400, "response.0.0.0")
    assert snapshot() == before


def test_a_single_twenty_megabyte_message_is_accepted_and_counted(client: Any) -> None:
    # Varied words, not one repeated character: a realistic tokenizer load.
    words = " ".join(f"word{n % 5000}" for n in range(2_400_000))[: 20 * 1024 * 1024]
    body = chat({"role": "user", "content": words})
    response = post(client, "/api/v1/sessions/big/turns", body)
    assert response.status_code == 201, response.content[:500]
    assert response.json()["total_tokens"] > 2_000_000


# --- unknown names and out-of-range parameters ---------------------------------------------------


def test_an_unknown_format_is_a_400_on_every_endpoint_that_takes_one(client: Any) -> None:
    before = snapshot()
    preview = {"format": "cohere", "request": {"messages": [USER]}, "strategy": "nanobot-trim"}
    refused(post(client, "/api/v1/preview", preview), 400, "format")
    upload = SimpleUploadedFile("t.json", b'[{"id": "x", "messages": []}]')
    response = client.post("/api/v1/import", {"file": upload, "format": "cohere"})
    refused(response, 400, "format")
    assert snapshot() == before


@pytest.mark.parametrize(
    "url", ["/api/v1/preview", "/api/v1/sessions/s1/preview", "/api/v1/sessions/s1/operations"]
)
def test_an_unknown_strategy_is_a_400_naming_strategy(client: Any, url: str) -> None:
    before = snapshot()
    body = {"format": "openai-chat", "request": {"messages": [USER]}, "strategy": "magic"}
    refused(post(client, url, body), 400, "strategy")
    assert snapshot() == before


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"keep_recent": -1}, "params.keep_recent"),
        ({"keep_recent": "many"}, "params.keep_recent"),
        ({"no_such_param": 1}, "params.no_such_param"),
    ],
)
@pytest.mark.parametrize(
    "url", ["/api/v1/preview", "/api/v1/sessions/s1/preview", "/api/v1/sessions/s1/operations"]
)
def test_parameters_out_of_range_are_a_400_naming_them(
    client: Any, url: str, params: dict[str, Any], field: str
) -> None:
    before = snapshot()
    body = {
        "format": "openai-chat",
        "request": {"messages": [USER]},
        "strategy": "anthropic-clear-tool-uses",
        "params": params,
    }
    refused(post(client, url, body), 400, field)
    assert snapshot() == before


def test_a_session_preview_of_a_turn_out_of_range_is_a_400(client: Any) -> None:
    before = snapshot()
    body = {"strategy": "nanobot-trim", "turn": 99}
    refused(post(client, "/api/v1/sessions/s1/preview", body), 400, "turn")
    refused(post(client, "/api/v1/sessions/s1/preview", {**body, "turn": -1}), 400, "turn")
    assert snapshot() == before


def test_a_turn_id_reused_with_another_body_is_a_409_and_changes_nothing(client: Any) -> None:
    before = snapshot()
    response = post(client, TURNS, chat(USER, turn_id="t0"))
    error = refused(response, 409, "turn_id")
    assert error["code"] == "conflict"
    assert snapshot() == before
    again = post(client, TURNS, chat(USER, CALL, RESULT, turn_id="t0"))
    assert again.status_code == 200  # the same body again is a retry, not a conflict
    assert snapshot() == before


@pytest.mark.parametrize(
    "path", ["/api/v1/operations/-1", "/api/v1/sessions/s1/turns/x", "/api/v1/nothing-here"]
)
def test_an_api_path_no_route_matches_is_a_json_404(client: Any, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
