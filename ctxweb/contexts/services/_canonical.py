"""Canonical forms of what a turn stores: canonical JSON and its SHA-256 digests, the check
for text databases cannot store, the idempotency hash of a posted body, and equality that
tells values apart as canonical JSON does.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import fields, is_dataclass
from typing import Any

import msgspec

from compaction.errors import FormatError
from compaction.messages import (
    Context,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    message_to_dict,
    messages_key,
)
from compaction.messages import Message as LibMessage


def _canonical_json(value: Any) -> str:
    """``value`` as canonical JSON text (sorted keys, no spaces): the text stored hashes were
    made of, so it never changes. msgspec writes it when ``value`` holds no float and only
    string keys (:func:`_msgspec_writes_it_alike`): the same text, in about a fifth of the time;
    :mod:`json` otherwise."""
    if _msgspec_writes_it_alike(value):
        try:
            return _SORTED_JSON.encode(value).decode()
        except (TypeError, ValueError, msgspec.EncodeError):  # a lone surrogate: json writes it
            pass
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


#: The types msgspec writes as :func:`json.dumps` does, sorted keys and all, exactly.
_ALIKE = frozenset({str, int, bool, type(None)})
#: Past this many values, one is left to :mod:`json` without looking further (a message holds a
#: few dozen; a large tool list, thousands, and is seldom written this way).
_ALIKE_LOOKED_AT = 512


def _msgspec_writes_it_alike(value: Any) -> bool:
    """Whether ``value`` is made only of dicts with string keys, lists, tuples, strings,
    integers, booleans and ``None``: msgspec writes a float with an exponent otherwise
    (``1e16``, where :mod:`json` writes ``1e+16``) and a NaN as ``null``, and sorts keys that
    are no strings after making them strings (json before). False past :data:`_ALIKE_LOOKED_AT`
    values (a cycle too: json refuses it)."""
    stack = [value]
    budget = _ALIKE_LOOKED_AT
    while stack:
        budget -= 1
        if budget < 0:
            return False
        item = stack.pop()
        kind = type(item)
        if kind is dict:
            for key in item:
                if type(key) is not str:
                    return False
            stack.extend(item.values())
        elif kind is list or kind is tuple:
            stack.extend(item)
        elif kind not in _ALIKE:
            return False
    return True


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


_SORTED_JSON = msgspec.json.Encoder(order="sorted")


def _canonical_bytes(value: Any) -> bytes:
    """Canonical JSON (sorted keys, no spaces) as UTF-8, encoded by msgspec: the bytes of
    ``_canonical_json(value)`` but for a float written with an exponent (``1e16`` where
    :mod:`json` writes ``1e+16``), in about a tenth of the time (a coding agent's 80 KB of tools:
    0.05 ms against 0.4 ms, on every turn). What it cannot encode (a lone surrogate), json
    does."""
    try:
        return _SORTED_JSON.encode(value)
    except (TypeError, ValueError, msgspec.EncodeError):  # UnicodeEncodeError is a ValueError
        return _canonical_json(value).encode("utf-8", "surrogatepass")


def _check_text(value: Any, path: str) -> None:
    """Reject what databases cannot store: NUL characters and lone surrogates in any string,
    keys included (PostgreSQL's ``jsonb`` refuses them there too; a body read by the API's
    parser was checked already, one decoded by a receiver was not)."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                raise FormatError(where, "contains a NUL character")
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raise FormatError(where, "is not valid UTF-8 (lone surrogate)") from None
        elif isinstance(item, Mapping):
            for k, v in item.items():
                stack.append((v, f"{where}.{k}"))
                if isinstance(k, str):
                    stack.append((k, f"{where} key {k!r}"))
        elif isinstance(item, list | tuple):
            stack.extend((v, f"{where}.{i}") for i, v in enumerate(item))


