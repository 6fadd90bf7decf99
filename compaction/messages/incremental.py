"""Incremental parsing: a request that repeats the previous one's messages parses only its new ones.

An agent's requests grow by a few messages each call. ``parse_incremental(format, request,
previous)`` compares the request's messages with the previous request's (kept in a
:class:`ParseMemo`), reuses the parsed :class:`Message` objects of the longest common prefix and
parses and depth-checks only the rest. The result is equal to ``parse(format, request)`` in every
respect, canonical form included, and every error is the one ``parse`` raises: on any error the
request is parsed again in full, so the error names the same field.

How messages are compared. ``==`` on the decoded JSON runs in C and is fast, but Python's equality
holds between ``1``, ``1.0`` and ``True`` (and between ``0.0`` and ``-0.0``), which canonical JSON
and validation (``is_error`` must be a boolean) tell apart. The memo therefore records which
messages hold only strings and nulls (most do: text, ids, arguments); for those, ``==`` proves the
same content and types. A message holding numbers, booleans or anything else is reused only after
a type-strict comparison of that message.

The memo keeps its own copies of the messages' objects and arrays (strings are shared), and the
new messages are parsed from those copies, so a caller that mutates a request after the call never
changes what the memo holds.

Example:
    >>> first = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
    >>> context, memo = parse_incremental("openai-chat", first)
    >>> second = {**first, "messages": [*first["messages"], {"role": "assistant", "content": "yo"}]}
    >>> context, memo = parse_incremental("openai-chat", second, memo)
    >>> memo.reused, [m.text for m in context.messages]
    (1, ['hi', 'yo'])
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import msgspec

from compaction.errors import FormatError
from compaction.messages import anthropic, openai_chat, openai_responses, parse
from compaction.messages._common import MAX_DEPTH, check_depth, expect_obj, join
from compaction.messages.model import Context, Message, ToolDefinition

__all__ = ["ParseMemo", "identical_prefix", "parse_incremental"]


@dataclass(frozen=True)
class _Adapter:
    key: str
    parse_message: Callable[[object, str], Message]
    build: Callable[..., Context]
    #: The request's keys whose values the format parses into the context's tools.
    tool_keys: tuple[str, ...] = ("tools",)


_ADAPTERS: Final[dict[str, _Adapter]] = {
    "openai-chat": _Adapter(
        openai_chat.MESSAGES,
        openai_chat.parse_message,
        openai_chat.build,
        openai_chat.TOOL_KEYS,
    ),
    "anthropic-messages": _Adapter(anthropic.MESSAGES, anthropic.parse_message, anthropic.build),
    "openai-responses": _Adapter(
        openai_responses.MESSAGES, openai_responses.parse_item, openai_responses.build
    ),
}

#: Objects and arrays a message may nest (the request is depth 0, its message list 1).
_MESSAGE_DEPTH: Final = MAX_DEPTH - 2


@dataclass(frozen=True, eq=False)
class ParseMemo:
    """What :func:`parse_incremental` keeps of a request to parse the next one cheaply.

    Attributes:
        format: the request's format; a memo of another format is not used.
        raw: the request's messages (``messages``, or ``input`` for Responses), as private copies.
        messages: ``raw`` parsed, one :class:`Message` per item.
        typed: indices of the items holding values other than strings and nulls (numbers,
            booleans): they are reused only after a type-strict comparison.
        reused: how many leading messages of this request were taken from the previous memo.
        key: the request's key that holds ``raw`` (``messages``, or ``input``); empty when the
            request had no list of messages.
        checked: the request's other objects and arrays (tools, a system prompt's blocks) by
            key, as their compact JSON: the next request's equal ones are not depth-checked again
            (an agent sends tens of KB of tool definitions with every call).
        tools: the context's tool definitions, and ``tools_mark`` what the request's tool keys
            held (their compact JSON, empty for none): a request whose tool keys hold the same
            takes the very same definitions instead of parsing them again.
    """

    format: str
    raw: tuple[Any, ...] = ()
    messages: tuple[Message, ...] = ()
    typed: tuple[int, ...] = ()
    reused: int = 0
    key: str = ""
    checked: Mapping[str, bytes] = field(default_factory=dict)
    tools: tuple[ToolDefinition, ...] | None = None
    tools_mark: tuple[bytes, ...] | None = None


def parse_incremental(
    format: str, request: Mapping[str, Any], previous: ParseMemo | None = None
) -> tuple[Context, ParseMemo]:
    """Parse ``request`` like :func:`~compaction.messages.parse`, reusing ``previous``.

    Args:
        format: one of :data:`~compaction.messages.FORMATS`.
        request: the request body.
        previous: the memo returned for an earlier request (of any session or format: messages
            are compared, never assumed), or ``None``.

    Returns:
        The context, equal to ``parse(format, request)``, and the memo for the next call.

    Raises:
        FormatError: exactly the error ``parse(format, request)`` raises.
    """
    adapter = _ADAPTERS.get(format) if isinstance(format, str) else None
    if adapter is None:
        parse(format, request)  # raises: unknown format
        raise AssertionError("unreachable")  # pragma: no cover
    try:
        return _parse(format, adapter, request, previous)
    except FormatError:
        # The full parse raises the error it always would (the first bad field in its order).
        parse(format, request)
        raise  # pragma: no cover  (a FormatError here is always one parse raises too)


def _parse(
    format: str, adapter: _Adapter, request: Mapping[str, Any], previous: ParseMemo | None
) -> tuple[Context, ParseMemo]:
    req = expect_obj(request, "")
    items = req.get(adapter.key)
    if not isinstance(items, list):  # no list of messages (a Responses string input, an error)
        return parse(format, request), ParseMemo(format)
    checked: dict[str, bytes] = {}
    before = previous.checked if previous is not None else {}
    for key, value in req.items():
        if key == adapter.key:
            continue
        mark = _fingerprint(value)
        if mark is None or before.get(key) != mark:  # the same value was checked last time
            check_depth(value, key, MAX_DEPTH - 1)
        if mark is not None:
            checked[key] = mark
    reused = 0
    if previous is not None and previous.format == format:
        reused = _common_prefix(items, previous)
    raw: list[Any] = list(previous.raw[:reused]) if previous is not None else []
    messages: list[Message] = list(previous.messages[:reused]) if previous is not None else []
    typed = [i for i in previous.typed if i < reused] if previous is not None else []
    for index in range(reused, len(items)):
        path = join(adapter.key, index)
        copy, plain = _copy(items[index], path, _MESSAGE_DEPTH)
        messages.append(adapter.parse_message(copy, path))
        raw.append(copy)
        if not plain:
            typed.append(index)
    parsed = tuple(messages)
    tools_mark = _tools_mark(req, adapter.tool_keys, checked)
    known = None
    if previous is not None and previous.format == format and previous.tools_mark == tools_mark:
        known = previous.tools if tools_mark is not None else None
    context = adapter.build(req, parsed, tools=known)
    memo = ParseMemo(
        format,
        tuple(raw),
        parsed,
        tuple(typed),
        reused,
        adapter.key,
        checked,
        context.tools if tools_mark is not None else None,
        tools_mark,
    )
    return context, memo


def _tools_mark(
    req: Mapping[str, Any], keys: tuple[str, ...], checked: Mapping[str, bytes]
) -> tuple[bytes, ...] | None:
    """What ``req``'s tool keys hold, as compact JSON (empty for an absent or null key), or None
    when one holds what is neither (the format refuses it). Equal marks are equal JSON values
    of equal types (``1``, ``1.0`` and ``true`` encode apart): they parse to equal tools."""
    mark: list[bytes] = []
    for key in keys:
        if req.get(key) is None:
            mark.append(b"")
        elif key in checked:
            mark.append(checked[key])
        else:
            return None
    return tuple(mark)


def identical_prefix(a: Sequence[Any], b: Sequence[Any]) -> int:
    """How many leading items ``a`` and ``b`` share, the very objects (compared in C: a late
    turn's thousands of messages in microseconds).

    Example:
        >>> shared = ["x", "y"]
        >>> identical_prefix([*shared, "z"], [*shared, "w"])
        2
    """
    limit = min(len(a), len(b))
    same = list(map(operator.is_, a[:limit], b[:limit]))
    return same.index(False) if False in same else limit


def _common_prefix(items: list[Any], previous: ParseMemo) -> int:
    """How many leading ``items`` have the same content and value types as ``previous.raw``."""
    old = previous.raw
    limit = min(len(items), len(old))
    # the very objects of the previous parse (a body decoded reusing them) are the same at once;
    # then equal ones, one by one
    count = identical_prefix(items, old)
    while count < limit and (items[count] is old[count] or items[count] == old[count]):
        count += 1
    for index in previous.typed:
        if index >= count:
            break
        if items[index] is not old[index] and not _strict_equal(items[index], old[index]):
            return index
    return count


def _fingerprint(value: object) -> bytes | None:
    """An object's or array's compact JSON (bytes: what a later call changes in the request
    cannot change it), or None for anything else, or what does not encode (too deep)."""
    if not isinstance(value, dict | list):
        return None
    try:
        return msgspec.json.encode(value)
    except (TypeError, ValueError, RecursionError, msgspec.EncodeError):
        return None


def _strict_equal(a: object, b: object) -> bool:
    """``a == b`` with the same types throughout (``1``, ``1.0`` and ``True`` differ)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        assert isinstance(b, dict)
        return a.keys() == b.keys() and all(_strict_equal(v, b[k]) for k, v in a.items())
    if isinstance(a, list):
        assert isinstance(b, list)
        return len(a) == len(b) and all(_strict_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float):
        return repr(a) == repr(b)  # tells 0.0 from -0.0, as JSON does
    return a == b


def _copy(value: object, path: str, limit: int, depth: int = 0) -> tuple[Any, bool]:
    """A copy of ``value``'s objects and arrays (other values shared) and whether it holds only
    strings and nulls; a :class:`FormatError` for an object or array nested deeper than ``limit``
    (as :func:`~compaction.messages._common.check_depth` counts). Recursion is bounded by
    ``limit``.
    """
    if isinstance(value, Mapping):
        if depth > limit:
            raise FormatError(path, f"nested deeper than {MAX_DEPTH} levels")
        plain = type(value) is dict
        out: dict[Any, Any] = {}
        for key, child in value.items():
            if type(child) is str or child is None:
                out[key] = child
            else:
                out[key], child_plain = _copy(child, join(path, str(key)), limit, depth + 1)
                plain = plain and child_plain
        return out, plain
    if isinstance(value, list):
        if depth > limit:
            raise FormatError(path, f"nested deeper than {MAX_DEPTH} levels")
        plain = type(value) is list
        items: list[Any] = []
        for index, child in enumerate(value):
            if type(child) is str or child is None:
                items.append(child)
            else:
                copied, child_plain = _copy(child, join(path, index), limit, depth + 1)
                items.append(copied)
                plain = plain and child_plain
        return items, plain
    return value, type(value) is str or value is None
