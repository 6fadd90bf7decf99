"""The hash a stored message is found by: SHA-256 of its canonical JSON (sorted keys, no spaces),
the text :func:`json.dumps` writes, byte for byte, whichever encoder writes it (rows stored
before must still be found)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction.messages import Message, TextPart, message_to_dict
from ctxweb.contexts.models import Message as MessageRow
from ctxweb.contexts.services import storage
from tests.support.world import World

pytestmark = pytest.mark.django_db

#: What a database column holds: no NUL, no lone surrogate (storage refuses both).
storable = st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",))
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False, allow_infinity=False)  # the database refuses both
    | st.text(storable)
)
values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4)
        | st.lists(children, max_size=3).map(tuple)
        | st.dictionaries(st.text(storable, max_size=6), children, max_size=4)
        | st.dictionaries(st.integers(-5, 5), children, max_size=3)
    ),
    max_leaves=20,
)


def by_json(message: Message) -> str:
    text = json.dumps(
        message_to_dict(message), ensure_ascii=False, sort_keys=True, separators=(",", ":")
    )
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def stored_hashes(world: World, messages: list[Message]) -> list[str]:
    rows = storage.message_rows(project=world.project, messages=messages, encoding="cl100k_base")
    return rows.hashes


@settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(st.lists(values, min_size=1, max_size=3))
def test_a_message_s_hash_is_that_of_the_text_json_writes(world: World, extras: list[Any]) -> None:
    messages = [
        Message("user", (TextPart(f"message {k}"),), extra={"value": extra})
        for k, extra in enumerate(extras)
    ]
    assert stored_hashes(world, messages) == [by_json(m) for m in messages]


def test_the_values_encoders_write_differently_hash_as_json_writes_them(world: World) -> None:
    extras = [
        {"floats": [1e16, 1e-7, 1.5, -0.0, 2.5e-300, 1.7976931348623157e308]},  # 1e+16
        {"big": 2**70, "negative": -(2**70)},
        {"keys": {2: "b", 10: "a"}},  # json sorts the integers, then makes them strings
        {"text": 'é 😀 \x01\x1f\x7f \u2028\u2029 \\ "'},
        {"nested": ("x", ["y", None, True, {"z": 0.1}])},
        {"many": [{"k": "v", "n": k} for k in range(300)]},  # more values than are looked at
    ]
    messages = [Message("user", (TextPart("t"),), extra=extra) for extra in extras]
    hashes = stored_hashes(world, messages)
    assert hashes == [by_json(m) for m in messages]
    assert MessageRow.objects.filter(hash__in=hashes).count() == len(extras)
