"""A turn's body is decoded without the messages its session's previous body held byte for byte
(``services.turn_body_decode``): what is stored is what decoding and parsing the whole body
gives, and every bad-input answer is the one a fresh session gets."""

from __future__ import annotations

import json
from typing import Any

import pytest

from compaction.messages import parse
from compaction.messages import rawbody as rawbody_module
from compaction.messages import render as render_request
from ctxweb.contexts import selectors
from ctxweb.contexts.models import Message, Turn
from tests.support.world import World

pytestmark = pytest.mark.django_db

SYSTEM = {"role": "system", "content": "You are a careful coding agent."}


def messages(turns: int) -> list[dict[str, Any]]:
    """An agent's messages after ``turns`` calls, each output large enough (the bodies pass the
    size below which nothing is reused)."""
    out: list[dict[str, Any]] = [SYSTEM, {"role": "user", "content": "Read every file."}]
    for n in range(turns):
        call = {
            "id": f"call_{n}",
            "type": "function",
            "function": {"name": "read", "arguments": json.dumps({"path": f"src/m{n}.py"})},
        }
        out.append({"role": "assistant", "content": None, "tool_calls": [call]})
        out.append({"role": "tool", "tool_call_id": f"call_{n}", "content": f"line {n} é\n" * 3500})
    return out


def body(turns: int, **extra: Any) -> dict[str, Any]:
    return {
        "format": "openai-chat",
        "turn_id": f"turn-{turns}",  # before the request, and new every call
        "request": {"model": "gpt-4o", "messages": messages(turns)},
        **extra,
    }


def send(client: Any, external_id: str, raw: bytes) -> Any:
    return client.post(
        f"/api/v1/sessions/{external_id}/turns", data=raw, content_type="application/json"
    )


