"""Model-call spans of each dialect rebuilt as requests: what the real clients' tests do not
reach (older OpenLLMetry attributes, message events, OpenInference without the raw request,
Langfuse usage, both shapes of system instructions), restated from docs/ingest-formats.md."""

from __future__ import annotations

import json

import pytest

from compaction.errors import FormatError
from compaction.messages import parse
from compaction.telemetry import Span, SpanEvent, captured_call, session_key


def span(attributes: dict, events: tuple = (), resource: dict | None = None) -> Span:
    return Span("t" * 32, "s" * 16, "llm", 1, attributes, events, resource or {})


def test_older_flattened_prompts_pair_tool_calls_with_results() -> None:
    call = captured_call(
        span(
            {
                "gen_ai.request.model": "gpt-4",
                "gen_ai.prompt.0.role": "system",
                "gen_ai.prompt.0.content": "Be brief.",
                "gen_ai.prompt.1.role": "user",
                "gen_ai.prompt.1.content": "Read a.py",
                "gen_ai.prompt.2.role": "assistant",
                "gen_ai.prompt.2.tool_calls.0.id": "c1",
                "gen_ai.prompt.2.tool_calls.0.name": "read",
                "gen_ai.prompt.2.tool_calls.0.arguments": '{"path": "a.py"}',
                "gen_ai.prompt.3.role": "tool",
                "gen_ai.prompt.3.tool_call_id": "c1",
                "gen_ai.prompt.3.content": "print(1)",
                "gen_ai.completion.0.role": "assistant",
                "gen_ai.completion.0.content": "It prints 1.",
                "gen_ai.usage.prompt_tokens": 30,
                "gen_ai.usage.completion_tokens": 4,
                "llm.request.functions.0.name": "read",
                "llm.request.functions.0.parameters": '{"type": "object"}',
            }
        )
    )
    assert call is not None
    assert call.dialect == "gen_ai.legacy"
    context = parse(call.format, call.request)
    assert [m.role for m in context.messages] == ["system", "user", "assistant", "tool"]
    assert call.request["messages"][2]["tool_calls"][0]["id"] == "c1"
    assert call.request["messages"][3]["tool_call_id"] == "c1"
    assert call.request["tools"][0]["function"]["name"] == "read"
    assert call.usage == {
        "input_tokens": 30,
        "output_tokens": 4,
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
    }
    assert call.response == [{"role": "assistant", "content": "It prints 1."}]


def test_message_events_rebuild_the_conversation() -> None:
    events = (
        SpanEvent("gen_ai.system.message", {"content": "Be brief."}),
        SpanEvent("gen_ai.user.message", {"gen_ai.event.content": json.dumps({"content": "Hi"})}),
        SpanEvent(
            "gen_ai.assistant.message",
            {
                "tool_calls": json.dumps(
                    [{"id": "c9", "function": {"name": "ls", "arguments": "{}"}}]
                )
            },
        ),
        SpanEvent("gen_ai.tool.message", {"id": "c9", "content": "a.py"}),
        SpanEvent("gen_ai.choice", {"message": json.dumps({"content": "One file."})}),
    )
    call = captured_call(span({"gen_ai.request.model": "m"}, events))
    assert call is not None
    roles = [m["role"] for m in call.request["messages"]]
    assert roles == ["system", "user", "assistant", "tool"]
    assert call.request["messages"][3]["tool_call_id"] == "c9"
    assert call.response[0]["content"] == "One file."
    parse(call.format, call.request)


def test_openinference_without_the_raw_request_reads_the_flattened_messages() -> None:
    call = captured_call(
        span(
            {
                "openinference.span.kind": "LLM",
                "llm.model_name": "gpt-4o",
                "llm.input_messages.0.message.role": "user",
                "llm.input_messages.0.message.contents.0.message_content.type": "text",
                "llm.input_messages.0.message.contents.0.message_content.text": "Hello",
                "llm.tools.0.tool.json_schema": json.dumps(
                    {"name": "ls", "parameters": {"type": "object"}}
                ),
                "llm.token_count.prompt": 12,
                "llm.token_count.completion": 2,
                "llm.token_count.prompt_details.cache_read": 8,
            }
        )
    )
    assert call is not None
    assert call.request["messages"] == [{"role": "user", "content": "Hello"}]
    assert call.request["tools"][0]["function"]["name"] == "ls"
    assert call.usage == {
        "input_tokens": 12,
        "output_tokens": 2,
        "cache_read_tokens": 8,
        "cache_write_tokens": 0,
    }


