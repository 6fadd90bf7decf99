"""Request parsing: this process's memo of each session's latest parsed request body (a
bounded LRU), so a turn decodes and parses only the messages it does not share with the previous
one.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from compaction.errors import FormatError
from compaction.messages import FORMATS as FORMATS  # the formats a turn may be sent in
from compaction.messages import Context, messages_key
from compaction.messages.incremental import ParseMemo, parse_incremental
from compaction.messages.rawbody import BodySpans, MemberDecoder, decode_reusing, spans_of
from compaction.turns import ToolScan, tool_scan
from ctxweb.accounts.models import Project


@dataclass(frozen=True)
class TurnBody:
    """What :func:`turn_body_decode` learned of a turn's raw body, for
    :func:`turn_request_parse` to keep: where its messages lie (``None`` when not looked for),
    how many turns in a row could not reuse the previous body, and which keys of its request
    other than the messages hold what the session's previous body held (``checked``: their
    values were checked then, the body parser need not walk them again).

    ``rest`` is set by :func:`turn_request_parse`: the request's values other than its messages,
    which the body parser checked (the next body's ``checked`` compares with them).

    ``members`` holds the request's large members other than its messages (a coding agent's
    tens of KB of tool definitions, a long system prompt): their bytes and decoded values, for
    the next body to take them from when it sends the same bytes
    (:class:`~compaction.messages.rawbody.MemberDecoder`)."""

    spans: BodySpans | None
    misses: int = 0
    checked: tuple[str, ...] = ()
    rest: Mapping[str, Any] | None = None
    members: Mapping[str, tuple[bytes, Any]] = field(default_factory=dict)


@dataclass
class _Parsed:
    """A session's latest parse, and its tool-pair scans: ``base`` covers messages it shares with
    the parse before (scanned then), ``scan`` all of them once :func:`turn_orphans` ran. ``body``
    is where the parse's messages lie in the raw body they came in, when known."""

    memo: ParseMemo
    base: ToolScan | None = None
    scan: ToolScan | None = None
    body: TurnBody | None = None


#: Sessions' latest request bodies as this process parsed them (a bounded LRU), by project id and
#: external id: a turn parses only the messages its body does not share with the previous one.
_PARSED: OrderedDict[tuple[int, str], _Parsed] = OrderedDict()
_PARSED_MAX = 256
#: The messages the memos may hold in all (each holds its messages' parsed and raw forms).
_PARSED_MAX_MESSAGES = 200_000
#: The raw bodies the memos may hold in all, in bytes.
_PARSED_MAX_BYTES = 128 * 2**20
_PARSED_LOCK = threading.Lock()
#: The keys of a request that hold its messages (``input`` in Responses): checked message by
#: message as they arrive (:func:`turn_request_parse`), not by the body parser.
MESSAGE_KEYS = ("messages", "input")
#: A body smaller than this is decoded whole: reusing its messages saves too little to look for
#: where they lie.
BODY_REUSE_MIN_BYTES = 32 * 1024
#: A member of a request at least this large (other than its messages) that the session's
#: previous body sent byte for byte is taken from that body's decoded value.
MEMBER_REUSE_MIN_BYTES = 4 * 1024


