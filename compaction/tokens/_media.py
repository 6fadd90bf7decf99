"""Per-item token estimates for images, audio and files; base64 data is never tokenized as text.

An image whose width and height are known (stated by the format, or read from the first bytes of
its base64 PNG, JPEG, GIF or WebP data) is estimated with OpenAI's tile formula, the default; an
image of unknown size counts :data:`IMAGE_DEFAULT_TOKENS`. Anthropic's formula is available as
:func:`anthropic_image_tokens` (``media_tokens(part, formula="anthropic")``).

- OpenAI (``detail`` high or auto): fit in 2048x2048, then shrink so the shortest side is at most
  768; each 512x512 tile costs 170 tokens, plus 85. ``detail: "low"`` costs 85 whatever the size.
- Anthropic: shrink so the long edge is at most 1568, then ``ceil(width*height/750)``, at most
  1,600 (Anthropic shrinks images above about 1.15 megapixels).
- Audio counts :data:`AUDIO_DEFAULT_TOKENS` and files (PDFs and the like)
  :data:`FILE_DEFAULT_TOKENS`: flat placeholders, since their cost depends on duration or page
  count that the request does not state. Reported usage corrects them.
"""

from __future__ import annotations

import base64
import binascii
import math
import struct
from collections.abc import Mapping
from typing import Any, Literal

from compaction.messages.model import MediaPart

__all__ = [
    "AUDIO_DEFAULT_TOKENS",
    "FILE_DEFAULT_TOKENS",
    "IMAGE_DEFAULT_TOKENS",
    "ImageFormula",
    "anthropic_image_tokens",
    "image_size",
    "media_tokens",
    "openai_image_tokens",
]

#: An image whose size is unknown: about a 1000x1000 image under either vendor's formula.
IMAGE_DEFAULT_TOKENS = 1_000
#: A file (PDF, document) of unknown length: about one page rendered as text plus image.
FILE_DEFAULT_TOKENS = 2_000
#: An audio clip of unknown duration.
AUDIO_DEFAULT_TOKENS = 1_000

_ANTHROPIC_MAX_TOKENS = 1_600

ImageFormula = Literal["openai", "anthropic"]

# Enough base64 for every header we read but JPEG's, whose size marker can follow EXIF data.
_HEAD_CHARS = 64
_JPEG_SCAN_CHARS = 256 * 1024


def openai_image_tokens(width: int, height: int, *, detail: str = "high") -> int:
    """OpenAI's image cost (GPT-4o family): 170 tokens per 512px tile plus 85.

    Example:
        >>> openai_image_tokens(1024, 1024)
        765
    """
    if detail == "low":
        return 85
    if width <= 0 or height <= 0:
        return 85
    w, h = float(width), float(height)
    if w > 2048 or h > 2048:
        scale = 2048 / max(w, h)
        w, h = w * scale, h * scale
    if min(w, h) > 768:
        scale = 768 / min(w, h)
        w, h = w * scale, h * scale
    tiles = math.ceil(w / 512) * math.ceil(h / 512)
    return 170 * tiles + 85


def anthropic_image_tokens(width: int, height: int) -> int:
    """Anthropic's image cost: ``ceil(width*height/750)`` after shrinking the long edge to 1568.

    Anthropic documents a further shrink of images above ~1.15 megapixels, so the result is capped
    at 1,600 tokens.

    Example:
        >>> anthropic_image_tokens(1000, 1000)
        1334
    """
    if width <= 0 or height <= 0:
        return 0
    w, h = float(width), float(height)
    if max(w, h) > 1568:
        scale = 1568 / max(w, h)
        w, h = w * scale, h * scale
    # Anthropic also shrinks any image above about 1.15 megapixels (~1,600 tokens).
    return min(math.ceil(w * h / 750), _ANTHROPIC_MAX_TOKENS)


