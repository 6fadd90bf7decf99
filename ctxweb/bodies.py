"""Request bodies sent compressed: ``Content-Encoding: gzip``, ``deflate`` or ``zstd`` inflated
under a cap on what they inflate to, so a small body can never grow into a decompression bomb.

Used by every way in that takes a body: the REST API and Langfuse's batch ingestion (through
:class:`ctxweb.middleware.ContentEncodingMiddleware`, before anything reads the body) and the
OTLP receiver (which answers in OTLP's own error shape).
"""

from __future__ import annotations

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


#: Compressed bytes fed to the zstd decompressor at a time: a zstd block inflates at most about
#: 32,768 times (an RLE block: 4 bytes for 128 KiB), so no piece inflates far past the cap before
#: it is checked.
_ZSTD_PIECE = 256


def _zstd(body: bytes, limit: int) -> bytes:
    """Every zstd frame of ``body`` (RFC 8878 allows several, one after another), inflated."""
    out = bytearray()
    rest = memoryview(body)
    while rest:
        frame = zstandard.ZstdDecompressor().decompressobj()
        used = 0
        try:
            while used < len(rest) and not frame.eof:
                out += frame.decompress(rest[used : used + _ZSTD_PIECE])
                used += _ZSTD_PIECE
                if len(out) > limit:
                    raise TooLarge(f"the body inflates past {limit} bytes")
        except zstandard.ZstdError as error:
            raise BadBody(f"the body is not valid zstd ({error})") from None
        if not frame.eof:
            raise BadBody("the body is not valid zstd (it is cut short)")
        # what this frame did not use of the last piece, then the pieces not fed yet
        rest = memoryview(bytes(frame.unused_data) + bytes(rest[min(used, len(rest)) :]))
    return bytes(out)


def _zlib(body: bytes, encoding: str, limit: int) -> bytes:
    """``body`` inflated as gzip (every member: a gzip file may hold several) or deflate."""
    out = bytearray()
    rest = body
    while True:
        inflater = zlib.decompressobj(zlib.MAX_WBITS | (16 if encoding == "gzip" else 0))
        try:
            out += inflater.decompress(rest, limit + 1 - len(out))
        except zlib.error as error:
            raise BadBody(f"the body is not valid {encoding} ({error})") from None
        if len(out) > limit or inflater.unconsumed_tail:
            raise TooLarge(f"the body inflates past {limit} bytes")
        if not inflater.eof:
            raise BadBody(f"the body is not valid {encoding} (it is cut short)")
        rest = inflater.unused_data
        if not rest:
            return bytes(out)
        if encoding != "gzip":
            raise BadBody(f"the body is not valid {encoding} (data after its end)")


def inflate(body: bytes, encoding: str, limit: int) -> bytes:
    """``body`` as sent, decompressed as ``encoding`` says, up to ``limit`` bytes: whole, or an
    error (a body cut short never reads as a shorter one).

    An empty body is empty whatever its encoding.

    Raises:
        TooLarge: it inflates past ``limit`` (decompression stops there).
        UnsupportedEncoding: ``encoding`` is none of :data:`ENCODINGS`.
        BadBody: it is not valid data of its encoding, or it is cut short.

    Example:
        >>> inflate(gzip.compress(b"{}"), "gzip", 1024)
        b'{}'
    """
    encoding = encoding.strip().lower()
    if encoding in ("", "identity") or not body:
        return body
    if encoding not in ENCODINGS:
        raise UnsupportedEncoding(
            f"unsupported Content-Encoding {encoding!r}; send gzip, deflate, zstd or none"
        )
    if encoding == "zstd":
        return _zstd(body, limit)
    return _zlib(body, encoding, limit)