def turn_body_decode(
    *, project: Project, external_id: str, raw: bytes, decode: Callable[[bytes], Any]
) -> tuple[Any, TurnBody]:
    """``decode(raw)`` of a turn's body for session ``external_id``, without decoding again the
    messages it repeats, byte for byte, from the session's previous body in this process
    (:func:`compaction.messages.rawbody.decode_reusing`: the result is equal to ``decode(raw)``;
    the repeated messages are the previous parse's own copies of them). Raises what
    ``decode(raw)`` raises.

    Returns the data and a :class:`TurnBody` to hand to :func:`turn_request_parse` with the
    data's ``request``, so the next turn can do the same. Where the messages of a body lie is
    looked for (a few milliseconds for a megabyte) on a session's first body in this process and
    after a body that repeated nothing, except for a session whose bodies keep repeating
    nothing (an agent rewriting its first message every call): then only every sixteenth time.
    """
    with _PARSED_LOCK:
        previous = _PARSED.get((project.pk, external_id))
    before = previous.body if previous is not None else None
    misses = 0
    members = MemberDecoder(
        decode,
        before.members if before is not None else {},
        skip=MESSAGE_KEYS,
        min_bytes=MEMBER_REUSE_MIN_BYTES,
    )
    if before is not None:
        spans = before.spans
        memo = previous.memo  # type: ignore[union-attr]
        if spans is not None and memo.key == spans.path[-1] and len(memo.raw) == len(spans.ends):
            reused = decode_reusing(raw, spans, memo.raw, members)
            if reused is not None:
                checked = _same(reused.data, before)
                return reused.data, TurnBody(reused.spans, 0, checked, None, members.members)
        misses = before.misses + 1
    if len(raw) < BODY_REUSE_MIN_BYTES:
        data = decode(raw)
        return data, TurnBody(None, misses, _same(data, before) if before is not None else ())
    data = members(raw)
    checked = _same(data, before) if before is not None else ()
    if misses >= 2 and misses % 16:
        return data, TurnBody(None, misses, checked, None, members.members)
    format = data.get("format") if isinstance(data, dict) else None
    key = messages_key(format) if isinstance(format, str) else "messages"
    spans_now = spans_of(raw, ("request", key))
    return data, TurnBody(spans_now, misses, checked, None, members.members)


def _same(data: Any, before: TurnBody) -> tuple[str, ...]:
    """The keys of ``data``'s request whose values equal the previous body's checked ones (equal
    JSON values nest as deep and hold the same strings: checked alike)."""
    request = data.get("request") if isinstance(data, dict) else None
    if not isinstance(request, dict) or not before.rest:
        return ()
    rest = before.rest
    return tuple(k for k, v in request.items() if k in rest and (rest[k] is v or rest[k] == v))


def turn_request_parse(
    *,
    project: Project,
    external_id: str,
    format: str,
    request: Mapping[str, Any],
    body: TurnBody | None = None,
) -> Context:
    """Parse the request body of a turn of session ``external_id``, exactly as
    :func:`compaction.messages.parse` does, reusing this process's parse of the session's
    previous body for the messages this one repeats.

    Safe whatever the memo holds (another process's turns, a retry, a failed request, another
    format): messages are compared with the previous body's, never assumed. The reused messages
    are the very objects of the previous parse, so :func:`turn_ingest` recognizes them at once.
    ``body`` is what :func:`turn_body_decode` said of the raw body ``request`` came in: kept for
    the next turn's decoding.

    Raises:
        FormatError: as ``parse``, or for a NUL character in a message the request adds (no
            database column holds one; :func:`refuse_nul`). The memo is left as it was.
    """
    key = (project.pk, external_id)
    with _PARSED_LOCK:
        previous = _PARSED.get(key)
    context, memo = parse_incremental(format, request, previous.memo if previous else None)
    refuse_nul(memo)
    scanned = previous.scan or previous.base if previous is not None else None
    base = scanned if scanned is not None and scanned.count <= memo.reused else None
    with _PARSED_LOCK:
        if body is not None:  # what the body parser checked, for the next body to compare
            rest = {k: v for k, v in request.items() if k not in MESSAGE_KEYS}
            body = replace(body, rest=rest)
        _PARSED[key] = _Parsed(memo, base, body=body)
        _PARSED.move_to_end(key)
        held = sum(len(p.memo.raw) for p in _PARSED.values())
        held_bytes = sum(_body_bytes(p) for p in _PARSED.values())
        while len(_PARSED) > 1 and (
            len(_PARSED) > _PARSED_MAX
            or held > _PARSED_MAX_MESSAGES
            or held_bytes > _PARSED_MAX_BYTES
        ):
            _, dropped = _PARSED.popitem(last=False)
            held -= len(dropped.memo.raw)
            held_bytes -= _body_bytes(dropped)
    return context


def _body_bytes(parsed: _Parsed) -> int:
    if parsed.body is None:
        return 0
    held = sum(len(blob) for blob, _ in parsed.body.members.values())
    return held + (len(parsed.body.spans.raw) if parsed.body.spans is not None else 0)


