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
#: The most bytes inflated at a time (gzip, deflate): each piece is added to the one buffer the
#: body inflates into, so a body of megabytes exists once while it is inflated, not as the
#: decompressor's pieces, their join and a copy of that.
_PIECE = 1024 * 1024


def _zstd(body: bytes, limit: int) -> bytearray:
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
    return out


def _zlib(body: bytes, encoding: str, limit: int) -> bytearray:
    """``body`` inflated as gzip (every member: a gzip file may hold several) or deflate."""
    out = bytearray()
    rest = body
    while True:
        inflater = zlib.decompressobj(zlib.MAX_WBITS | (16 if encoding == "gzip" else 0))
        try:
            while True:
                room = min(_PIECE, limit + 1 - len(out))
                piece = inflater.decompress(rest, room)
                out += piece
                rest = inflater.unconsumed_tail
                if len(out) > limit:
                    raise TooLarge(f"the body inflates past {limit} bytes")
                # a full piece may leave output inside the decompressor with no input left
                if inflater.eof or (not rest and len(piece) < room):
                    break
        except zlib.error as error:
            raise BadBody(f"the body is not valid {encoding} ({error})") from None
        if not inflater.eof:
            raise BadBody(f"the body is not valid {encoding} (it is cut short)")
        rest = inflater.unused_data
        if not rest:
            return out
        if encoding != "gzip":
            raise BadBody(f"the body is not valid {encoding} (data after its end)")


def inflated(body: bytes, encoding: str, limit: int) -> bytes | bytearray:
    """:func:`inflate` without its last copy: the body itself when it is not encoded, else the
    buffer it inflated into (a ``bytearray``, which ``json.loads``, regular expressions and
    protobuf read as they read bytes). For a reader that needs the body only while it reads it:
    an inflated body of megabytes then exists once."""
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
    body_or_buffer = inflated(body, encoding, limit)
    return body_or_buffer if isinstance(body_or_buffer, bytes) else bytes(body_or_buffer)
