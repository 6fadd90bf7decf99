"""compaction.messages.rawbody: the next body of a conversation decoded without its repeated
messages gives exactly what decoding the whole body gives, or nothing."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compaction.messages.rawbody import BodySpans, MemberDecoder, decode_reusing, spans_of

PATH = ("request", "messages")
decode = msgspec.json.Decoder().decode

text = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x00"), max_size=30)
scalar = st.one_of(st.none(), st.booleans(), st.integers(-(10**20), 10**20), text)
value = st.recursive(
    scalar,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=8,
)
message = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "tool"]), "content": value}
)
#: json.dumps spellings a client may use: compact, spaced, indented, ASCII-only or not
spelling = st.sampled_from(
    [
        {},
        {"separators": (",", ":")},
        {"indent": 2},
        {"ensure_ascii": False},
        {"ensure_ascii": False, "separators": (",", ":")},
    ]
)


def body(messages: list[Any], **extra: Any) -> dict[str, Any]:
    return {
        "format": "openai-chat",
        "request": {"model": "gpt-4o", "messages": messages, "tools": [{"name": "read"}]},
        "usage": {"input_tokens": 3},
        **extra,
    }


def dumps(data: Any, how: dict[str, Any]) -> bytes:
    return json.dumps(data, **how).encode()


@settings(max_examples=300, deadline=None)
@given(
    old=st.lists(message, min_size=1, max_size=8),
    added=st.lists(message, max_size=4),
    cut=st.integers(0, 8),
    changed=st.booleans(),
    how=spelling,
)
def test_reuse_gives_what_decoding_the_whole_body_gives(
    old: list[Any], added: list[Any], cut: int, changed: bool, how: dict[str, Any]
) -> None:
    first = dumps(body(old), how)
    spans = spans_of(first, PATH)
    assert spans is not None
    assert [decode(first[b:e].strip(b" ,\n")) for b, e in _bounds(spans)] == decode(first)[
        "request"
    ]["messages"]
    kept = old[: min(cut, len(old))]
    if changed and kept:
        kept = [*kept[:-1], {"role": "user", "content": "edited"}]
    second_body = body([*kept, *added], turn_id="t2")
    second = dumps(second_body, how)

    reused = decode_reusing(second, spans, decode(first)["request"]["messages"], decode)

    expected = decode(second)
    if reused is None:
        return
    assert reused.data == expected
    assert 1 <= reused.count <= len(old)
    assert expected["request"]["messages"][: reused.count] == old[: reused.count]
    # the spans it gives serve the next body too
    third = dumps(body([*kept, *added, {"role": "user", "content": "more"}]), how)
    items = expected["request"]["messages"]
    again = decode_reusing(third, reused.spans, items, decode)
    assert again is not None
    assert again.data == decode(third)
    assert again.count == len(items)


def _bounds(spans: BodySpans) -> list[tuple[int, int]]:
    ends = [spans.start + e for e in spans.ends]
    return list(zip([spans.start, *ends[:-1]], ends, strict=True))


def test_a_grown_conversation_reuses_every_repeated_message() -> None:
    messages = [{"role": "user", "content": f"message {k} é \u2603"} for k in range(50)]
    first = json.dumps(body(messages)).encode()
    spans = spans_of(first, PATH)
    assert spans is not None
    second = json.dumps(body([*messages, {"role": "assistant", "content": "new"}])).encode()
    items = [dict(m) for m in messages]

    reused = decode_reusing(second, spans, items, decode)

    assert reused is not None
    assert reused.count == 50
    assert reused.data == decode(second)
    assert reused.data["request"]["messages"][0] is items[0]  # taken, not decoded again


def test_what_changes_around_the_array_does_not_stop_the_reuse() -> None:
    """A turn id before the request, a system prompt and tools before the messages, all new."""
    messages = [{"role": "user", "content": f"m{k}"} for k in range(5)]

    def wrapped(turn: int, added: list[Any]) -> bytes:
        request = {
            "system": f"It is 10:0{turn}.",
            "tools": [{"name": "read", "description": "Read {x}" * turn}],
            "messages": [*messages, *added],
        }
        return json.dumps({"turn_id": f"t{turn}", "request": request, "usage": {}}).encode()

    first = wrapped(1, [])
    spans = spans_of(first, PATH)
    assert spans is not None
    second = wrapped(2, [{"role": "assistant", "content": "ok"}])

    reused = decode_reusing(second, spans, messages, decode)

    assert reused is not None
    assert reused.count == 5
    assert reused.data == decode(second)


def test_a_key_spelled_with_escapes_before_the_array_stops_the_reuse() -> None:
    messages = [{"role": "user", "content": "hi"}]
    first = json.dumps(body(messages)).encode()
    spans = spans_of(first, PATH)
    assert spans is not None
    second = b'{"\\u0066ormat": 1, ' + json.dumps(body(messages))[1:].encode()

    assert decode_reusing(second, spans, messages, decode) is None


def test_the_same_body_again_reuses_it_all() -> None:
    raw = json.dumps(body([{"role": "user", "content": "hi"}])).encode()
    spans = spans_of(raw, PATH)
    assert spans is not None
    reused = decode_reusing(raw, spans, [{"role": "user", "content": "hi"}], decode)
    assert reused is not None
    assert reused.data == decode(raw)


def test_a_changed_first_message_reuses_nothing() -> None:
    first = json.dumps(body([{"role": "system", "content": "It is 10:00."}])).encode()
    second = json.dumps(body([{"role": "system", "content": "It is 10:01."}])).encode()
    spans = spans_of(first, PATH)
    assert spans is not None
    assert decode_reusing(second, spans, decode(first)["request"]["messages"], decode) is None


@pytest.mark.parametrize(
    "tail",
    [
        ', "request": {"messages": []}',  # a second request: a decoder reads the last
        ', "requ\\u0065st": {"messages": []}',  # the same key, escaped
        ', "extra": {"messages": [1]}',  # the array's key named again (conservative)
    ],
)
def test_a_body_naming_the_arrays_keys_again_after_it_reuses_nothing(tail: str) -> None:
    messages = [{"role": "user", "content": "hi"}]
    first = json.dumps(body(messages)).encode()
    spans = spans_of(first, PATH)
    assert spans is not None
    grown = json.dumps(body([*messages, {"role": "user", "content": "more"}]))
    second = (grown[:-1] + tail + "}").encode()

    assert decode_reusing(second, spans, messages, decode) is None


def test_a_body_that_does_not_decode_reuses_nothing() -> None:
    messages = [{"role": "user", "content": "hi"}]
    first = json.dumps(body(messages)).encode()
    spans = spans_of(first, PATH)
    assert spans is not None
    second = json.dumps(body([*messages, {"role": "user", "content": "x"}])).encode()
    broken = second.replace(b'"x"', b'"x')

    assert decode_reusing(broken, spans, messages, decode) is None


@pytest.mark.parametrize(
    "data",
    [
        {"request": {"messages": []}},  # empty: nothing to reuse
        {"request": {"messages": "hi"}},  # not an array
        {"request": "text"},
        {"other": 1},
        [1, 2],
    ],
)
def test_no_spans_where_there_is_no_array_to_reuse(data: Any) -> None:
    assert spans_of(json.dumps(data).encode(), PATH) is None


def test_an_array_whose_bytes_occur_twice_has_no_spans() -> None:
    messages = [{"role": "user", "content": "hi"}]
    raw = json.dumps({"copy": messages, "request": {"messages": messages}}).encode()
    assert spans_of(raw, PATH) is None


def test_a_body_whose_decoder_reads_a_later_array_has_no_spans() -> None:
    """Of two equal keys a decoder takes the last; the next body is found by its first: no
    spans, so nothing is ever reused from such a body."""
    raw = b'{"request": {"messages": [1]}, "request": {"messages": [2, 3]}}'
    assert spans_of(raw, PATH) is None


def test_members_before_the_array_that_repeat_are_stepped_over_by_comparison() -> None:
    """The previous body's tools, unchanged, are compared rather than scanned; changed ones (or a
    number that grew) are scanned, with the same result."""
    tools = [{"name": f"t{k}", "input_schema": {"type": "object"}} for k in range(50)]

    def make(n: int, tools: Any, limit: Any) -> bytes:
        request = {"max_tokens": limit, "tools": tools, "messages": [{"n": k} for k in range(n)]}
        return json.dumps({"turn_id": f"t{n}", "request": request}).encode()

    first = make(3, tools, 100)
    spans = spans_of(first, PATH)
    assert spans is not None
    assert set(spans.members[1]) == {b'"max_tokens"', b'"tools"'}
    for tools_now, limit in ((tools, 100), (tools[:-1], 100), (tools, 1000)):
        second = make(4, tools_now, limit)
        reused = decode_reusing(second, spans, decode(first)["request"]["messages"], decode)
        assert reused is not None
        assert reused.data == decode(second)
        assert reused.count == 3


# -- MemberDecoder: large members the previous body sent taken from their decoded values ----------


@settings(max_examples=300, deadline=None)
@given(
    first=st.dictionaries(text, value, max_size=4),
    second=st.dictionaries(text, value, max_size=4),
    keep=st.booleans(),
    how=spelling,
    min_bytes=st.sampled_from([0, 8, 10**6]),
)
def test_members_decode_as_the_whole_body_does(
    first: dict[str, Any], second: dict[str, Any], keep: bool, how: dict[str, Any], min_bytes: int
) -> None:
    before = MemberDecoder(decode, {}, min_bytes=min_bytes)
    raw = dumps({"format": "x", "request": first, "turn": 1}, how)
    assert before(raw) == decode(raw)
    request = {**first, **second} if keep else second
    raw = dumps({"request": request, "turn": 2}, how)
    after = MemberDecoder(decode, before.members, min_bytes=min_bytes)
    decoded = after(raw)
    assert decoded == decode(raw)
    assert list(decoded["request"]) == list(decode(raw)["request"])  # the same order


def test_a_member_sent_again_is_the_value_decoded_then_and_a_changed_one_is_not() -> None:
    tools = [{"name": f"t{k}", "description": "x" * 200} for k in range(30)]
    first = MemberDecoder(decode, {}, skip=("messages",))
    data = first(json.dumps({"request": {"tools": tools, "messages": ["a" * 9000]}}).encode())
    assert set(first.members) == {"tools"}  # the messages are skipped: they change
    again = MemberDecoder(decode, first.members, skip=("messages",))
    same = again(json.dumps({"request": {"messages": [], "tools": tools}}).encode())
    assert same["request"]["tools"] is data["request"]["tools"]
    changed = MemberDecoder(decode, first.members)
    other = [*tools[:-1], {"name": "t29", "description": "y" * 200}]
    got = changed(json.dumps({"request": {"tools": other}}).encode())
    assert got["request"]["tools"] == other
    assert got["request"]["tools"] is not data["request"]["tools"]


@pytest.mark.parametrize(
    "raw",
    [
        b'{"request": {"tools": [1], "tools": [2]}}',  # the last of two keys
        b'{"request": 3}',  # no object there: decoded whole
        b"[1, 2]",
        b'{"other": {}}',
    ],
)
def test_bodies_of_other_shapes_decode_as_the_whole_body_does(raw: bytes) -> None:
    assert MemberDecoder(decode, {}, min_bytes=0)(raw) == decode(raw)


def test_a_body_that_does_not_decode_raises_what_decoding_it_raises() -> None:
    for raw in (b'{"request": {"tools": [1,]}}', b'{"request": {"a": "\\ud800"}}', b"{"):
        with pytest.raises(msgspec.DecodeError) as expected:
            decode(raw)
        with pytest.raises(msgspec.DecodeError) as raised:
            MemberDecoder(decode, {}, min_bytes=0)(raw)
        assert str(raised.value) == str(expected.value)
