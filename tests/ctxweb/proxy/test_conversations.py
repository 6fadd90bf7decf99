"""What agents do to a conversation between calls does not split it or defeat managed mode:
Claude Code moves its cache breakpoint to the newest message on every call; Codex sends the
provider's output items back without their ids, keys in another order, with its tools inside
``input``. Each conversation stays one session, the turn diff shows no disappeared message, and
an applied operation reaches the next call with the agent's tools and instructions intact."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ctxweb.contexts import selectors
from ctxweb.contexts.models import Session
from ctxweb.contexts.services import proxying
from tests.support.world import World

BREAKPOINT = {"type": "ephemeral"}
OUTPUT = "".join(f"line {n}: building src/module_{n % 7}.py ... ok\n" for n in range(900))


@pytest.fixture(autouse=True)
def inline_tasks(settings: Any) -> None:
    settings.CTXWEB_TASKS_INLINE = True


def _text(text: str, marked: bool = False) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": text}
    if marked:
        block["cache_control"] = BREAKPOINT
    return block


def _claude_request(rounds: int) -> dict[str, Any]:
    """Claude Code's request after ``rounds`` tool rounds: its agent list as a system message
    inside ``messages``, the breakpoint on the newest message only."""
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [_text("Fix the build.")]},
        {"role": "system", "content": "Available agent types for the Agent tool: general."},
    ]
    for n in range(rounds):
        messages += [
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": f"t{n}", "name": "Bash", "input": {"n": n}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"t{n}", "content": OUTPUT}],
            },
        ]
    last = messages[-1]["content"][-1] if rounds else messages[0]["content"][-1]
    last["cache_control"] = BREAKPOINT
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 32_000,
        "system": [_text("You are Claude Code.", marked=True)],
        "tools": [{"name": "Bash", "description": "Run a command.", "input_schema": {}}],
        "messages": messages,
        "stream": True,
    }


def _claude_answer(n: int) -> bytes:
    """The streamed answer that calls tool ``t{n}`` (what the provider sends)."""
    events = [
        ("message_start", {"type": "message_start", "message": {"usage": {"input_tokens": 9}}}),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "tool_use", "id": f"t{n}", "name": "Bash", "input": {}},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": json.dumps({"n": n})},
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "usage": {"output_tokens": 5}}),
        ("message_stop", {"type": "message_stop"}),
    ]
    return "".join(f"event: {e}\ndata: {json.dumps(d)}\n\n" for e, d in events).encode()


TOOLS_ITEM = {
    "type": "additional_tools",
    "tools": [
        {
            "type": "namespace",
            "name": "functions",
            "tools": [{"type": "function", "name": "read", "parameters": {}}],
        },
        {"type": "custom", "name": "exec", "description": "Run a command."},
    ],
}


def _codex_request(rounds: int, *, echoed: bool = True) -> dict[str, Any]:
    items: list[dict[str, Any]] = [
        TOOLS_ITEM,
        {
            "type": "message",
            "role": "developer",
            "content": [{"type": "input_text", "text": "sandbox"}],
        },
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Fix it."}]},
    ]
    for n in range(rounds):
        # echoed as Codex sends it back: no id, its own key order
        items += [
            {
                "type": "custom_tool_call",
                "status": "completed",
                "call_id": f"c{n}",
                "name": "exec",
                "input": f"make {n}",
            },
            {
                "type": "custom_tool_call_output",
                "call_id": f"c{n}",
                "output": [{"type": "input_text", "text": OUTPUT}],
            },
        ]
    return {"model": "gpt-6.2-sol", "input": items, "tools": [], "stream": True}


def _codex_answer(n: int) -> bytes:
    item = {
        "id": f"ctc_{n}",
        "type": "custom_tool_call",
        "status": "completed",
        "name": "exec",
        "input": f"make {n}",
        "call_id": f"c{n}",
    }
    response = {"id": "resp", "status": "completed", "output": [item], "usage": {"input_tokens": 9}}
    event = {"type": "response.completed", "response": response}
    return f"event: response.completed\ndata: {json.dumps(event)}\n\n".encode()


def _call(
    world: World, fmt: str, request: dict[str, Any], answer: bytes, *, managed: bool = False
) -> tuple[str | None, proxying.Prepared]:
    body = json.dumps(request).encode()
    prepared = proxying.proxy_prepare(
        project=world.project, key_id=7, format=fmt, body=body, session=None, managed=managed
    )
    recorded = proxying.proxy_record(
        project=world.project,
        key_id=7,
        format=fmt,
        request_body=prepared.body,
        response_body=answer,
        streamed=True,
        session=prepared.session,
        original=prepared.original if prepared.body != body else (),
        events=prepared.events,
    )
    return recorded, prepared


CASES = {
    "claude-code": ("anthropic-messages", _claude_request, _claude_answer),
    "codex": ("openai-responses", _codex_request, _codex_answer),
}


@pytest.mark.parametrize("agent", sorted(CASES))
def test_one_conversation_is_one_session_without_a_session_header(world: World, agent: str) -> None:
    fmt, request, answer = CASES[agent]
    sessions = {_call(world, fmt, request(n), answer(n))[0] for n in range(4)}
    assert len(sessions) == 1
    assert None not in sessions
    session = Session.objects.get(project=world.project, external_id=sessions.pop())
    assert session.turns.count() == 4
    for index in range(1, 4):
        diff = selectors.turn_diff(session=session, index=index)
        assert diff["removed"] == [], diff  # a moved breakpoint is not a disappeared message
        assert len(diff["added"]) == 2


@pytest.mark.parametrize("agent", sorted(CASES))
def test_an_applied_operation_reaches_the_next_call_with_tools_and_instructions(
    world: World, agent: str, django_capture_on_commit_callbacks: Any
) -> None:
    fmt, request, answer = CASES[agent]
    for n in range(6):
        external_id, _ = _call(world, fmt, request(n), answer(n))
    client = world.api(world.operator_key)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            f"/api/v1/sessions/{external_id}/operations",
            data=json.dumps({"strategy": "ctxweb-auto", "params": {"target_tokens": 4_000}}),
            content_type="application/json",
        )
    assert response.status_code == 202, response.content
    operation = client.get(f"/api/v1/operations/{response.json()['id']}").json()
    assert operation["status"] == "succeeded", operation

    whole = request(6)
    joined, prepared = _call(world, fmt, whole, answer(6), managed=True)
    assert joined == external_id
    assert [e["type"] for e in prepared.events] == ["managed"]
    sent = json.loads(prepared.body)
    assert len(prepared.body) < len(json.dumps(whole)) / 2
    if agent == "codex":
        assert sent["input"][0] == TOOLS_ITEM  # the tools the agent sent, first, untouched
        assert [i.get("role") for i in sent["input"][:2]] == [None, "developer"]
    else:
        assert sent["tools"] == whole["tools"]
        assert sent["system"] == whole["system"]
        assert whole["messages"][1] in sent["messages"]  # the agent list, a system message
        marked = [
            b
            for m in sent["messages"]
            if isinstance(m["content"], list)
            for b in m["content"]
            if "cache_control" in b
        ]
        assert len(marked) == 1  # the agent's own breakpoint only
    turn = (
        Session.objects.get(project=world.project, external_id=external_id)
        .turns.order_by("-index")
        .first()
    )
    assert {e["type"] for e in turn.events} >= {"managed", "operation"}

    # and the next call, still carrying the whole history, is rewritten the same way
    _, again = _call(world, fmt, request(7), answer(7), managed=True)
    assert [e["type"] for e in again.events] == ["managed"]
    assert len(again.body) < len(json.dumps(request(7))) / 2


def _named(world: World, request: dict[str, Any], answer: bytes, session: str) -> str | None:
    return proxying.proxy_record(
        project=world.project,
        key_id=7,
        format="anthropic-messages",
        request_body=json.dumps(request).encode(),
        response_body=answer,
        streamed=True,
        session=session,
    )


TITLE = {
    "model": "claude-haiku-4-5",
    "max_tokens": 512,
    "system": [_text("Generate a short title for this conversation.")],
    "tools": [],
    "messages": [{"role": "user", "content": "Fix the build."}],
    "stream": True,
}


def test_side_calls_of_a_named_session_go_beside_it(world: World) -> None:
    assert _named(world, _claude_request(0), _claude_answer(0), "my-task") == "my-task"
    assert _named(world, TITLE, _claude_answer(9), "my-task") == "my-task" + proxying.SIDE_SUFFIX
    assert _named(world, _claude_request(1), _claude_answer(1), "my-task") == "my-task"
    # an agent's own compaction (same system prompt, the history replaced) stays in the session
    compacted = _claude_request(0)
    compacted["messages"][0]["content"] = [_text("Summary of the work so far.")]
    assert _named(world, compacted, _claude_answer(2), "my-task") == "my-task"
    assert Session.objects.get(project=world.project, external_id="my-task").turns.count() == 3


def test_a_named_session_of_an_agent_without_tools_keeps_every_call(world: World) -> None:
    plain = {**TITLE, "system": [_text("Act as an expert software developer.")]}
    other = {**TITLE, "system": [_text("Write a commit message.")]}
    for request in (plain, other, plain):
        assert _named(world, request, _claude_answer(0), "aider-task") == "aider-task"