def test_an_anthropic_request_in_input_value_stays_anthropic() -> None:
    request = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 100,
        "system": "Be brief.",
        "messages": [{"role": "user", "content": "Hi"}],
    }
    call = captured_call(
        span(
            {
                "openinference.span.kind": "LLM",
                "llm.provider": "anthropic",
                "input.mime_type": "application/json",
                "input.value": json.dumps(request),
            }
        )
    )
    assert call is not None
    assert call.format == "anthropic-messages"
    assert parse(call.format, call.request).system


def test_langfuse_usage_adds_the_cache_back_into_input() -> None:
    call = captured_call(
        span(
            {
                "langfuse.observation.type": "generation",
                "langfuse.observation.model.name": "gpt-4o",
                "langfuse.observation.input": json.dumps([{"role": "user", "content": "Hi"}]),
                "langfuse.observation.output": json.dumps({"role": "assistant", "content": "Hey"}),
                "langfuse.observation.usage_details": json.dumps(
                    {"input": 100, "output": 3, "input_cached_tokens": 900}
                ),
            }
        )
    )
    assert call is not None
    assert call.usage == {
        "input_tokens": 1000,
        "output_tokens": 3,
        "cache_read_tokens": 900,
        "cache_write_tokens": 0,
    }
    assert call.response == [{"role": "assistant", "content": "Hey"}]


@pytest.mark.parametrize(
    "instructions",
    [
        [{"type": "text", "content": "Be brief."}],
        [{"role": "system", "parts": [{"type": "text", "content": "Be brief."}]}],
    ],
    ids=["parts", "messages"],
)
def test_system_instructions_of_either_shape_come_first_unless_a_system_message_exists(
    instructions: list,
) -> None:
    user = {"role": "user", "parts": [{"type": "text", "content": "Hi"}]}
    call = captured_call(
        span(
            {
                "gen_ai.input.messages": [user],
                "gen_ai.system_instructions": json.dumps(instructions),
            }
        )
    )
    assert call is not None
    assert call.request["messages"][0] == {"role": "system", "content": "Be brief."}
    system = {"role": "system", "parts": [{"type": "text", "content": "Own."}]}
    kept = captured_call(
        span({"gen_ai.input.messages": [system, user], "gen_ai.system_instructions": instructions})
    )
    assert kept is not None
    assert [m["content"] for m in kept.request["messages"]] == ["Own.", "Hi"]


def test_a_tool_result_under_result_is_read_like_response() -> None:
    messages = [
        {
            "role": "assistant",
            "parts": [{"type": "tool_call", "id": "c1", "name": "ls", "arguments": {}}],
        },
        {
            "role": "tool",
            "parts": [{"type": "tool_call_response", "id": "c1", "result": {"files": ["a"]}}],
        },
    ]
    call = captured_call(span({"gen_ai.input.messages": messages}))
    assert call is not None
    assert call.request["messages"][1] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": '{"files": ["a"]}',
    }


def test_spans_that_record_no_model_call_are_ignored_and_bad_content_is_named() -> None:
    assert captured_call(span({"gen_ai.tool.name": "ls", "http.method": "GET"})) is None
    with pytest.raises(FormatError) as raised:
        captured_call(span({"gen_ai.input.messages": "[{broken"}))
    assert raised.value.path == "gen_ai.input.messages"
    with pytest.raises(FormatError):
        captured_call(span({"gen_ai.input.messages": [{"parts": []}]}))


def test_the_session_is_the_span_attribute_then_the_resource_then_the_trace() -> None:
    assert session_key(span({"gen_ai.conversation.id": "c"}, resource={"session.id": "r"})) == "c"
    assert session_key(span({}, resource={"langfuse.session.id": "r"})) == "r"
    assert session_key(span({})) == "t" * 32
