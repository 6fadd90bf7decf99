"""The ingest view's fast validation (``turn_ingest_input``) against its reference, the
``TurnIngestInput`` serializer: for every body it either declines (the serializer then decides,
with its own messages) or gives exactly what the serializer validates the body to."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxweb.api.serializers import TurnIngestInput, turn_ingest_input

#: Text around the fields' rules: whitespace that would be stripped, NUL, lone surrogates.
TEXT = st.one_of(
    st.text(alphabet=st.sampled_from(" \ta\x00é\ud800"), max_size=4),
    st.text(max_size=8),
    st.sampled_from(["", "id", " id", "a\x00b", "a\ud800", "é" * 200, "x" * 200, "x" * 201]),
)
#: Values of every JSON type.
ANY = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-5, max_value=200_000_001),
    st.floats(allow_nan=False, allow_infinity=False),
    TEXT,
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
FORMAT = st.sampled_from(["openai-chat", "anthropic-messages", "openai-responses"])


def mostly(likely: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``likely`` three times in four, else any value (``one_of`` would draw each as often)."""
    return st.integers(0, 3).flatmap(lambda k: likely if k else ANY)


#: Bodies near the fast path's edge: each field most often a value agents send or one on a
#: rule's edge, else any value at all (then the fast path should decline).
BODIES = st.fixed_dictionaries(
    {
        "format": mostly(st.one_of(FORMAT, st.just("openai"))),
        "request": mostly(st.dictionaries(st.text(max_size=5), ANY, max_size=3)),
    },
    optional={
        "response": mostly(st.none()),
        "usage": mostly(st.one_of(st.none(), st.dictionaries(st.text(max_size=5), ANY))),
        "turn_id": mostly(st.one_of(st.none(), TEXT)),
        "model": mostly(TEXT),
        "context_window": mostly(
            st.one_of(
                st.none(),
                st.sampled_from([0, 1, 128_000, 100_000_000, 100_000_001]),
                st.integers(),
            )
        ),
        "allow_orphans": mostly(st.booleans()),
        "extra": ANY,
    },
)


def reference(body: dict[str, Any]) -> dict[str, Any] | None:
    serializer = TurnIngestInput(data=body)
    return dict(serializer.validated_data) if serializer.is_valid() else None


@settings(max_examples=1500, deadline=None)
@given(BODIES)
def test_the_fast_path_declines_or_agrees_with_the_serializer(body: dict[str, Any]) -> None:
    fast = turn_ingest_input(body)
    if fast is not None:
        assert fast == reference(body)


@pytest.mark.parametrize(
    "body",
    [
        {"format": "openai-chat", "request": {"messages": []}},
        {
            "format": "anthropic-messages",
            "request": {"messages": [], "system": "s"},
            "model": "claude-sonnet-4-5",
            "turn_id": "t-1",
            "usage": {"input_tokens": 3},
            "context_window": 200_000,
            "allow_orphans": True,
            "response": None,
            "unknown": 1,
        },
        {"format": "openai-responses", "request": {}, "model": "", "turn_id": None},
    ],
)
def test_the_bodies_agents_send_take_the_fast_path(body: dict[str, Any]) -> None:
    fast = turn_ingest_input(body)
    assert fast is not None
    assert fast == reference(body)
    assert fast["request"] == body["request"]
    assert fast["request"] is not body["request"]  # a copy, as the serializer's


@pytest.mark.parametrize(
    "body",
    [
        {"format": "openai", "request": {}},
        {"format": "openai-chat", "request": []},
        {"format": "openai-chat", "request": {}, "turn_id": ""},
        {"format": "openai-chat", "request": {}, "turn_id": " padded "},
        {"format": "openai-chat", "request": {}, "model": None},
        {"format": "openai-chat", "request": {}, "model": "m" * 201},
        {"format": "openai-chat", "request": {}, "context_window": True},
        {"format": "openai-chat", "request": {}, "context_window": 0},
        {"format": "openai-chat", "request": {}, "allow_orphans": 1},
        {"format": "openai-chat", "request": {}, "response": {"id": "r"}},
    ],
)
def test_what_it_cannot_vouch_for_goes_to_the_serializer(body: dict[str, Any]) -> None:
    assert turn_ingest_input(body) is None
