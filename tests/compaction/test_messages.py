"""The message model's public API, exact round trips on real traffic, canonical form and hashes."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

import compaction.messages as messages
from compaction.errors import FormatError
from compaction.messages import (
    FORMATS,
    Context,
    Message,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    context_from_dict,
    context_to_dict,
    message_from_dict,
    message_hash,
    message_to_dict,
    parse,
    render,
)


def anthropic_bodies(transcripts: Path) -> list[dict[str, Any]]:
    path = transcripts / "anthropic-messages" / "claude-trace-traffic.jsonl"
    with path.open(encoding="utf-8") as lines:
        return [json.loads(line)["request"]["body"] for line in lines if line.strip()]


def tau_bench_bodies(transcripts: Path) -> list[dict[str, Any]]:
    import ast

    path = transcripts / "openai-chat" / "tau-bench-gpt-4o-airline.json"
    items = json.loads(path.read_text(encoding="utf-8"))
    bodies = []
    for item in items:
        traj = item["traj"]
        if isinstance(traj, str):
            traj = ast.literal_eval(traj)
        bodies.append({"model": "gpt-4o", "messages": traj})
    return bodies


def test_the_public_api_is_pinned() -> None:
    assert sorted(messages.__all__) == sorted(
        [
            "FORMATS",
            "IDENTITY_IGNORED",
            "ROLES",
            "Context",
            "Format",
            "MediaPart",
            "Message",
            "Part",
            "ReasoningPart",
            "Role",
            "TextPart",
            "ToolCallPart",
            "ToolDefinition",
            "ToolResultPart",
            "context_from_dict",
            "context_to_dict",
            "message_from_dict",
            "message_hash",
            "message_identity",
            "message_to_dict",
            "messages_key",
            "parse",
            "render",
            "without_cache_markers",
        ]
    )
    for name in messages.__all__:
        assert hasattr(messages, name)
    assert FORMATS == ("openai-chat", "anthropic-messages", "openai-responses")


def test_the_library_imports_no_django() -> None:
    import subprocess
    import sys

    code = "import sys, compaction.messages; sys.exit('django' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


# -- real traffic -------------------------------------------------------------------------------


def test_every_claude_trace_request_round_trips_exactly(transcripts: Path) -> None:
    bodies = anthropic_bodies(transcripts)
    assert len(bodies) == 64
    for index, body in enumerate(bodies):
        context = parse("anthropic-messages", body)
        assert render(context) == body, f"request {index}"
        assert context_from_dict(context_to_dict(context)) == context


def test_claude_trace_requests_parse_into_the_model(transcripts: Path) -> None:
    bodies = anthropic_bodies(transcripts)
    contexts = [parse("anthropic-messages", body) for body in bodies]
    calls = [c for ctx in contexts for m in ctx.messages for c in m.tool_calls]
    results = [r for ctx in contexts for m in ctx.messages for r in m.tool_results]
    assert len(calls) == len(results) == 85
    assert all(json.loads(c.arguments) is not None for c in calls)
    assert sum(len(ctx.tools) for ctx in contexts) == 273
    assert all(ctx.max_output_tokens for ctx in contexts)
    with_system = [ctx for ctx in contexts if ctx.system]
    assert len(with_system) == 46
    assert all("cache_control" in p.extra for ctx in with_system for p in ctx.system)
    assert all("model" in ctx.extra for ctx in contexts)


def test_every_tau_bench_conversation_round_trips_exactly(transcripts: Path) -> None:
    bodies = tau_bench_bodies(transcripts)
    assert len(bodies) == 200
    for index, body in enumerate(bodies):
        context = parse("openai-chat", body)
        assert render(context) == body, f"conversation {index}"
        assert context_from_dict(context_to_dict(context)) == context


def test_tau_bench_tool_messages_become_tool_results(transcripts: Path) -> None:
    context = parse("openai-chat", tau_bench_bodies(transcripts)[0])
    assert context.messages[0].role == "system"
    tool_messages = [m for m in context.messages if m.role == "tool"]
    assert tool_messages
    for message in tool_messages:
        (result,) = message.tool_results
        assert result.tool_call_id.startswith("call_")
        assert message.name
    calls = [c for m in context.messages for c in m.tool_calls]
    assert {c.id for c in calls} >= {m.tool_results[0].tool_call_id for m in tool_messages}


def test_a_strategy_placeholder_renders_a_valid_request(transcripts: Path) -> None:
    placeholder = TextPart("[EXTERNALIZED:abc123]")
    for fmt, body in [
        ("anthropic-messages", anthropic_bodies(transcripts)[-1]),
        ("openai-chat", tau_bench_bodies(transcripts)[0]),
    ]:
        context = parse(fmt, body)
        pruned = dataclasses.replace(
            context,
            messages=tuple(
                dataclasses.replace(
                    m,
                    parts=tuple(
                        dataclasses.replace(p, content=(placeholder,))
                        if isinstance(p, ToolResultPart)
                        else p
                        for p in m.parts
                    ),
                )
                for m in context.messages
            ),
        )
        again = parse(fmt, render(pruned))
        results = [r for m in again.messages for r in m.tool_results]
        assert results
        assert all(r.text == "[EXTERNALIZED:abc123]" for r in results)
        assert len(again.messages) == len(context.messages)


def test_dropping_messages_renders_a_valid_request(transcripts: Path) -> None:
    body = tau_bench_bodies(transcripts)[0]
    context = parse("openai-chat", body)
    kept = dataclasses.replace(context, messages=context.messages[:1] + context.messages[-2:])
    assert render(kept) == {
        "model": "gpt-4o",
        "messages": body["messages"][:1] + body["messages"][-2:],
    }


# -- small exact cases ---------------------------------------------------------------------------


def test_openai_chat_fields_map_onto_the_model() -> None:
    body = {
        "model": "gpt-4o",
        "max_tokens": 300,
        "temperature": 0.2,
        "tools": [
            {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
        ],
        "messages": [
            {"role": "developer", "content": "rules"},
            {
                "role": "user",
                "name": "ann",
                "content": [
                    {"type": "text", "text": "look"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                    {"type": "input_audio", "input_audio": {"data": "UklG", "format": "wav"}},
                    {"type": "file", "file": {"file_id": "file-1"}},
                ],
            },
            {
                "role": "assistant",
                "content": None,
                "reasoning_content": "thinking",
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "42"},
        ],
    }
    context = parse("openai-chat", body)
    assert context.max_output_tokens == 300
    assert context.extra["temperature"] == 0.2
    assert context.tools[0].name == "f"
    assert context.tools[0].parameters == {"type": "object"}
    developer, user, assistant, tool = context.messages
    assert developer.role == "developer"
    assert user.name == "ann"
    assert [p.kind for p in user.parts] == ["text", "media", "media", "media"]
    image = user.parts[1]
    assert image.media == "image"
    assert image.media_type == "image/png"
    assert image.data == "AAAA"
    assert [p.kind for p in assistant.parts] == ["reasoning", "tool_call"]
    assert tool.tool_results[0].text == "42"
    assert render(context) == body


def test_anthropic_blocks_map_onto_the_model() -> None:
    body = {
        "model": "claude",
        "max_tokens": 1024,
        "system": [{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "image", "source": {"type": "url", "url": "https://x/a.png"}},
                    {
                        "type": "document",
                        "source": {
                            "type": "base64",
                            "media_type": "application/pdf",
                            "data": "JVBE",
                        },
                        "title": "doc",
                    },
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                    {"type": "redacted_thinking", "data": "opaque"},
                    {"type": "tool_use", "id": "t1", "name": "run", "input": {"cmd": "ls"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "content": [{"type": "text", "text": "a.txt"}],
                        "is_error": False,
                    }
                ],
            },
        ],
    }
    context = parse("anthropic-messages", body)
    assert context.system[0].extra == {"cache_control": {"type": "ephemeral"}}
    image, document = context.messages[0].parts
    assert image.url == "https://x/a.png"
    assert document.media == "file"
    assert document.data == "JVBE"
    assert document.extra["title"] == "doc"
    thinking, redacted, call = context.messages[1].parts
    assert thinking.signature == "sig"
    assert redacted.redacted
    assert redacted.data == "opaque"
    assert json.loads(call.arguments) == {"cmd": "ls"}
    (result,) = context.messages[2].tool_results
    assert result.text == "a.txt"
    assert not result.is_error
    assert render(context) == body


def test_openai_responses_items_become_messages() -> None:
    body = {
        "model": "gpt-5",
        "instructions": "be brief",
        "max_output_tokens": 500,
        "input": [
            {"role": "user", "content": "hi"},
            {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "enc"},
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "c1",
                "name": "f",
                "arguments": "{}",
            },
            {"type": "function_call_output", "call_id": "c1", "output": "ok"},
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "done", "annotations": []}],
            },
            {"type": "web_search_call", "id": "ws_1", "status": "completed"},
        ],
    }
    context = parse("openai-responses", body)
    assert context.system[0].text == "be brief"
    assert context.max_output_tokens == 500
    roles = [m.role for m in context.messages]
    assert roles == ["user", "assistant", "assistant", "tool", "assistant", "assistant"]
    assert context.messages[1].parts[0].data == "enc"
    assert context.messages[2].tool_calls[0].id == "c1"
    assert context.messages[3].tool_results[0].text == "ok"
    assert context.messages[4].text == "done"
    assert render(context) == body


def test_a_context_built_from_model_objects_renders_in_every_format() -> None:
    context = Context(
        format="openai-chat",
        system=(TextPart("You help."),),
        max_output_tokens=100,
        messages=(
            Message("user", (TextPart("list files"),)),
            Message("assistant", (TextPart("sure"), ToolCallPart("c1", "ls", '{"dir": "."}'))),
            Message("tool", (ToolResultPart("c1", (TextPart("a.txt"),)),)),
            Message("assistant", (TextPart("one file"),)),
        ),
    )
    for fmt in FORMATS:
        body = render(dataclasses.replace(context, format=fmt))
        again = parse(fmt, body)
        calls = [c for m in again.messages for c in m.tool_calls]
        results = [r for m in again.messages for r in m.tool_results]
        assert [(c.id, c.name, json.loads(c.arguments)) for c in calls] == [
            ("c1", "ls", {"dir": "."})
        ]
        assert [(r.tool_call_id, r.text) for r in results] == [("c1", "a.txt")]
        assert again.max_output_tokens == 100
        texts = [m.text for m in again.messages if m.text]
        assert "list files" in texts
        assert "one file" in texts


# -- canonical form and hashes --------------------------------------------------------------------


def test_the_same_message_always_hashes_the_same() -> None:
    one = Message("user", (TextPart("hi", extra={"b": 1, "a": [1, 2]}),), extra={"z": None})
    two = Message("user", (TextPart("hi", extra={"a": [1, 2], "b": 1}),), extra={"z": None})
    assert message_hash(one) == message_hash(two)
    assert len(message_hash(one)) == 64
    assert message_hash(one) != message_hash(Message("user", (TextPart("hi!"),)))
    assert message_hash(one) != message_hash(dataclasses.replace(one, role="assistant"))


def test_a_pinned_message_hash_never_changes() -> None:
    message = Message("user", (TextPart("hi"),))
    assert message_to_dict(message) == {"role": "user", "parts": [{"kind": "text", "text": "hi"}]}
    # sha256 of '{"parts":[{"kind":"text","text":"hi"}],"role":"user"}': stored hashes rely on it.
    assert message_hash(message) == (
        "f8fbf548d4f2283b99083c1ee463cc798308d2b59f3e981a2e0ec702b6c11ad2"
    )


def test_the_canonical_dict_round_trips_every_part_kind() -> None:
    body = {
        "model": "claude",
        "messages": [
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "t", "signature": "s"},
                    {"type": "tool_use", "id": "1", "name": "n", "input": {"x": [1, 2.5, None]}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "1", "content": "r", "is_error": True},
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": "AA"},
                    },
                ],
            },
        ],
    }
    context = parse("anthropic-messages", body)
    for message in context.messages:
        data = message_to_dict(message)
        assert json.loads(json.dumps(data)) == data
        assert message_from_dict(data) == message
    assert context_from_dict(context_to_dict(context)) == context


def test_extra_is_copied_as_a_json_round_trip_copies_it() -> None:
    """``message_to_dict`` copies ``extra`` into plain JSON values as ``json.dumps`` then
    ``json.loads`` would (sets sorted, mappings as dicts), whichever way it makes the copy."""
    extra = {
        "plain": {"n": [1, 2.5, None, True, "é"], "big": 2**70, "negative zero": -0.0},
        "tuple": (1, (2, 3)),
        "set": {3, 1, 2},
        "int keys": {1: "a", 2.5: "b"},
        "view": MappingProxyType({"k": "v"}),
    }
    data = message_to_dict(Message("user", (TextPart("hi"),), extra=extra))["extra"]
    assert data == {
        "plain": {"n": [1, 2.5, None, True, "é"], "big": 2**70, "negative zero": -0.0},
        "tuple": [1, [2, 3]],
        "set": [1, 2, 3],
        "int keys": {"1": "a", "2.5": "b"},
        "view": {"k": "v"},
    }
    assert math.copysign(1, data["plain"]["negative zero"]) == -1
    assert type(data["plain"]["big"]) is int
    assert type(data["plain"]["n"][1]) is float
    # A NaN or an infinity stays one (msgspec alone would write null).
    odd = message_to_dict(Message("user", (TextPart("hi"),), extra={"x": [math.nan, math.inf]}))
    assert math.isnan(odd["extra"]["x"][0])
    assert odd["extra"]["x"][1] == math.inf
    # And the copy is a copy.
    nested = {"a": {"b": [1]}}
    copied = message_to_dict(Message("user", (TextPart("hi"),), extra=nested))["extra"]
    assert copied == nested
    assert copied["a"] is not nested["a"]


@pytest.mark.parametrize(
    ("data", "path"),
    [
        ([], "message"),
        ({"role": "robot", "parts": []}, "message.role"),
        ({"role": "user", "parts": {}}, "message.parts"),
        ({"role": "user", "parts": [{"kind": "nope"}]}, "message.parts.0.kind"),
        ({"role": "user", "parts": [{"kind": "text"}]}, "message.parts.0"),
    ],
)
def test_a_bad_canonical_dict_is_a_format_error(data: object, path: str) -> None:
    with pytest.raises(FormatError) as info:
        message_from_dict(data)
    assert info.value.path == path


def test_an_unknown_format_is_a_format_error() -> None:
    with pytest.raises(FormatError) as info:
        parse("gemini", {"contents": []})
    assert info.value.path == "format"
    context = Context(format="gemini", messages=())  # type: ignore[arg-type]
    with pytest.raises(FormatError) as info:
        render(context)
    assert info.value.path == "format"
