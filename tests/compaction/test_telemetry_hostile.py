"""Spans shaped as no convention says (issue 34): whatever a span's attributes and events hold,
:func:`compaction.telemetry.captured_call` gives a call whose request parses, or ``None``, or a
:class:`FormatError` naming the attribute; never another exception (each was a 500 in the OTLP
receiver). Exact cases found by the property, then the property."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction.errors import FormatError
from compaction.messages import parse
from compaction.telemetry import Span, SpanEvent, captured_call


def read(attributes: dict[str, Any], events: tuple[SpanEvent, ...] = ()) -> Any:
    """The call ``attributes`` record, its request parsed; a FormatError is an answer too."""
    try:
        call = captured_call(Span("t", "s", "chat", 1, attributes, events))
        if call is not None:
            parse(call.format, call.request)
    except FormatError as error:
        return error
    return call


@pytest.mark.parametrize(
    "attributes",
    [
        {
            "openinference.span.kind": "LLM",
            "llm.input_messages.0.message.role": "assistant",
            "llm.input_messages.0.message.tool_calls.0.tool_call.function": "[1, 2]",
        },
        {
            "openinference.span.kind": "LLM",
            "llm.input_messages.0.message.role": "user",
            "llm.input_messages.0.message.content": "hi",
            "llm.tools.0.tool": "text where an object goes",
        },
        {
            "gen_ai.prompt.0.role": "user",
            "gen_ai.prompt.0.content": "hi",
            "gen_ai.prompt.1.role": "assistant",
            "gen_ai.prompt.1.tool_calls.².id": "call_1",
        },
    ],
    ids=["openinference function as text", "openinference tool as text", "legacy index ²"],
)
def test_a_leaf_where_a_convention_nests_is_read_as_nothing_there(
    attributes: dict[str, Any],
) -> None:
    assert not isinstance(read(attributes), Exception)


def test_an_events_tool_call_function_given_as_text_is_read_as_nothing_there() -> None:
    content = json.dumps({"content": "", "tool_calls": [{"id": "c1", "function": "ls"}]})
    event = SpanEvent("gen_ai.assistant.message", {"gen_ai.event.content": content})
    user = SpanEvent("gen_ai.user.message", {"content": "hi"})
    call = read({}, (user, event))
    assert not isinstance(call, Exception)
    assert call.request["messages"][1]["tool_calls"][0]["id"] == "c1"


LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.text(max_size=5),
    st.sampled_from(["user", "assistant", "tool", "system", "text", "tool_call", "function"]),
)
NAMES = st.sampled_from(
    [
        *("role", "content", "parts", "type", "id", "name", "arguments", "function"),
        *("tool_calls", "message", "response", "tool_call_id", "text", "messages", "input"),
        *("model", "tools"),
    ]
)
JSONISH = st.recursive(
    LEAVES,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(NAMES, inner, max_size=4)),
    max_leaves=12,
)
VALUES = st.one_of(JSONISH, JSONISH.map(json.dumps))
KEYS = st.sampled_from(
    [
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.system_instructions",
        "gen_ai.tool.definitions",
        "langfuse.observation.input",
        "langfuse.observation.output",
        "langfuse.observation.model.parameters",
        "langfuse.observation.usage_details",
        "input.value",
        "llm.input_messages.0.message.role",
        "llm.input_messages.0.message.tool_calls.0.tool_call.function",
        "llm.input_messages.0.message.contents",
        "llm.tools.0.tool.json_schema",
        "llm.tools.0.tool",
        "gen_ai.prompt.0.role",
        "gen_ai.prompt.0.content",
        "gen_ai.prompt.0.tool_calls",
        "gen_ai.prompt.0.tool_calls.0.function",
        "llm.request.functions.0.name",
        "llm.request.functions.0.parameters",
        "gen_ai.usage.input_tokens",
        "gen_ai.request.max_tokens",
    ]
)
EVENTS = st.lists(
    st.tuples(
        st.sampled_from(
            [
                "gen_ai.user.message",
                "gen_ai.assistant.message",
                "gen_ai.choice",
                "gen_ai.tool.message",
            ]
        ),
        st.dictionaries(
            st.sampled_from(["gen_ai.event.content", "content", "tool_calls", "message", "id"]),
            VALUES,
            max_size=3,
        ),
    ),
    max_size=2,
)


@settings(max_examples=500, suppress_health_check=list(HealthCheck), deadline=None)
@given(
    attributes=st.dictionaries(KEYS, VALUES, max_size=5),
    marks=st.fixed_dictionaries(
        {},
        optional={
            "openinference.span.kind": st.just("LLM"),
            "input.mime_type": st.just("application/json"),
            "langfuse.observation.type": st.just("generation"),
        },
    ),
    events=EVENTS,
)
def test_any_span_is_a_call_none_or_a_format_error(
    attributes: dict[str, Any], marks: dict[str, str], events: list[tuple[str, dict[str, Any]]]
) -> None:
    read({**attributes, **marks}, tuple(SpanEvent(name, body) for name, body in events))


def test_a_langfuse_attribute_that_is_not_json_is_named_once() -> None:
    error = read({"langfuse.observation.type": "generation", "langfuse.observation.input": "[{"})
    assert isinstance(error, FormatError)
    assert error.path == "langfuse.observation.input"
