"""Canonical JSON, the text message hashes are made of: whichever encoder writes it, it is the
text :func:`json.dumps` writes with sorted keys and no spaces, byte for byte (hashes stored
before must still be found)."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxweb.contexts.services._canonical import _canonical_json

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text()
)
values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4)
        | st.lists(children, max_size=3).map(tuple)
        | st.dictionaries(st.text(max_size=6), children, max_size=4)
        | st.dictionaries(st.integers(-5, 5), children, max_size=3)
    ),
    max_leaves=30,
)


def by_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


@settings(max_examples=500, deadline=None)
@given(values)
def test_canonical_json_is_the_text_json_writes(value: Any) -> None:
    assert _canonical_json(value) == by_json(value)


def test_the_cases_where_encoders_differ_are_written_as_json_writes_them() -> None:
    tricky = [
        {"a": [1e16, 1e-7, 1.5, -0.0, 2**70]},  # exponents: json writes 1e+16
        {"n": math.nan, "i": math.inf},  # json writes NaN and Infinity, not null
        {2: "b", 10: "a"},  # json sorts the integers, then makes them strings
        {"s": "\ud800"},  # a lone surrogate
        {"t": ("x", ["y", None, True])},
        {"é": 1, "e": 2, "😀": 3, "\x00\x1f\x7f\u2028": 4},
        [{"k": "v"}] * 600,  # more values than are looked at
    ]
    for value in tricky:
        assert _canonical_json(value) == by_json(value)
    cycle: list[Any] = []
    cycle.append(cycle)
    with pytest.raises(ValueError, match="Circular reference") as by_either:
        by_json(cycle)
    with pytest.raises(ValueError, match="Circular reference") as ours:
        _canonical_json(cycle)
    assert str(ours.value) == str(by_either.value)
