"""The relay lets an event stream through whole events at a time (:class:`WholeEvents`), so that
an error event after a cut is always read as one: whatever pieces the upstream's bytes arrive
in, what has gone through is the stream up to the last blank line received, and nothing more."""

from __future__ import annotations

from itertools import pairwise

from hypothesis import given
from hypothesis import strategies as st

from ctxweb.proxy.relay import EVENT_ENDS, WholeEvents


def last_event_end(data: bytes) -> int:
    """Where the last complete event of ``data`` ends (0 when none is complete)."""
    return max(
        (data.rfind(mark) + len(mark) for mark in EVENT_ENDS if mark in data),
        default=0,
    )


events = st.lists(
    st.tuples(
        st.text(alphabet='abc{}": ', max_size=40),
        st.sampled_from(EVENT_ENDS),
    ),
    max_size=12,
).map(lambda parts: b"".join(b"data: " + text.encode() + end for text, end in parts))


@given(stream=events, tail=st.binary(max_size=30), cuts=st.lists(st.integers(0, 600)))
def test_what_goes_through_is_the_stream_up_to_its_last_whole_event(
    stream: bytes, tail: bytes, cuts: list[int]
) -> None:
    data = stream + tail.replace(b"\n", b"").replace(b"\r", b"")  # an event cut short
    points = sorted({min(cut, len(data)) for cut in cuts} | {0, len(data)})
    whole = WholeEvents()
    through = b""
    for start, end in pairwise(points):
        through += whole.feed(data[start:end])
        assert through == data[: last_event_end(data[:end])]
    assert through + bytes(whole.held) == data


def test_a_big_event_in_pieces_lets_nothing_through_until_it_ends() -> None:
    whole = WholeEvents()
    assert whole.feed(b"data: 1\n\ndata: {") == b"data: 1\n\n"
    for _ in range(5):  # pieces of the next event, none with its end
        assert whole.feed(b"g" * 1000) == b""
    assert whole.feed(b"}\r\n") == b""
    assert whole.feed(b"\r\ndata: [DONE]") == b"data: {" + b"g" * 5000 + b"}\r\n\r\n"
    assert bytes(whole.held) == b"data: [DONE]"


def test_an_event_end_split_between_two_pieces_is_found() -> None:
    whole = WholeEvents()
    assert whole.feed(b"data: 1\r\n\r") == b""
    assert whole.feed(b"\ndata: 2") == b"data: 1\r\n\r\n"
