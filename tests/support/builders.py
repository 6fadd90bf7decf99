"""Request bodies the tests send: an agent's history of tool calls and the turn body that carries
it; concurrent agents' contexts that share messages in different orders; and the check that a
stored turn is what was posted."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from compaction.messages import parse
from ctxweb.contexts import selectors
from ctxweb.contexts.models import Message, Turn

OUTPUT = "".join(
    f"line {n}: src/app/module_{n % 7}.py computed value {n * 3} for the report\n"
    for n in range(300)
)


def history(steps: int = 3, output: str = OUTPUT) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}]
    for i in range(steps):
        messages += [
            {"role": "user", "content": f"Step {i}: read file {i}."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{i}",
                        "type": "function",
                        "function": {"name": "read", "arguments": json.dumps({"path": f"f{i}"})},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": f"call_{i}", "content": f"file {i}\n{output}"},
        ]
    return messages


def chat_body(turns: int) -> dict[str, Any]:
    """An agent's body after ``turns`` calls, each adding a tool call and its result."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful coding agent."},
        {"role": "user", "content": "List the files in the repository."},
    ]
    for n in range(turns):
        call = {
            "id": f"call_{n}",
            "type": "function",
            "function": {"name": "ls", "arguments": "{}"},
        }
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"call_{n}", "content": f"file {n}\n" * 40},
        ]
    return {"model": "gpt-4o", "messages": messages, "max_tokens": 1000 + turns}


def ingest_chat(project: Any, external_id: str, turns: int) -> Turn:
    """:func:`chat_body` of ``turns`` calls ingested as a turn of ``external_id`` (turn id
    ``t-<turns>``), parsed and stored as the turn ingest view does."""
    from ctxweb.contexts import services

    request, turn_id = chat_body(turns), f"t-{turns}"
    body = {"format": "openai-chat", "request": request, "turn_id": turn_id}
    context = services.turn_request_parse(
        project=project, external_id=external_id, format="openai-chat", request=request
    )
    return services.turn_ingest(
        project=project, external_id=external_id, context=context, turn_id=turn_id, body=body
    ).turn


def body(messages: Sequence[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"format": "openai-chat", "request": {"model": "gpt-4o", "messages": list(messages)}}


#: How many concurrent agents :func:`request_for` has shared messages for.
AGENTS = 8

#: Short messages every agent sends, in its own order: concurrent first turns of different
#: sessions insert the same message rows in different orders.
COMMON = [f"Shared instruction {i}: keep going." for i in range(AGENTS)]


def request_for(client: int, step: int, tag: str = "") -> dict[str, Any]:
    """Client ``client``'s context at its ``step``-th call: a rotated shared preamble, then its
    own growing history (each step adds a user message, a tool call and its result)."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}]
    rotated = COMMON[client:] + COMMON[:client]
    messages += [{"role": "user", "content": text} for text in rotated]
    for k in range(step + 1):
        call = f"call_{client}_{k}"
        messages += [
            {"role": "user", "content": f"{tag}client {client} step {k}: read file {k}."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call,
                        "type": "function",
                        "function": {"name": "read", "arguments": json.dumps({"path": f"f{k}"})},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": call, "content": f"file {k} of client {client}\n"},
        ]
    return {"model": "gpt-4o", "messages": messages}


def turn_body(client: int, step: int, tag: str = "") -> dict[str, Any]:
    return {
        "format": "openai-chat",
        "request": request_for(client, step, tag),
        "turn_id": f"{tag}c{client}-s{step}",
    }


def assert_turn_holds(turn: Turn, payload: Mapping[str, Any]) -> None:
    """The stored turn is complete and is the context that was posted."""
    sent = parse(payload["format"], payload["request"])
    ids = selectors.turn_message_ids(session=turn.session, index=turn.index)
    assert len(ids) == turn.message_count == len(sent.messages)
    rows = Message.objects.in_bulk(set(ids))
    assert set(rows) == set(ids), "a turn refers to a message row that does not exist"
    stored = selectors.turn_context(turn=turn, rows=[rows[i] for i in ids])
    assert stored.messages == sent.messages, (
        f"turn {turn.index} ({turn.turn_id}) holds another body"
    )
    assert stored.system == sent.system
    assert sum(turn.regions.values()) == turn.total_tokens
