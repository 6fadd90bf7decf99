"""The canonical JSON a posted body is hashed with (``_canonical_bytes``, msgspec's) against the
canonical JSON :mod:`json` writes, which every stored hash used before: the same bytes for
every JSON value, but for floats written with an exponent."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxweb.contexts.services._canonical import _canonical_bytes, _canonical_json

#: Floats json and msgspec write alike: no exponent in their shortest form.
PLAIN_FLOATS = st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: "e" not in repr(f))
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**64), max_value=2**64)
    | PLAIN_FLOATS
    | st.text(alphabet=st.characters(exclude_categories=("Cs",))),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=25,
)


@settings(max_examples=400, deadline=None)
@given(JSON)
def test_the_same_bytes_as_json_writes(value: Any) -> None:
    assert _canonical_bytes(value) == _canonical_json(value).encode("utf-8")


def test_floats_with_an_exponent_are_written_otherwise_and_alike_each_time() -> None:
    value = {"b": 1e16, "a": [1e-07, 1.5e300]}
    assert _canonical_bytes(value) == b'{"a":[1e-7,1.5e300],"b":1e16}'
    assert json.loads(_canonical_bytes(value)) == value


def test_what_msgspec_cannot_encode_is_written_by_json() -> None:
    value = {"text": "a\ud800b"}  # a lone surrogate
    assert _canonical_bytes(value) == _canonical_json(value).encode("utf-8", "surrogatepass")