@pytest.fixture
def reuses(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many messages each reusing decode took from the previous body."""
    counts: list[int] = []
    original = rawbody_module.decode_reusing

    def spy(*args: Any, **kwargs: Any) -> Any:
        reused = original(*args, **kwargs)
        counts.append(reused.count if reused is not None else 0)
        return reused

    monkeypatch.setattr("ctxweb.contexts.services._parsing.decode_reusing", spy)
    return counts


def stored_messages(world: World, external_id: str) -> tuple[Any, ...]:
    session = selectors.session_get(project=world.project, external_id=external_id)
    assert session is not None
    turn = Turn.objects.filter(session=session).order_by("-index").first()
    assert turn is not None
    ids = selectors.turn_message_ids(session=session, index=turn.index)
    rows = Message.objects.in_bulk(set(ids))
    return selectors.turn_context(turn=turn, rows=[rows[i] for i in ids]).messages


def test_a_growing_conversation_decodes_only_its_new_messages(
    world: World, reuses: list[int]
) -> None:
    client = world.api(world.ingest_key)
    for turns in range(1, 6):
        sent = body(turns)
        response = send(client, "grow", json.dumps(sent).encode())
        assert response.status_code == 201, response.content
        expected = parse("openai-chat", sent["request"]).messages
        assert stored_messages(world, "grow") == expected

    # each body after the first took every message of the one before from it
    assert reuses == [2 * t + 2 for t in range(1, 5)]


def test_a_retry_of_the_same_body_is_the_same_turn(world: World, reuses: list[int]) -> None:
    client = world.api(world.ingest_key)
    raw = json.dumps(body(3)).encode()
    first = send(client, "retry", raw)
    again = send(client, "retry", raw)
    assert first.status_code == 201
    assert again.status_code == 200
    assert again.json() == {**first.json(), "events": again.json()["events"]}
    assert reuses == [8]


@pytest.mark.parametrize(
    ("broken", "field"),
    [
        (lambda raw: raw[:-40] + b'"unterminated', "body"),
        (lambda raw: raw.replace(b"line 3 ", b"line 3 \\u0000", 1), "messages.9.content"),
        (lambda raw: raw.replace(b'"tool_call_id": "call_3"', b'"tool_call_id": 7', 1), None),
    ],
)
def test_a_bad_new_message_is_refused_as_a_fresh_session_refuses_it(
    world: World, broken: Any, field: str | None
) -> None:
    client = world.api(world.ingest_key)
    assert send(client, "s", json.dumps(body(3)).encode()).status_code == 201
    before = Message.objects.count(), Turn.objects.count()
    bad = broken(json.dumps(body(4)).encode())

    refused = send(client, "s", bad)
    fresh = send(client, "fresh", bad)

    assert refused.status_code == fresh.status_code == 400
    assert refused.json()["error"]["fields"] == fresh.json()["error"]["fields"]
    if field is not None:
        assert field in refused.json()["error"]["fields"]
    assert (Message.objects.count(), Turn.objects.count()) == before


def test_a_second_request_key_after_the_messages_is_read_as_a_decoder_reads_it(
    world: World, reuses: list[int]
) -> None:
    """Of two ``request`` keys, JSON decoders take the last: so does the stored turn."""
    client = world.api(world.ingest_key)
    assert send(client, "dup", json.dumps(body(3)).encode()).status_code == 201
    last = {"model": "gpt-4o", "messages": messages(1)}
    raw = json.dumps(body(4))[:-1] + ', "request": ' + json.dumps(last) + "}"

    response = send(client, "dup", raw.encode())

    assert response.status_code == 201, response.content
    assert stored_messages(world, "dup") == parse("openai-chat", last).messages
    assert reuses == [0]  # nothing reused: the whole body was decoded


def test_an_agent_rewriting_its_first_message_is_not_searched_every_turn(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A body that repeats nothing of the previous one costs the look for where its messages
    lie only now and then (it cannot be reused anyway)."""
    searched: list[int] = []
    original = rawbody_module.spans_of

    def spy(raw: bytes, path: tuple[str, ...]) -> Any:
        searched.append(len(raw))
        return original(raw, path)

    monkeypatch.setattr("ctxweb.contexts.services._parsing.spans_of", spy)
    client = world.api(world.ingest_key)
    for turn in range(18):
        sent = body(2, turn_id=f"clock-{turn}")
        sent["request"]["messages"][0] = {"role": "system", "content": f"It is 10:{turn:02}."}
        assert send(client, "clock", json.dumps(sent).encode()).status_code in (200, 201)
        assert stored_messages(world, "clock") == parse("openai-chat", sent["request"]).messages

    # the first body, the first miss, then every sixteenth miss
    assert len(searched) == 3


def anthropic_body(turns: int) -> dict[str, Any]:
    history: list[dict[str, Any]] = [{"role": "user", "content": "Read every file."}]
    for n in range(turns):
        use = {"type": "tool_use", "id": f"tu_{n}", "name": "read", "input": {"path": f"m{n}.py"}}
        result = {"type": "tool_result", "tool_use_id": f"tu_{n}", "content": f"x {n}\n" * 8000}
        history += [
            {"role": "assistant", "content": [use]},
            {"role": "user", "content": [result]},
        ]
    request = {"model": "claude-sonnet-4-5", "max_tokens": 1024, "system": f"Turn {turns}."}
    return {"format": "anthropic-messages", "request": {**request, "messages": history}}


def responses_body(turns: int) -> dict[str, Any]:
    items: list[dict[str, Any]] = [{"role": "user", "content": "Read every file."}]
    for n in range(turns):
        items += [
            {"type": "function_call", "call_id": f"fc_{n}", "name": "read", "arguments": "{}"},
            {"type": "function_call_output", "call_id": f"fc_{n}", "output": f"y {n}\n" * 8000},
        ]
    return {"format": "openai-responses", "request": {"model": "gpt-5", "input": items}}


@pytest.mark.parametrize("make", [anthropic_body, responses_body])
def test_every_format_reuses_its_message_list(world: World, reuses: list[int], make: Any) -> None:
    """Anthropic's ``messages`` under a system prompt that changes every call; Responses'
    ``input``."""
    client = world.api(world.ingest_key)
    for turns in range(1, 5):
        sent = make(turns)
        response = send(client, f"fmt-{sent['format']}", json.dumps(sent).encode())
        assert response.status_code == 201, response.content
        expected = parse(sent["format"], sent["request"]).messages
        assert stored_messages(world, f"fmt-{sent['format']}") == expected
    assert reuses == [3, 5, 7]


def test_tools_the_previous_body_sent_are_not_walked_again(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A coding agent sends tens of KB of tool definitions with every call: checked once, then
    known by equality; changed tools are checked again (a NUL in them still refused)."""
    from ctxweb.api import parsers

    known: list[tuple[str, ...]] = []
    original = parsers.check_body

    def spy(data: Any, **kwargs: Any) -> None:
        known.append(tuple(sorted(kwargs.get("known", ()))))
        original(data, **kwargs)

    monkeypatch.setattr(parsers, "check_body", spy)
    tools = [
        {"type": "function", "function": {"name": f"t{k}", "parameters": {"type": "object"}}}
        for k in range(30)
    ]
    client = world.api(world.ingest_key)
    for turns in (1, 2):
        sent = body(turns)
        sent["request"]["tools"] = tools
        assert send(client, "tools", json.dumps(sent).encode()).status_code == 201
    before = Message.objects.count(), Turn.objects.count()
    changed = body(3)
    changed["request"]["tools"] = [*tools, {"type": "function", "function": {"name": "a\x00b"}}]

    refused = send(client, "tools", json.dumps(changed).encode())

    assert known == [(), ("model", "tools"), ("model",)]
    assert refused.status_code == 400
    assert "tools.30.function.name" in refused.json()["error"]["fields"]
    assert (Message.objects.count(), Turn.objects.count()) == before


def test_a_real_agent_session_posted_turn_by_turn(
    world: World, transcripts: Any, reuses: list[int]
) -> None:
    """The requests a real Claude Code session sent, as an agent posts them: every turn stored
    as a whole parse of its body gives, most of them decoded without their repeated messages."""
    from compaction.transcripts import parse_transcript

    path = max((transcripts / "claude-code").rglob("*.jsonl"), key=lambda p: p.stat().st_size)
    session = max(parse_transcript(path.read_bytes(), name=path.name), key=lambda s: len(s.turns))
    client = world.api(world.ingest_key)
    for index, turn in enumerate(session.turns[:60]):
        request = render_request(turn.context)
        sent = {
            "format": session.format,
            "request": request,
            "turn_id": f"t{index}",
            "allow_orphans": True,  # a transcript's turn may end on a call
        }
        response = send(client, "real", json.dumps(sent).encode())
        assert response.status_code in (200, 201), response.content[:300]
        assert stored_messages(world, "real") == parse(session.format, request).messages
    assert sum(1 for c in reuses if c) >= len(reuses) // 2 > 0


def stored_context(world: World, external_id: str) -> Any:
    session = selectors.session_get(project=world.project, external_id=external_id)
    assert session is not None
    turn = Turn.objects.filter(session=session).order_by("-index").first()
    assert turn is not None
    return selectors.turn_context(turn=turn)


def test_a_large_request_member_the_previous_body_sent_is_not_decoded_again(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A coding agent's tool definitions (tens of KB, the same bytes every call) are taken from
    the previous body's decoded value; tools that change, or a key written twice (the last one
    counts), are read as a decoder reads the whole body."""
    from ctxweb.api import parsers

    tools = [
        {
            "type": "function",
            "function": {
                "name": f"tool_{k}",
                "description": "Does one thing of the agent's work. " * 20,
                "parameters": {"type": "object", "properties": {"p": {"type": "integer"}}},
            },
        }
        for k in range(12)
    ]
    tools_bytes = len(json.dumps(tools))
    assert tools_bytes > 8_000
    decoded: list[int] = []
    plain = parsers._DECODER

    class Counting:
        def decode(self, raw: Any) -> Any:
            decoded.append(len(raw))
            return plain.decode(raw)

    monkeypatch.setattr(parsers, "_DECODER", Counting())
    client = world.api(world.ingest_key)

    def post(turns: int, request_tools: Any, raw_tools: bytes | None = None) -> Any:
        sent = body(turns)
        sent["request"]["tools"] = request_tools
        raw = json.dumps(sent).encode()
        if raw_tools is not None:  # the request's tools written twice: the last one counts
            raw = raw.replace(b'"tools": ', b'"tools": ' + raw_tools + b', "tools": ', 1)
        decoded.clear()
        response = send(client, "members", raw)
        assert response.status_code == 201, response.content
        assert stored_context(world, "members").tools == parse("openai-chat", sent["request"]).tools
        return response

    post(1, tools)
    assert tools_bytes in decoded  # the first body: its tools decoded from their own bytes
    post(2, tools)
    assert decoded
    assert tools_bytes not in decoded  # the same bytes: taken, not decoded
    changed = [*tools[:-1], {**tools[-1], "function": {**tools[-1]["function"], "name": "x"}}]
    post(3, changed)
    assert len(json.dumps(changed)) in decoded  # other bytes: decoded
    post(4, tools[:2], raw_tools=json.dumps(changed).encode())
    assert [t.name for t in stored_context(world, "members").tools] == ["tool_0", "tool_1"]
