"""Property tests: generated requests of each format round-trip exactly, and any input either
parses or raises a FormatError, never another exception."""

from __future__ import annotations

import contextlib
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction.errors import FormatError
from compaction.messages import (
    Context,
    MediaPart,
    Message,
    ReasoningPart,
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
from tests.support.requests import (
    REQUESTS,
    anthropic_request,
    chat_request,
    responses_request,
    text,
    value,
)


def check_round_trip(fmt: str, request: dict[str, Any]) -> Context:
    context = parse(fmt, request)
    assert render(context) == request
    assert context_from_dict(context_to_dict(context)) == context
    for message in context.messages:
        data = message_to_dict(message)
        assert json.loads(json.dumps(data)) == data
        assert message_from_dict(data) == message
        assert message_hash(message_from_dict(data)) == message_hash(message)
    return context


@settings(deadline=None)
@given(chat_request)
def test_generated_openai_chat_requests_round_trip(request: dict[str, Any]) -> None:
    check_round_trip("openai-chat", request)


@settings(deadline=None)
@given(anthropic_request)
def test_generated_anthropic_requests_round_trip(request: dict[str, Any]) -> None:
    check_round_trip("anthropic-messages", request)


@settings(deadline=None)
@given(responses_request)
def test_generated_openai_responses_requests_round_trip(request: dict[str, Any]) -> None:
    check_round_trip("openai-responses", request)


# -- malformed input: FormatError or an exact round trip, nothing else --------------------------


def paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(node, dict):
        for key, child in node.items():
            found += paths(child, (*prefix, key))
    elif isinstance(node, list):
        for index, child in enumerate(node):
            found += paths(child, (*prefix, index))
    return found


def replaced(node: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, *rest = path
    if isinstance(node, dict):
        return {**node, head: replaced(node[head], tuple(rest), new)}
    copy = list(node)
    copy[head] = replaced(node[head], tuple(rest), new)
    return copy


@st.composite
def mutated(draw: st.DrawFn) -> tuple[str, Any]:
    fmt = draw(st.sampled_from(sorted(REQUESTS)))
    request = draw(REQUESTS[fmt])
    where = draw(st.sampled_from(paths(request)))
    return fmt, replaced(request, where, draw(value))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_a_mutated_request_parses_exactly_or_names_a_field(case: tuple[str, Any]) -> None:
    fmt, request = case
    try:
        context = parse(fmt, request)
    except FormatError as error:
        failure = error
    else:
        assert render(context) == request
        return
    assert isinstance(failure.path, str)
    assert failure.reason


@settings(deadline=None)
@given(st.sampled_from(sorted(REQUESTS)), value)
def test_any_json_value_parses_or_raises_a_format_error(fmt: str, request: Any) -> None:
    with contextlib.suppress(FormatError):
        parse(fmt, request)


# -- contexts built from model objects render as valid requests ------------------------------------

model_text = st.builds(TextPart, text)
model_media = st.builds(
    MediaPart,
    st.sampled_from(["image", "audio", "file"]),
    media_type=st.none() | st.sampled_from(["image/png", "application/pdf", "audio/wav"]),
    data=st.none() | text,
    url=st.none() | text,
)
model_call = st.builds(
    ToolCallPart, text, text, st.sampled_from(["{}", '{"a": 1}', "", "not json"])
)
model_result = st.builds(
    ToolResultPart, text, st.lists(model_text | model_media, max_size=2).map(tuple), st.booleans()
)
model_reasoning = st.builds(ReasoningPart, text, signature=st.none() | text)
model_message = st.one_of(
    st.builds(
        Message,
        st.sampled_from(["system", "developer", "user"]),
        st.lists(model_text | model_media, min_size=1, max_size=2).map(tuple),
    ),
    st.builds(
        Message,
        st.just("assistant"),
        st.lists(model_text | model_call | model_reasoning, min_size=1, max_size=3).map(tuple),
    ),
    st.builds(Message, st.just("tool"), st.tuples(model_result)),
)
model_context = st.builds(
    Context,
    st.sampled_from(sorted(REQUESTS)),
    st.lists(model_message, max_size=5).map(tuple),
    system=st.lists(model_text, max_size=2).map(tuple),
    max_output_tokens=st.none() | st.integers(1, 10**5),
)


@settings(deadline=None)
@given(model_context)
def test_a_context_built_from_model_objects_renders_a_parseable_request(context: Context) -> None:
    request = render(context)
    json.dumps(request)
    again = parse(context.format, request)
    assert render(again) == request
    calls = [c.id for m in context.messages for c in m.tool_calls]
    assert [c.id for m in again.messages for c in m.tool_calls] == calls
    results = [r.tool_call_id for m in context.messages for r in m.tool_results]
    assert [r.tool_call_id for m in again.messages for r in m.tool_results] == results
    assert again.max_output_tokens == context.max_output_tokens
