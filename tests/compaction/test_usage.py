"""Reported usage (:mod:`compaction.usage`): the one check every token count goes through
(:func:`token_count`), at its bound and past it, and :func:`normalize_usage` of each provider's
shape. A property: whatever a client sends as a count, the answer is a count within the bound or
a :class:`FormatError` naming the field, never another exception (issue 34: 5000-digit strings,
2^63 and 1e300 were 500s)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

import compaction.usage
from compaction.errors import FormatError
from compaction.telemetry import Span, captured_call, langfuse_usage
from compaction.usage import MAX_TOKENS, normalize_usage, token_count

T = TypeVar("T")


def outcome(read: Callable[[], T]) -> tuple[T | None, FormatError | None]:
    """What ``read`` returns, or the :class:`FormatError` it raises (any other exception fails)."""
    try:
        return read(), None
    except FormatError as error:
        return None, error


def test_the_public_api_is_pinned() -> None:
    assert compaction.usage.__all__ == ["MAX_TOKENS", "normalize_usage", "token_count"]
    assert MAX_TOKENS == 2**31 - 1


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, 0),
        (0, 0),
        (12, 12),
        (12.0, 12),
        (MAX_TOKENS, MAX_TOKENS),
        (float(MAX_TOKENS), MAX_TOKENS),
    ],
)
def test_it_reads_whole_numbers_within_the_bound(value: Any, expected: int) -> None:
    assert token_count(value, "usage.input_tokens") == expected


@pytest.mark.parametrize(
    "value",
    [MAX_TOKENS + 1, 2**63, -1, 1.5, 1e300, float("nan"), float("inf"), True, False, "12", [1], {}],
)
def test_it_refuses_anything_else_naming_the_field(value: Any) -> None:
    with pytest.raises(FormatError) as raised:
        token_count(value, "usage.input_tokens")
    assert raised.value.path == "usage.input_tokens"
    assert str(MAX_TOKENS) in raised.value.reason


@pytest.mark.parametrize(
    ("value", "expected"),
    [("40", 40), (" 7 ", 7), ("0" * 5000 + "3", 3), (str(MAX_TOKENS), MAX_TOKENS)],
)
def test_text_is_read_as_ascii_digits_only_when_asked(value: str, expected: int) -> None:
    assert token_count(value, "n", text=True) == expected
    with pytest.raises(FormatError):
        token_count(value, "n")


@pytest.mark.parametrize("value", ["9" * 5000, str(MAX_TOKENS + 1), "²", "-5", "1e3", "", "NaN"])
def test_text_past_the_bound_or_not_digits_is_refused(value: str) -> None:
    with pytest.raises(FormatError):
        token_count(value, "n", text=True)


def test_normalized_input_with_the_cache_is_held_to_the_bound_naming_the_field_sent() -> None:
    usage = {"input_tokens": MAX_TOKENS, "cache_read_input_tokens": 1}
    with pytest.raises(FormatError) as raised:
        normalize_usage(usage)
    assert raised.value.path == "usage.input_tokens"
    assert normalize_usage({"input_tokens": MAX_TOKENS - 1, "cache_read_input_tokens": 1}) == {
        "input_tokens": MAX_TOKENS,
        "output_tokens": 0,
        "cache_read_tokens": 1,
        "cache_write_tokens": 0,
    }


@pytest.mark.parametrize(
    ("usage", "field"),
    [
        ({"prompt_tokens": 2**31}, "usage.prompt_tokens"),
        ({"prompt_tokens": 1, "completion_tokens": True}, "usage.completion_tokens"),
        (
            {"prompt_tokens": 1, "prompt_tokens_details": {"cached_tokens": -1}},
            "usage.prompt_tokens_details.cached_tokens",
        ),
        (
            {"input_tokens": 1, "cache_creation_input_tokens": 1.5},
            "usage.cache_creation_input_tokens",
        ),
        ({"gen_ai.usage.input_tokens": 1e300}, "usage.gen_ai.usage.input_tokens"),
        (
            {"input_tokens": 1, "input_tokens_details": {"cached_tokens": 2**63}},
            "usage.input_tokens_details.cached_tokens",
        ),
    ],
)
def test_every_providers_shape_names_the_count_it_refuses(
    usage: dict[str, Any], field: str
) -> None:
    with pytest.raises(FormatError) as raised:
        normalize_usage(usage)
    assert raised.value.path == field


COUNTS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=30),
    st.text(alphabet="0123456789", min_size=1, max_size=6000),
    st.lists(st.integers(), max_size=2),
)


@given(value=COUNTS, text=st.booleans())
def test_any_value_is_a_count_within_the_bound_or_a_format_error(value: Any, text: bool) -> None:
    count, error = outcome(lambda: token_count(value, "n", text=text))
    if error is not None:
        assert error.path == "n"
    else:
        assert count is not None
        assert 0 <= count <= MAX_TOKENS


@given(
    details=st.dictionaries(
        st.sampled_from(
            [
                "input",
                "output",
                "input_cached_tokens",
                "input_cache_creation",
                "promptTokens",
                "completion_tokens",
                "total",
            ]
        ),
        COUNTS,
    )
)
def test_langfuse_usage_is_counts_or_a_format_error_naming_its_key(details: dict[str, Any]) -> None:
    usage, error = outcome(lambda: langfuse_usage(details, "usageDetails"))
    if error is not None:
        assert error.path.startswith("usageDetails.")
    elif usage is not None:
        assert all(0 <= v <= 3 * MAX_TOKENS for v in usage.values())


INDICES = st.one_of(
    st.integers(min_value=0, max_value=30).map(str),
    st.sampled_from(["²", "٣", "9" * 5000, "0" * 4500 + "1", "x", ""]),
)


@given(
    prompts=st.lists(
        st.tuples(
            INDICES,
            st.sampled_from(["role", "content", "tool_calls.0.id", "tool_calls.².id"]),
            st.sampled_from(["user", "assistant", "tool", "hi"]),
        ),
        min_size=1,
        max_size=8,
    ),
    usage=COUNTS,
)
def test_a_legacy_span_with_any_indices_and_counts_is_a_call_or_a_format_error(
    prompts: list[tuple[str, str, str]], usage: Any
) -> None:
    attributes: dict[str, Any] = {
        "gen_ai.prompt.0.role": "user",
        "gen_ai.usage.input_tokens": usage,
    }
    attributes.update({f"gen_ai.prompt.{i}.{key}": value for i, key, value in prompts})
    call, error = outcome(lambda: captured_call(Span("t", "s", "chat", 1, attributes)))
    if error is None:
        assert call is not None
        assert call.usage is not None
        assert 0 <= call.usage["input_tokens"] <= MAX_TOKENS
