"""Malformed requests raise FormatError naming the bad field, and nothing else ever leaks out."""

from __future__ import annotations

from typing import Any

import pytest

from compaction.errors import FormatError
from compaction.messages import parse

CHAT = "openai-chat"
ANTHROPIC = "anthropic-messages"
RESPONSES = "openai-responses"


def user(content: Any) -> dict[str, Any]:
    return {"role": "user", "content": content}


CASES = [
    # OpenAI Chat
    (CHAT, [], "", "expected an object, got array"),
    (CHAT, {"model": "m"}, "messages", "required"),
    (CHAT, {"messages": {}}, "messages", "expected an array, got object"),
    (CHAT, {"messages": ["hi"]}, "messages.0", "expected an object, got string"),
    (CHAT, {"messages": [{"content": "x"}]}, "messages.0.role", "required"),
    (CHAT, {"messages": [{"role": 7}]}, "messages.0.role", "expected a string, got integer"),
    (
        CHAT,
        {"messages": [user("a"), user("b"), user("c"), user([{"type": "text", "text": 5}])]},
        "messages.3.content.0.text",
        "expected a string, got integer",
    ),
    (CHAT, {"messages": [user([{"text": "x"}])]}, "messages.0.content.0.type", "required"),
    (CHAT, {"messages": [user(5)]}, "messages.0.content", "expected an array, got integer"),
    (
        CHAT,
        {"messages": [user([{"type": "image_url", "image_url": {"url": None}}])]},
        "messages.0.content.0.image_url.url",
        "expected a string, got null",
    ),
    (
        CHAT,
        {
            "messages": [
                user("x"),
                {
                    "role": "assistant",
                    "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": {"a": 1}}}],
                },
            ]
        },
        "messages.1.tool_calls.0.function.arguments",
        "expected a string, got object",
    ),
    (
        CHAT,
        {"messages": [{"role": "assistant", "tool_calls": [{"id": "c"}]}]},
        "messages.0.tool_calls.0.function",
        "required",
    ),
    (CHAT, {"messages": [{"role": "tool", "content": "x"}]}, "messages.0.tool_call_id", "required"),
    (
        CHAT,
        {"messages": [{"role": "user", "name": 3}]},
        "messages.0.name",
        "expected a string, got integer",
    ),
    (CHAT, {"messages": [], "max_tokens": "10"}, "max_tokens", "expected an integer, got string"),
    (CHAT, {"messages": [], "max_tokens": True}, "max_tokens", "expected an integer, got boolean"),
    (
        CHAT,
        {"messages": [], "tools": [{"type": "function", "function": {}}]},
        "tools.0.function.name",
        "required",
    ),
    (
        CHAT,
        {"messages": [], "ctxweb:raw": 1},
        "ctxweb:raw",
        "keys starting with 'ctxweb:' are reserved",
    ),
    # Anthropic Messages
    (ANTHROPIC, "body", "", "expected an object, got string"),
    (ANTHROPIC, {"messages": [{"role": "user"}]}, "messages.0.content", "required"),
    (
        ANTHROPIC,
        {"messages": [user([{"type": "tool_use", "id": "t", "name": "n", "input": "x"}])]},
        "messages.0.content.0.input",
        "expected an object, got string",
    ),
    (
        ANTHROPIC,
        {"messages": [user("a"), user([{"type": "tool_result", "content": "x"}])]},
        "messages.1.content.0.tool_use_id",
        "required",
    ),
    (
        ANTHROPIC,
        {
            "messages": [
                user([{"type": "tool_result", "tool_use_id": "t", "content": [{"type": "text"}]}])
            ]
        },
        "messages.0.content.0.content.0.text",
        "required",
    ),
    (
        ANTHROPIC,
        {"messages": [user([{"type": "tool_result", "tool_use_id": "t", "is_error": "yes"}])]},
        "messages.0.content.0.is_error",
        "expected a boolean",
    ),
    (
        ANTHROPIC,
        {"messages": [user([{"type": "image"}])]},
        "messages.0.content.0.source",
        "required",
    ),
    (
        ANTHROPIC,
        {"messages": [user([{"type": "thinking"}])]},
        "messages.0.content.0.thinking",
        "required",
    ),
    (ANTHROPIC, {"messages": [], "system": 5}, "system", "expected an array, got integer"),
    (
        ANTHROPIC,
        {"messages": [], "system": [{"type": "image", "source": {"type": "url", "url": "u"}}]},
        "system.0.type",
        "expected a text block",
    ),
    (ANTHROPIC, {"messages": [], "tools": [{"description": "d"}]}, "tools.0.name", "required"),
    # OpenAI Responses
    (RESPONSES, None, "", "expected an object, got null"),
    (RESPONSES, {"input": 5}, "input", "expected an array, got integer"),
    (RESPONSES, {"input": [{"content": "x"}]}, "input.0.type", "required"),
    (RESPONSES, {"input": [{"type": "function_call", "name": "f"}]}, "input.0.call_id", "required"),
    (
        RESPONSES,
        {"input": [{"type": "function_call_output", "call_id": "c", "output": 3}]},
        "input.0.output",
        "expected an array, got integer",
    ),
    (
        RESPONSES,
        {"input": [{"role": "user", "content": [{"type": "input_text", "text": None}]}]},
        "input.0.content.0.text",
        "expected a string, got null",
    ),
    (
        RESPONSES,
        {"input": [{"type": "reasoning", "summary": [{"type": "summary_text"}]}]},
        "input.0.summary.0.text",
        "required",
    ),
    (RESPONSES, {"instructions": ["x"]}, "instructions", "expected a string, got array"),
    (RESPONSES, {"tools": [{"type": "function"}]}, "tools.0.name", "required"),
]


@pytest.mark.parametrize(("fmt", "request_body", "path", "reason"), CASES)
def test_a_malformed_request_names_the_bad_field(
    fmt: str, request_body: Any, path: str, reason: str
) -> None:
    with pytest.raises(FormatError) as info:
        parse(fmt, request_body)
    assert info.value.path == path
    assert info.value.reason == reason


def nested(depth: int) -> Any:
    node: Any = "leaf"
    for _ in range(depth):
        node = [node]
    return node


@pytest.mark.parametrize("fmt", [CHAT, ANTHROPIC, RESPONSES])
def test_deeply_nested_json_is_a_format_error_not_a_crash(fmt: str) -> None:
    key = "input" if fmt == RESPONSES else "messages"
    with pytest.raises(FormatError) as info:
        parse(fmt, {key: [], "metadata": {"deep": nested(100_000)}})
    assert info.value.path.startswith("metadata.deep.0.0")
    with pytest.raises(FormatError):
        parse(fmt, {key: [{"role": "user", "content": nested(50_000)}]})


def test_moderate_nesting_is_accepted_and_kept() -> None:
    body = {"messages": [], "metadata": {"deep": nested(100)}}
    assert parse(CHAT, body).extra["metadata"] == {"deep": nested(100)}


def test_nul_bytes_and_lone_surrogates_are_kept_as_is() -> None:
    from compaction.messages import message_hash, render

    body = {"messages": [{"role": "user", "content": "a\x00b\ud800"}]}
    context = parse(CHAT, body)
    assert context.messages[0].text == "a\x00b\ud800"
    assert render(context) == body
    assert len(message_hash(context.messages[0])) == 64