def _decode_prefix(data: str, chars: int) -> bytes:
    head = "".join(data[: chars + chars // 64 + 8].split())[:chars]
    head = head[: len(head) // 4 * 4]
    try:
        return base64.b64decode(head)
    except (binascii.Error, ValueError):
        return b""


def _png_size(head: bytes) -> tuple[int, int] | None:
    if head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR" and len(head) >= 24:
        width, height = struct.unpack(">II", head[16:24])
        return int(width), int(height)
    return None


def _gif_size(head: bytes) -> tuple[int, int] | None:
    if head[:6] in (b"GIF87a", b"GIF89a") and len(head) >= 10:
        width, height = struct.unpack("<HH", head[6:10])
        return int(width), int(height)
    return None


def _webp_size(head: bytes) -> tuple[int, int] | None:
    if head[:4] != b"RIFF" or head[8:12] != b"WEBP" or len(head) < 30:
        return None
    chunk = head[12:16]
    if chunk == b"VP8 " and head[23:26] == b"\x9d\x01\x2a":
        width, height = struct.unpack("<HH", head[26:30])
        return int(width) & 0x3FFF, int(height) & 0x3FFF
    if chunk == b"VP8L" and head[20] == 0x2F:
        bits = int.from_bytes(head[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X":
        width = int.from_bytes(head[24:27], "little") + 1
        height = int.from_bytes(head[27:30], "little") + 1
        return width, height
    return None


_JPEG_SOF = frozenset(
    {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}
)


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    if data[:2] != b"\xff\xd8":
        return None
    i = 2
    while i + 4 <= len(data):
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker in (0x01, 0xD8) or 0xD0 <= marker <= 0xD7:  # markers without a length
            i += 2
            continue
        (length,) = struct.unpack(">H", data[i + 2 : i + 4])
        if marker in _JPEG_SOF:
            if i + 9 > len(data):
                return None
            height, width = struct.unpack(">HH", data[i + 5 : i + 9])
            return int(width), int(height)
        i += 2 + int(length)
    return None


def image_size(data: str) -> tuple[int, int] | None:
    """Width and height read from the header of base64 PNG, JPEG, GIF or WebP data, else None.

    Only the first bytes are decoded (up to 192 KiB for a JPEG whose size follows EXIF data); a
    ``data:`` URL is accepted as well as bare base64.

    Example:
        >>> image_size("R0lGODlhAQACAAAAAAAA")  # a 1x2 GIF header
        (1, 2)
    """
    if data.startswith("data:"):
        data = data.partition(",")[2]
    head = _decode_prefix(data, _HEAD_CHARS)
    size = _png_size(head) or _gif_size(head) or _webp_size(head)
    if size is None and head[:2] == b"\xff\xd8":
        size = _jpeg_size(_decode_prefix(data, _JPEG_SCAN_CHARS))
    if size is None or size[0] <= 0 or size[1] <= 0:
        return None
    return size


def _detail(extra: Mapping[str, Any]) -> str:
    detail = extra.get("detail")
    if detail is None and isinstance(extra.get("image_url"), Mapping):
        detail = extra["image_url"].get("detail")
    return detail if isinstance(detail, str) else "auto"


def _known_size(part: MediaPart) -> tuple[int, int] | None:
    if part.width and part.height:
        return part.width, part.height
    if part.data:
        return image_size(part.data)
    if part.url and part.url.startswith("data:"):
        return image_size(part.url)
    return None


def media_tokens(part: MediaPart, *, formula: ImageFormula = "openai") -> int:
    """The estimated tokens of one image, audio clip or file.

    Args:
        part: the media part; its base64 ``data`` is only read for an image's header.
        formula: ``"openai"`` (the tile formula, honouring ``extra["detail"]``) or ``"anthropic"``.

    Returns:
        The estimate described in this module's docstring.

    Example:
        >>> media_tokens(MediaPart(media="image", width=512, height=512))
        255
    """
    if part.media == "audio":
        return AUDIO_DEFAULT_TOKENS
    if part.media == "file":
        return FILE_DEFAULT_TOKENS
    detail = _detail(part.extra)
    if formula == "openai" and detail == "low":
        return 85
    size = _known_size(part)
    if size is None:
        return IMAGE_DEFAULT_TOKENS
    if formula == "anthropic":
        return anthropic_image_tokens(*size)
    return openai_image_tokens(*size, detail=detail)
