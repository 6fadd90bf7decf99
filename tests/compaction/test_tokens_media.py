"""compaction.tokens media estimates: the tile formula, Anthropic's formula, image headers."""

from __future__ import annotations

import base64
import struct
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from compaction.messages.model import MediaPart
from compaction.tokens import (
    AUDIO_DEFAULT_TOKENS,
    FILE_DEFAULT_TOKENS,
    IMAGE_DEFAULT_TOKENS,
    anthropic_image_tokens,
    image_size,
    media_tokens,
    openai_image_tokens,
)


def png(width: int, height: int) -> bytes:
    """A real (tiny, black, greyscale) PNG of the given size."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = struct.pack(">I", zlib.crc32(kind + body))
        return struct.pack(">I", len(body)) + kind + body + crc

    rows = b"".join(b"\x00" + b"\x00" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def jpeg_header(width: int, height: int, *, exif: int = 0) -> bytes:
    """The start of a baseline JPEG: SOI, an APP1 segment of ``exif`` bytes, then SOF0."""
    app1 = b"\xff\xe1" + struct.pack(">H", exif + 2) + b"\x00" * exif
    sof0 = b"\xff\xc0" + struct.pack(">HBHHB", 11, 8, height, width, 1) + b"\x01\x11\x00"
    return b"\xff\xd8" + app1 + sof0 + b"\xff\xd9"


def gif_header(width: int, height: int) -> bytes:
    return b"GIF89a" + struct.pack("<HH", width, height) + b"\x00\x00\x00"


def riff_webp(chunk: bytes, body: bytes) -> bytes:
    """A WebP file: the RIFF header, then one chunk."""
    size = struct.pack("<I", 4 + 8 + len(body))
    return b"RIFF" + size + b"WEBP" + chunk + struct.pack("<I", len(body)) + body


def webp_vp8x(width: int, height: int) -> bytes:
    size = (width - 1).to_bytes(3, "little") + (height - 1).to_bytes(3, "little")
    return riff_webp(b"VP8X", b"\x00\x00\x00\x00" + size)


def webp_vp8l(width: int, height: int) -> bytes:
    bits = (width - 1) | ((height - 1) << 14)
    return riff_webp(b"VP8L", b"\x2f" + bits.to_bytes(4, "little") + b"\x00" * 8)


def webp_vp8(width: int, height: int) -> bytes:
    frame = b"\x00\x00\x00" + b"\x9d\x01\x2a" + struct.pack("<HH", width, height)
    return riff_webp(b"VP8 ", frame + b"\x00" * 8)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


# --- OpenAI's tile formula ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("width", "height", "tokens"),
    [
        (1024, 1024, 765),  # OpenAI's worked example: 768x768, 4 tiles
        (2048, 4096, 1105),  # OpenAI's worked example: 768x1536, 6 tiles
        (512, 512, 255),
        (100, 100, 255),
        (513, 512, 425),
        (4096, 8192, 1105),
    ],
)
def test_the_tile_formula(width: int, height: int, tokens: int) -> None:
    assert openai_image_tokens(width, height) == tokens


def test_low_detail_costs_85_whatever_the_size() -> None:
    assert openai_image_tokens(4096, 8192, detail="low") == 85
    large = MediaPart(media="image", width=4096, height=4096, extra={"detail": "low"})
    assert media_tokens(large) == 85
    nested = MediaPart(media="image", extra={"image_url": {"detail": "low"}})
    assert media_tokens(nested) == 85


@given(st.integers(min_value=1, max_value=20_000), st.integers(min_value=1, max_value=20_000))
def test_the_tile_formula_stays_within_its_bounds(width: int, height: int) -> None:
    assert 255 <= openai_image_tokens(width, height) <= 85 + 170 * 8


# --- Anthropic's formula ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("width", "height", "tokens"),
    [
        (200, 200, 54),  # Anthropic's table
        (1000, 1000, 1334),
        (1092, 1092, 1590),  # Anthropic's table
        (3136, 1000, 1046),  # long edge shrunk to 1568: 1568x500
        (4000, 2000, 1600),  # over 1.15 megapixels: capped
    ],
)
def test_anthropics_formula(width: int, height: int, tokens: int) -> None:
    assert anthropic_image_tokens(width, height) == tokens


def test_the_formula_can_be_chosen() -> None:
    part = MediaPart(media="image", width=1000, height=1000)

    assert media_tokens(part) == 765
    assert media_tokens(part, formula="anthropic") == 1334


@given(st.integers(min_value=1, max_value=20_000), st.integers(min_value=1, max_value=20_000))
def test_anthropics_formula_stays_within_its_bounds(width: int, height: int) -> None:
    assert 1 <= anthropic_image_tokens(width, height) <= 1600


# --- defaults -----------------------------------------------------------------------------------


def test_an_image_of_unknown_size_costs_the_default() -> None:
    assert media_tokens(MediaPart(media="image", url="https://example.com/cat.png")) == 1_000
    assert IMAGE_DEFAULT_TOKENS == 1_000


def test_audio_and_files_cost_their_defaults() -> None:
    assert media_tokens(MediaPart(media="audio", data="AAAA")) == AUDIO_DEFAULT_TOKENS
    assert media_tokens(MediaPart(media="file", data="JVBERi0=")) == FILE_DEFAULT_TOKENS


def test_unreadable_base64_costs_the_default() -> None:
    assert media_tokens(MediaPart(media="image", data="not base64 at all!")) == 1_000
    assert media_tokens(MediaPart(media="image", data="")) == 1_000


# --- image headers ------------------------------------------------------------------------------


def test_a_generated_png_gives_its_size() -> None:
    data = b64(png(3, 2))

    assert image_size(data) == (3, 2)


def test_the_estimate_uses_the_pngs_real_size() -> None:
    part = MediaPart(media="image", media_type="image/png", data=b64(png(600, 1)))

    assert media_tokens(part) == 425  # 2 tiles wide


def test_stated_dimensions_win_over_the_header() -> None:
    part = MediaPart(media="image", data=b64(png(600, 1)), width=100, height=100)

    assert media_tokens(part) == 255


def test_a_data_url_is_read_too() -> None:
    url = "data:image/png;base64," + b64(png(1024, 1))

    assert image_size(url) == (1024, 1)
    assert media_tokens(MediaPart(media="image", url=url)) == 85 + 170 * 2


def test_a_jpeg_gives_its_size_even_after_exif() -> None:
    assert image_size(b64(jpeg_header(640, 480))) == (640, 480)
    assert image_size(b64(jpeg_header(640, 480, exif=30_000))) == (640, 480)


def test_a_gif_gives_its_size() -> None:
    assert image_size(b64(gif_header(320, 200))) == (320, 200)


@pytest.mark.parametrize("builder", [webp_vp8x, webp_vp8l, webp_vp8])
def test_a_webp_gives_its_size(builder: object) -> None:
    assert image_size(b64(builder(300, 150))) == (300, 150)  # type: ignore[operator]


def test_base64_with_line_breaks_is_read() -> None:
    data = b64(png(7, 9))
    wrapped = "\n".join(data[i : i + 20] for i in range(0, len(data), 20))

    assert image_size(wrapped) == (7, 9)


def test_other_data_has_no_size() -> None:
    assert image_size(b64(b"%PDF-1.7 not an image")) is None
    assert image_size("") is None
    assert image_size(b64(b"\xff\xd8\xff\xe0")) is None


@given(st.integers(min_value=1, max_value=5_000), st.integers(min_value=1, max_value=5_000))
def test_header_sizes_round_trip(width: int, height: int) -> None:
    assert image_size(b64(gif_header(width, height))) == (width, height)
    assert image_size(b64(jpeg_header(width, height))) == (width, height)
    assert image_size(b64(webp_vp8x(width, height))) == (width, height)
