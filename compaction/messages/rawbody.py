"""A request body's bytes and where its messages lie in them: decode the next body of a growing
conversation without decoding again what it repeats.

An agent's requests grow by a few messages each call, and most clients serialize them the same
way every time, so the bytes of a body's message array up to the end of its repeated messages
are usually those of the previous body's array (what surrounds the array, a turn id, a system
prompt, may change). :func:`spans_of` finds where the elements of a body's message array lie
(:class:`BodySpans`); :func:`decode_reusing` then finds the array in the next body (stepping over
the members before it), and decodes that body as the JSON decoder would, except that the leading
elements whose bytes are those of the previous body's are taken from their decoded values instead
of being decoded again: the decoder reads the body without them (the new messages and the rest),
at the cost of the new content and what precedes the array, not of the whole body.

Exact or nothing: the result equals ``decode(raw)``. Where that cannot be told cheaply (the body
names the array's keys again after it, or spells a key with ``\\u`` escapes there, so a decoder
taking the last of two equal keys might read another array) nothing is reused and the caller
decodes the whole body.

Example:
    >>> import json
    >>> first = json.dumps({"request": {"messages": [{"a": 1}, {"b": 2}]}}).encode()
    >>> spans = spans_of(first, ("request", "messages"))
    >>> [first[spans.start + e - 8 : spans.start + e] for e in spans.ends]
    [b'{"a": 1}', b'{"b": 2}']
    >>> second = json.dumps({"request": {"messages": [{"a": 1}, {"b": 2}, {"c": 3}]}}).encode()
    >>> reused = decode_reusing(second, spans, [{"a": 1}, {"b": 2}], json.loads)
    >>> reused.count, reused.data == json.loads(second)
    (2, True)
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import msgspec

__all__ = ["BodySpans", "MemberDecoder", "Reused", "decode_reusing", "spans_of"]

_OBJECT: Final = msgspec.json.Decoder(dict[str, msgspec.Raw])
_ARRAY: Final = msgspec.json.Decoder(list[msgspec.Raw])
#: Whitespace and the commas between array elements.
_SEPARATORS: Final = re.compile(rb"[ \t\n\r,]*")
_SPACE: Final = re.compile(rb"[ \t\n\r]*")
#: A string (escapes and all) or a bracket: what a scan of a JSON value steps on.
_TOKENS: Final = re.compile(rb'"(?:[^"\\]++|\\.)*+"|[\[\]{}]', re.DOTALL)
#: Anything else a value may be: a number, true, false, null.
_SCALAR: Final = re.compile(rb"[^ \t\n\r,\]}]+")
#: The end of a key (a string followed by a colon) holding a \u escape: a key spelled so that
#: a byte search for it would miss it.
_ESCAPED_KEY: Final = re.compile(rb'\\u[0-9a-fA-F]{4}[^"\\]*+"[ \t\n\r]*+:')


#: The members before the array at each level of its path: key (as written, quotes and all)
#: -> the offsets of its value in the body.
Members = tuple[dict[bytes, tuple[int, int]], ...]


@dataclass(frozen=True, eq=False)
class BodySpans:
    """Where the elements of the array at ``path`` lie in ``raw``.

    Attributes:
        raw: the body's bytes.
        path: the keys of nested objects from the body's root to the array.
        start: the offset just after the array's ``[``.
        ends: the offset just after each element, in order, from ``start``.
        members: at each level of the path, the members before its key (key as written ->
            offsets of the value), so the next body steps over those it repeats at once.
    """

    raw: bytes
    path: tuple[str, ...]
    start: int
    ends: tuple[int, ...]
    members: Members = ()


@dataclass(frozen=True, eq=False)
class Reused:
    """A body decoded by :func:`decode_reusing`: ``data`` (equal to decoding the whole body),
    how many leading elements of its array were taken from the previous body (``count``), and
    the spans of this body for the next one."""

    data: Any
    count: int
    spans: BodySpans


class MemberDecoder:
    """``decode`` of a body, but for the large members of its object at ``key`` that ``before``
    holds with the same bytes: those are the values decoded then (a coding agent's 81 KB of tool
    definitions, the same every call, took 0.3 ms to decode on every turn).

    The body and its ``key`` object are read as their members' raw bytes (msgspec checks the
    JSON and builds no value), each other member is decoded from its own bytes: the result
    equals ``decode(body)``, the same keys in the same order, the last of two equal keys kept,
    and a body that does not decode raises what decoding it raises. A body that is not an object
    holding an object at ``key`` is decoded whole. A member of ``min_bytes`` or more, not named
    in ``skip``, is kept in ``members`` (its bytes and value), for the next body's ``before``.

    Example:
        >>> import json
        >>> tools = [{"name": "t", "description": "x" * 5000}]
        >>> first = MemberDecoder(json.loads, {})
        >>> data = first(json.dumps({"request": {"tools": tools, "n": 1}}).encode())
        >>> second = MemberDecoder(json.loads, first.members)
        >>> again = second(json.dumps({"request": {"tools": tools, "n": 2}}).encode())
        >>> again["request"]["tools"] is data["request"]["tools"], again["request"]["n"]
        (True, 2)
    """

    def __init__(
        self,
        decode: Callable[[bytes], Any],
        before: Mapping[str, tuple[bytes, Any]],
        *,
        key: str = "request",
        skip: Collection[str] = (),
        min_bytes: int = 4 * 1024,
    ) -> None:
        self.decode = decode
        self.before = before
        self.key = key
        self.skip = skip
        self.min_bytes = min_bytes
        self.members: dict[str, tuple[bytes, Any]] = {}

    def __call__(self, body: bytes) -> Any:
        self.members = {}
        try:
            top = _OBJECT.decode(body)
            inner = _OBJECT.decode(top[self.key])
        except (msgspec.DecodeError, KeyError, ValueError, RecursionError):
            return self.decode(body)
        data: dict[str, Any] = {}
        for key, raw in top.items():
            if key != self.key:
                data[key] = self.decode(bytes(raw))
                continue
            values: dict[str, Any] = {}
            for name, member in inner.items():
                blob = bytes(member)
                if name in self.skip or len(blob) < self.min_bytes:
                    values[name] = self.decode(blob)
                    continue
                seen = self.before.get(name)
                value = seen[1] if seen is not None and seen[0] == blob else self.decode(blob)
                self.members[name] = (blob, value)
                values[name] = value
            data[key] = values
        return data


def spans_of(raw: bytes, path: tuple[str, ...]) -> BodySpans | None:
    """Where the elements of the array at ``path`` lie in ``raw``, a body that decodes; ``None``
    when there is no array there, it is empty, or its place cannot be told (its bytes occur
    twice).

    The array is the one a decoder reads (of two equal keys, the last): msgspec finds it, reading
    the objects on the path and the array as raw slices, without building their values.
    """
    node: msgspec.Raw | bytes = raw
    try:
        for key in path:
            found = _OBJECT.decode(node).get(key)
            if found is None:
                return None
            node = found
        elements = _ARRAY.decode(node)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    array = bytes(node)
    at = raw.find(array)
    if not elements or at < 0 or raw.find(array, at + 1) >= 0:
        return None
    ends = []
    position = at + 1
    for element in elements:
        data = bytes(element)
        begin = _SEPARATORS.match(raw, position).end()  # type: ignore[union-attr]
        if not raw.startswith(data, begin):
            return None  # pragma: no cover  (the array's own bytes, element after element)
        position = begin + len(data)
        ends.append(position - at - 1)
    start, members = _locate(raw, path)
    if start != at + 1:
        return None  # the array a decoder reads is not the first one on the path
    return BodySpans(raw, path, at + 1, tuple(ends), members)


def decode_reusing(
    raw: bytes, previous: BodySpans, items: Sequence[Any], decode: Callable[[bytes], Any]
) -> Reused | None:
    """``decode(raw)``, with the leading elements of the array at ``previous.path`` that ``raw``'s
    array shares byte for byte with ``previous.raw``'s taken from ``items``, their decoded values,
    instead of decoded again.

    ``items`` must be what decoding ``previous``'s elements gives (a caller's copies: they become
    part of the result). Returns ``None`` when no element can be reused or the result could differ
    from ``decode(raw)`` (a body that does not decode, a key on the path spelled with escapes
    before the array, the array's keys named again after it): decode the whole body then.
    """
    ends = previous.ends
    if not ends or len(items) < len(ends):
        return None
    start, members = _locate(raw, previous.path, previous)
    if start < 0:
        return None
    old = memoryview(previous.raw)[previous.start :]
    count = _shared(raw, start, old, ends)
    if count == 0:
        return None
    after = _SPACE.match(raw, start + ends[count - 1]).end()  # type: ignore[union-attr]
    if raw[after : after + 1] == b",":
        rest = after + 1
    elif raw[after : after + 1] == b"]":
        rest = after
    else:
        return None
    try:
        data = decode(raw[:start] + raw[rest:])
    except (ValueError, RecursionError, msgspec.DecodeError):
        return None
    parent, array = _array_at(data, previous.path)
    if parent is None or array is None:
        return None
    new_ends = _element_ends(raw, rest, len(array))
    if new_ends is None:
        return None
    close = _SPACE.match(raw, new_ends[-1] if new_ends else rest).end()  # type: ignore[union-attr]
    if raw[close : close + 1] != b"]" or _named_again(raw, close + 1, previous.path):
        return None
    parent[previous.path[-1]] = [*items[:count], *array]
    new = (*ends[:count], *(e - start for e in new_ends))
    spans = BodySpans(raw, previous.path, start, new, members)
    return Reused(data, count, spans)


def _shared(raw: bytes, start: int, old: memoryview, ends: tuple[int, ...]) -> int:
    """How many elements the array of ``raw`` at ``start`` shares with ``old`` (an array's bytes
    from its first element on): the most ``k`` such that it starts with the bytes of ``old`` up to
    the end of its element ``k - 1``."""
    if raw.startswith(old[: ends[-1]], start):
        return len(ends)
    low, high = 0, len(ends) - 1  # the answer is in [low, high]
    while low < high:
        middle = (low + high + 1) // 2
        if raw.startswith(old[: ends[middle - 1]], start):
            low = middle
        else:
            high = middle - 1
    return low


def _locate(
    raw: bytes, path: tuple[str, ...], hint: BodySpans | None = None
) -> tuple[int, Members]:
    """The offset just after the ``[`` of the array at ``path`` in ``raw``, found by stepping over
    the members before each key of the path (the first of two equal keys: a later one is looked
    for after the array), and those members; -1 when there is none or a key before it is spelled
    with escapes.

    A member whose value ``hint`` (the previous body) holds under the same key is stepped over at
    once when ``raw`` has the same bytes there, a complete value (a tool list of tens of KB is
    compared, not scanned)."""
    position = 0
    members: list[dict[bytes, tuple[int, int]]] = []
    old = memoryview(hint.raw) if hint is not None else None
    for depth, key in enumerate(path):
        position = _SPACE.match(raw, position).end()  # type: ignore[union-attr]
        if raw[position : position + 1] != b"{":
            return -1, ()
        wanted = b'"' + key.encode() + b'"'
        known = hint.members[depth] if hint is not None and depth < len(hint.members) else {}
        level: dict[bytes, tuple[int, int]] = {}
        members.append(level)
        position += 1
        while True:
            position = _SPACE.match(raw, position).end()  # type: ignore[union-attr]
            name = _TOKENS.match(raw, position)
            if name is None or raw[position : position + 1] != b'"' or b"\\" in name.group():
                return -1, ()
            colon = _SPACE.match(raw, name.end()).end()  # type: ignore[union-attr]
            if raw[colon : colon + 1] != b":":
                return -1, ()
            position = _SPACE.match(raw, colon + 1).end()  # type: ignore[union-attr]
            if name.group() == wanted:
                break
            begin = position
            was = known.get(name.group())
            if old is not None and was is not None and _same_value(raw, position, old, *was):
                position += was[1] - was[0]
            else:
                position = _value_end(raw, position)
            if position < 0:
                return -1, ()
            level[name.group()] = (begin, position)
            position = _SPACE.match(raw, position).end()  # type: ignore[union-attr]
            if raw[position : position + 1] != b",":
                return -1, ()  # the object ends without the key
            position += 1
        if depth == len(path) - 1:
            found = position + 1 if raw[position : position + 1] == b"[" else -1
            return found, tuple(members)
    return -1, ()  # pragma: no cover  (a path has at least one key)


def _same_value(raw: bytes, position: int, old: memoryview, begin: int, end: int) -> bool:
    """Whether ``raw`` holds at ``position`` the very value ``old[begin:end]`` (a whole value:
    its bytes match and what follows cannot continue it)."""
    if not raw.startswith(old[begin:end], position):
        return False
    after = raw[position + end - begin : position + end - begin + 1]
    return after in (b"", b" ", b"\t", b"\n", b"\r", b",", b"}")


def _array_at(data: Any, path: tuple[str, ...]) -> tuple[dict[str, Any] | None, list[Any] | None]:
    node = data
    for key in path[:-1]:
        node = node.get(key) if isinstance(node, dict) else None
    if not isinstance(node, dict) or not isinstance(node.get(path[-1]), list):
        return None, None
    return node, node[path[-1]]


def _element_ends(raw: bytes, position: int, count: int) -> tuple[int, ...] | None:
    """The end offsets of ``count`` JSON values from ``position`` on, commas between them (bytes
    that decode: only the values' bounds are looked for)."""
    ends = []
    for index in range(count):
        begin = _SPACE.match(raw, position).end()  # type: ignore[union-attr]
        if index:
            if raw[begin : begin + 1] != b",":
                return None
            begin = _SPACE.match(raw, begin + 1).end()  # type: ignore[union-attr]
        position = _value_end(raw, begin)
        if position < 0:
            return None
        ends.append(position)
    return tuple(ends)


def _value_end(raw: bytes, begin: int) -> int:
    first = raw[begin : begin + 1]
    if first == b'"':
        found = _TOKENS.match(raw, begin)
        return found.end() if found else -1
    if first in (b"{", b"["):
        depth = 0
        for token in _TOKENS.finditer(raw, begin):
            mark = raw[token.start()]
            if mark == 0x22:  # a string
                continue
            depth += 1 if mark in (0x5B, 0x7B) else -1
            if depth == 0:
                return token.end()
        return -1
    scalar = _SCALAR.match(raw, begin)
    return scalar.end() if scalar else -1


def _named_again(raw: bytes, tail: int, path: tuple[str, ...]) -> bool:
    """Whether the bytes after the array could hold another of its keys: one of them as a plain
    string, or any key spelled with a ``\\u`` escape."""
    for key in path:
        if raw.find(b'"' + key.encode() + b'"', tail) >= 0:
            return True
    return _ESCAPED_KEY.search(raw, tail) is not None
