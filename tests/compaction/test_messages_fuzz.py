"""Property: :func:`compaction.messages.parse` on any JSON value, in every format, returns a
:class:`Context` or raises :class:`FormatError`, never anything else (no ``KeyError``,
``TypeError``, ``AttributeError`` or ``RecursionError`` escapes to the API as a 500).

Two generators: arbitrary JSON, and JSON shaped like the formats' requests (their keys, roles and
block types, with arbitrary values in between) so the fuzzing reaches past the first check.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction.errors import FormatError
from compaction.messages import FORMATS, Context, parse, render

SETTINGS = settings(
    max_examples=100,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)

scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=25,
)

KEYS = [
    "messages",
    "input",
    "system",
    "instructions",
    "tools",
    "model",
    "max_tokens",
    "max_output_tokens",
    "max_completion_tokens",
    "role",
    "content",
    "type",
    "text",
    "name",
    "tool_calls",
    "tool_call_id",
    "tool_use_id",
    "id",
    "call_id",
    "function",
    "arguments",
    "input_schema",
    "parameters",
    "output",
    "source",
    "image_url",
    "url",
    "data",
    "media_type",
    "thinking",
    "signature",
    "summary",
    "encrypted_content",
    "is_error",
    "cache_control",
]
WORDS = [
    "user",
    "assistant",
    "system",
    "developer",
    "tool",
    "function",
    "text",
    "image",
    "document",
    "tool_use",
    "tool_result",
    "thinking",
    "redacted_thinking",
    "message",
    "function_call",
    "function_call_output",
    "reasoning",
    "input_text",
    "output_text",
    "input_image",
    "image_url",
    "base64",
    "call_1",
    "{}",
    '{"a": 1}',
    "",
    "x" * 3,
]
shaped_scalars = scalars | st.sampled_from(WORDS)
shaped_values = st.recursive(
    shaped_scalars,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.sampled_from(KEYS), children, max_size=6)
    ),
    max_leaves=40,
)
requests = st.dictionaries(st.sampled_from(KEYS), shaped_values, max_size=6)


def parse_or_format_error(format: str, value: Any) -> None:
    error: FormatError | None = None
    try:
        context = parse(format, value)
    except FormatError as caught:
        error = caught
    if error is not None:
        assert error.fields()  # it names where
        return
    assert isinstance(context, Context)
    assert context.format == format
    render(context)  # what parses renders back without error


@pytest.mark.parametrize("format", FORMATS)
@SETTINGS
@given(value=json_values)
def test_parse_of_any_json_returns_a_context_or_a_format_error(format: str, value: Any) -> None:
    parse_or_format_error(format, value)


@pytest.mark.parametrize("format", FORMATS)
@SETTINGS
@given(value=requests)
def test_parse_of_request_shaped_json_returns_a_context_or_a_format_error(
    format: str, value: Any
) -> None:
    parse_or_format_error(format, value)


@pytest.mark.parametrize("format", FORMATS)
@SETTINGS
@given(
    messages=st.lists(st.dictionaries(st.sampled_from(KEYS), shaped_values, max_size=5), max_size=5)
)
def test_parse_of_message_lists_returns_a_context_or_a_format_error(
    format: str, messages: list[Any]
) -> None:
    parse_or_format_error(format, {"messages": messages, "input": messages})


@pytest.mark.parametrize("format", FORMATS)
def test_deep_nesting_is_a_format_error_not_a_recursion_error(format: str) -> None:
    deep: Any = "leaf"
    for _ in range(5000):
        deep = [deep]
    with pytest.raises(FormatError):
        parse(format, {"messages": deep, "input": deep})


def test_an_unknown_format_is_a_format_error_naming_format() -> None:
    for name in ("cohere", "", None, 5):
        with pytest.raises(FormatError) as caught:
            parse(name, {})  # type: ignore[arg-type]
        assert caught.value.path == "format"