def _typed_equal(a: Any, b: Any) -> bool:
    """``a == b`` that also tells ``1``, ``1.0`` and ``True`` apart, as canonical JSON does."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, Mapping):
        return a.keys() == b.keys() and all(_typed_equal(v, b[k]) for k, v in a.items())
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_typed_equal(x, y) for x, y in zip(a, b, strict=True))
    if is_dataclass(a):
        return all(_typed_equal(getattr(a, f.name), getattr(b, f.name)) for f in fields(a))
    return bool(a == b)


_ENCODER = msgspec.json.Encoder()


def _same_content(a: Any, b: Any) -> bool:
    """:func:`_typed_equal`, decided in C by comparing JSON encodings: ``1``, ``1.0`` and
    ``true`` (and ``0.0`` and ``-0.0``) encode differently, so equal bytes are equal values of
    equal types. Objects whose keys come in another order compare different: for its callers
    (is this the previous turn's system prompt or tool set?) that only means the row is looked up
    by hash, as it is for a new one."""
    if a is b:
        return True
    try:
        return _ENCODER.encode(a) == _ENCODER.encode(b)
    except (TypeError, ValueError):  # a value JSON cannot hold: compare it the slow way
        return _typed_equal(a, b)


def _same_part(a: Any, b: Any) -> bool:
    if isinstance(a, ToolResultPart):
        return (
            _typed_equal(a.extra, b.extra)
            and type(a.is_error) is type(b.is_error)
            and all(_same_part(x, y) for x, y in zip(a.content, b.content, strict=True))
        )
    if isinstance(a, TextPart | ToolCallPart):
        return not (a.extra or b.extra) or _typed_equal(a.extra, b.extra)
    return _typed_equal(a, b)


def _same_message(a: LibMessage, b: LibMessage) -> bool:
    """Whether two messages have the same canonical form: equal, with the same value types."""
    if a is b:
        return True
    if a != b:
        return False
    if (a.extra or b.extra) and not _typed_equal(a.extra, b.extra):
        return False
    return all(_same_part(x, y) for x, y in zip(a.parts, b.parts, strict=True))


def _body_digest(
    body: Any,
    context: Context,
    hashes: Sequence[str],
    *,
    listed: bool = False,
    by_json: bool = False,
) -> str:
    """The idempotency hash of a posted body: the SHA-256 of its canonical JSON
    (:func:`_canonical_bytes`), with the request's messages replaced by the SHA-256 of their hashes
    (``hashes``, which ingestion computes anyway), so hashing costs the body's small parts only.
    Bodies are equal exactly when their hashes are: a request renders back from its parsed
    messages exactly, so their hashes stand for them.

    As turns stored before were hashed: ``by_json``, with the canonical JSON :mod:`json` writes
    (its floats' exponents differ); ``listed``, also with the hashes themselves in place of the
    messages.
    """
    key = messages_key(context.format)
    request = body.get("request") if isinstance(body, Mapping) else None
    items = request.get(key) if isinstance(request, Mapping) else None
    if not isinstance(items, list) or len(items) != len(hashes):  # not a parsed request's body
        return _digest(_canonical_json(body))
    assert isinstance(request, Mapping)
    messages: dict[str, Any]
    if listed:
        messages = {"ctxweb:message_hashes": list(hashes)}
    else:  # the hashes have one length: joined, they stand for the list
        messages = {"ctxweb:messages_sha256": _digest("".join(hashes))}
    hashed = {**body, "request": {**request, key: messages}}
    if listed or by_json:
        return _digest(_canonical_json(hashed))
    return hashlib.sha256(_canonical_bytes(hashed)).hexdigest()


def _same_body(stored: str, body: Any, context: Context) -> bool:
    """Whether ``body`` is the body hashed as ``stored`` (a retry; the slow path is fine)."""
    hashes = [_digest(_canonical_json(message_to_dict(m))) for m in context.messages]
    return stored in (
        _body_digest(body, context, hashes),
        _body_digest(body, context, hashes, by_json=True),  # turns stored before
        _body_digest(body, context, hashes, listed=True),  # turns stored before that
        _digest(_canonical_json(body)),  # turns stored before bodies were hashed by parts
    )
