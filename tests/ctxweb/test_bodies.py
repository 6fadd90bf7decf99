"""Compressed bodies (:func:`ctxweb.bodies.inflate`): whole or an error. A body cut short never
reads as a shorter body (a gzip cut mid-stream used to give what it had inflated so far, a zstd
cut short gave nothing at all), every gzip member and every zstd frame is read, and nothing
inflates past the cap."""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Callable

import pytest
import zstandard

from ctxweb.bodies import _PIECE, BadBody, TooLarge, UnsupportedEncoding, inflate, inflated
from tests.support.world import World

LIMIT = 10 * 1024 * 1024
#: JSON lines: a prefix of them is still valid JSON lines, the case a cut-short body would hide.
DATA = b"".join(json.dumps({"line": n, "text": "x" * 200}).encode() + b"\n" for n in range(2000))
ENCODERS: dict[str, Callable[[bytes], bytes]] = {
    "gzip": gzip.compress,
    "deflate": zlib.compress,
    "zstd": lambda data: zstandard.ZstdCompressor().compress(data),
}


@pytest.mark.parametrize("encoding", sorted(ENCODERS))
def test_it_inflates_a_whole_body(encoding: str) -> None:
    assert inflate(ENCODERS[encoding](DATA), encoding, LIMIT) == DATA


@pytest.mark.parametrize("encoding", sorted(ENCODERS))
@pytest.mark.parametrize("kept", [0.25, 0.5, 0.9, 0.999])
def test_it_refuses_a_body_cut_short(encoding: str, kept: float) -> None:
    whole = ENCODERS[encoding](DATA)
    with pytest.raises(BadBody, match=r"cut short|not valid"):
        inflate(whole[: int(len(whole) * kept)], encoding, LIMIT)


@pytest.mark.parametrize("encoding", ["gzip", "zstd"])
def test_it_reads_every_gzip_member_and_every_zstd_frame(encoding: str) -> None:
    encode = ENCODERS[encoding]
    assert inflate(encode(DATA) + encode(b"the end\n"), encoding, LIMIT) == DATA + b"the end\n"


@pytest.mark.parametrize("encoding", sorted(ENCODERS))
def test_it_refuses_what_follows_a_whole_body_when_it_is_not_another_member(
    encoding: str,
) -> None:
    with pytest.raises(BadBody):
        inflate(ENCODERS[encoding](DATA) + b"not compressed", encoding, LIMIT)


@pytest.mark.parametrize("encoding", sorted(ENCODERS))
def test_it_stops_at_the_cap(encoding: str) -> None:
    bomb = ENCODERS[encoding](b"\0" * (4 * LIMIT))
    with pytest.raises(TooLarge):
        inflate(bomb, encoding, LIMIT)
    assert inflate(ENCODERS[encoding](DATA), encoding, len(DATA)) == DATA
    with pytest.raises(TooLarge):
        inflate(ENCODERS[encoding](DATA), encoding, len(DATA) - 1)


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
@pytest.mark.parametrize("size", [_PIECE - 1, _PIECE, _PIECE + 1, 3 * _PIECE, 3 * _PIECE + 7])
def test_it_inflates_whole_around_its_pieces(encoding: str, size: int) -> None:
    # inflated a piece at a time into one buffer: whole at a piece's size, just under and past it
    data = b"\0" * (size - 1) + b"!"
    assert inflate(ENCODERS[encoding](data), encoding, LIMIT) == data
    if encoding == "gzip":  # a second member after the first's last piece
        assert inflate(ENCODERS[encoding](data) * 2, encoding, LIMIT) == data * 2
    with pytest.raises(TooLarge):
        inflate(ENCODERS[encoding](data), encoding, size - 1)


@pytest.mark.parametrize("encoding", sorted(ENCODERS))
def test_inflated_is_the_buffer_it_inflated_into_and_the_body_itself_when_plain(
    encoding: str,
) -> None:
    buffer = inflated(ENCODERS[encoding](DATA), encoding, LIMIT)
    assert isinstance(buffer, bytearray)
    assert buffer == DATA
    assert inflated(DATA, "identity", LIMIT) is DATA
    assert inflated(DATA, "", LIMIT) is DATA


@pytest.mark.parametrize("encoding", ["", "identity", "gzip", "zstd"])
def test_an_empty_body_is_empty(encoding: str) -> None:
    assert inflate(b"", encoding, LIMIT) == b""


def test_another_encoding_is_named() -> None:
    with pytest.raises(UnsupportedEncoding, match="'br'"):
        inflate(b"\x1b\x00", "br", LIMIT)


@pytest.mark.django_db
@pytest.mark.parametrize("encoding", sorted(ENCODERS))
def test_a_turn_cut_short_in_transit_is_a_400_and_nothing_is_stored(
    world: World, encoding: str
) -> None:
    payload = {
        "format": "openai-chat",
        "request": {
            "model": "gpt-4o",
            "messages": [{"role": "user", "content": "Why? " + "See the log. " * 500}],
        },
    }
    whole = ENCODERS[encoding](json.dumps(payload).encode())
    answer = world.api(world.ingest_key).post(
        "/api/v1/sessions/cut/turns",
        data=whole[: len(whole) - 8],
        content_type="application/json",
        HTTP_CONTENT_ENCODING=encoding,
    )
    assert answer.status_code == 400, answer.content
    assert "cut short" in answer.content.decode() or "not valid" in answer.content.decode()
    assert world.api(world.ingest_key).get("/api/v1/sessions/cut").status_code == 404