def refuse_nul(memo: ParseMemo) -> None:
    """Refuse a NUL character in a key or string of the messages a request adds to the one
    before it (``memo.raw[memo.reused:]``), a :class:`FormatError` naming where: the messages it
    repeats were looked at when they were new (the memo only ever holds checked messages), so
    the cost is the new content's, not the whole request's.

    Example:
        >>> from compaction.messages.incremental import parse_incremental
        >>> body = {"messages": [{"role": "user", "content": "a" + chr(0)}]}
        >>> _, memo = parse_incremental("openai-chat", body)
        >>> refuse_nul(memo)
        Traceback (most recent call last):
        compaction.errors.FormatError: messages.0.content: contains a NUL character
    """
    for index in range(memo.reused, len(memo.raw)):
        stack: list[tuple[Any, tuple[str | int, ...]]] = [(memo.raw[index], (index,))]
        while stack:
            node, where = stack.pop()
            if isinstance(node, str):
                if "\x00" in node:
                    raise FormatError(_path(memo.key, where), "contains a NUL character")
            elif isinstance(node, dict):
                for name, child in node.items():
                    if "\x00" in name:
                        shown = name.replace("\x00", "\\u0000")
                        where = (*where, shown)
                        raise FormatError(_path(memo.key, where), "key contains a NUL character")
                    stack.append((child, (*where, name)))
            elif isinstance(node, list):
                stack.extend((child, (*where, i)) for i, child in enumerate(node))


def _path(key: str, where: tuple[str | int, ...]) -> str:
    return ".".join(str(segment) for segment in (key, *where))


def turn_orphans(
    *,
    context: Context,
    request: Mapping[str, Any],
    project: Project | None = None,
    external_id: str | None = None,
) -> dict[str, str]:
    """Refuse a context with a tool result but no call before it, or a call with no result after
    it: providers reject both, so such a context is a broken agent's. Returns ``{raw field path
    (messages.3.tool_call_id): why}``, empty when the context is whole.

    With the session (``project``, ``external_id``) of a context that
    :func:`turn_request_parse` just gave, only the messages it did not share with the session's
    previous request are scanned.

    A Responses request that continues a stored response (``previous_response_id``,
    ``conversation``) answers calls the provider keeps: its results are not orphans.
    """
    parsed = None
    if project is not None and external_id is not None:
        with _PARSED_LOCK:
            parsed = _PARSED.get((project.pk, external_id))
    if parsed is not None and parsed.memo.messages is context.messages:
        parsed.scan = scan = tool_scan(context.messages, parsed.scan or parsed.base)
    else:
        scan = tool_scan(context.messages)
    found = scan.orphans
    if found.ok:
        return {}
    continues = context.format == "openai-responses" and any(
        request.get(key) for key in ("previous_response_id", "conversation")
    )
    fields: dict[str, str] = {}
    for ref in found.calls:
        fields[_tool_id_path(context, request, ref.index, ref.id, call=True)] = (
            f"tool call {ref.id!r} has no tool result after it"
        )
    if not continues:
        for ref in found.results:
            fields[_tool_id_path(context, request, ref.index, ref.id, call=False)] = (
                f"tool result for {ref.id!r} has no tool call before it"
            )
    return fields


def _tool_id_path(
    context: Context, request: Mapping[str, Any], index: int, tool_id: str, *, call: bool
) -> str:
    """The raw path of the id of tool call or result ``tool_id`` in message ``index``."""
    key = messages_key(context.format)
    items = request.get(key)
    raw = items[index] if isinstance(items, list) and index < len(items) else None
    where = f"{key}.{index}"
    if not isinstance(raw, dict):
        return where
    if context.format == "openai-responses":
        return f"{where}.call_id"
    if context.format == "openai-chat":
        if not call:
            return f"{where}.tool_call_id"
        calls = raw.get("tool_calls")
        for j, item in enumerate(calls if isinstance(calls, list) else []):
            if isinstance(item, dict) and item.get("id") == tool_id:
                return f"{where}.tool_calls.{j}.id"
        return f"{where}.tool_calls"
    block_type, id_key = ("tool_use", "id") if call else ("tool_result", "tool_use_id")
    blocks = raw.get("content")
    for k, block in enumerate(blocks if isinstance(blocks, list) else []):
        if (
            isinstance(block, dict)
            and block.get("type") == block_type
            and block.get(id_key) == tool_id
        ):
            return f"{where}.content.{k}.{id_key}"
    return f"{where}.content"
