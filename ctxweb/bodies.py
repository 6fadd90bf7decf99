"""Request bodies sent compressed: ``Content-Encoding: gzip``, ``deflate`` or ``zstd`` inflated
under a cap on what they inflate to, so a small body can never grow into a decompression bomb.

Used by every way in that takes a body: the REST API and Langfuse's batch ingestion (through
:class:`ctxweb.middleware.ContentEncodingMiddleware`, before anything reads the body) and the
OTLP receiver (which answers in OTLP's own error shape).
"""

from __future__ import annotations

import io
import zlib

import zstandard

#: The encodings accepted, as ``Content-Encoding`` names them.
ENCODINGS = ("gzip", "deflate", "zstd")


class BadBody(ValueError):
    """The body is not what its ``Content-Encoding`` says (the message says why)."""


class UnsupportedEncoding(BadBody):
    """A ``Content-Encoding`` that is not one of :data:`ENCODINGS`."""


class TooLarge(ValueError):
    """The body inflates past the cap."""


def inflate(body: bytes, encoding: str, limit: int) -> bytes:
    """``body`` as sent, decompressed as ``encoding`` says, up to ``limit`` bytes.

    Raises:
        TooLarge: it inflates past ``limit`` (decompression stops there).
        UnsupportedEncoding: ``encoding`` is none of :data:`ENCODINGS`.
        BadBody: it is not valid data of its encoding.
    """
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return body
    if encoding == "zstd":
        try:
            with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(body)) as reader:
                data = reader.read(limit + 1)
        except zstandard.ZstdError as error:
            raise BadBody(f"the body is not valid zstd ({error})") from None
        if len(data) > limit:
            raise TooLarge(f"the body inflates past {limit} bytes")
        return data
    if encoding not in ENCODINGS:
        raise UnsupportedEncoding(
            f"unsupported Content-Encoding {encoding!r}; send gzip, deflate, zstd or none"
        )
    inflater = zlib.decompressobj(zlib.MAX_WBITS | (16 if encoding == "gzip" else 0))
    try:
        data = inflater.decompress(body, limit + 1)
    except zlib.error as error:
        raise BadBody(f"the body is not valid {encoding} ({error})") from None
    if len(data) > limit or inflater.unconsumed_tail:
        raise TooLarge(f"the body inflates past {limit} bytes")
    return data
