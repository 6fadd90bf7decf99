"""Writes for sessions, turns, messages, artifacts and operations.

Ingestion costs a turn its new content: every message is hashed once, the known ones are found in
one query, only new ones are counted (through the process-wide token cache) and inserted in bulk,
and the turn stores its message ids as a delta on the previous turn.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, is_dataclass
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from compaction.errors import FormatError
from compaction.messages import Context, TextPart, ToolCallPart, ToolResultPart, message_to_dict
from compaction.messages import Message as LibMessage
from compaction.messages.incremental import ParseMemo, parse_incremental
from compaction.regions import message_regions, sum_regions, system_regions
from compaction.tokens import REQUEST_OVERHEAD
from compaction.usage import normalize_usage
from compaction.windows import DEFAULT_CONTEXT_WINDOW, context_window_for_model
from ctxweb.accounts.models import Project
from ctxweb.contexts import events as live_events
from ctxweb.contexts import selectors
from ctxweb.contexts.counting import counter_for, encoding_for
from ctxweb.contexts.models import KEYFRAME_EVERY, ManagedContext, Session, ToolSet, Turn
from ctxweb.contexts.models import Message as MessageRow

#: A turn whose total drops by more than this share from the previous turn is a compaction event.
COMPACTION_DROP = 0.30


class TurnConflict(Exception):
    """A ``turn_id`` was reused with a different body."""


@dataclass(frozen=True)
class IngestResult:
    turn: Turn
    created: bool


def _canonical_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _check_text(value: Any, path: str) -> None:
    """Reject what databases cannot store: NUL characters and lone surrogates in any string."""
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
            stack.extend((v, f"{where}.{k}") for k, v in item.items())
        elif isinstance(item, list | tuple):
            stack.extend((v, f"{where}.{i}") for i, v in enumerate(item))


def session_get_or_create(
    *,
    project: Project,
    external_id: str,
    format: str,
    model: str | None,
    context_window: int | None = None,
    output_reserve: int | None = None,
    source: str = "api",
) -> Session:
    """The project's session ``external_id``, created on first use (locked for this transaction).

    A new session's window is the request's, else the model table's, else the default.
    """
    session = (
        Session.objects.select_for_update().filter(project=project, external_id=external_id).first()
    )
    if session is not None:
        return session
    encoding, approximate = encoding_for(model)
    try:
        with transaction.atomic():
            return Session.objects.create(
                project=project,
                external_id=external_id,
                format=format,
                model=model or "",
                context_window=context_window
                or context_window_for_model(model)
                or DEFAULT_CONTEXT_WINDOW,
                output_reserve=output_reserve or 0,
                encoding=encoding,
                approximate=approximate,
                source=source,
            )
    except IntegrityError:  # created meanwhile by a concurrent request
        return Session.objects.select_for_update().get(project=project, external_id=external_id)


#: Sessions' latest request bodies as this process parsed them (a bounded LRU), by project id and
#: external id: a turn parses only the messages its body does not share with the previous one.
_PARSED: OrderedDict[tuple[int, str], ParseMemo] = OrderedDict()
_PARSED_MAX = 256
#: The messages the memos may hold in all (each holds its messages' parsed and raw forms).
_PARSED_MAX_MESSAGES = 200_000
_PARSED_LOCK = threading.Lock()


def turn_request_parse(
    *, project: Project, external_id: str, format: str, request: Mapping[str, Any]
) -> Context:
    """Parse the request body of a turn of session ``external_id``, exactly as
    :func:`compaction.messages.parse` does, reusing this process's parse of the session's
    previous body for the messages this one repeats.

    Safe whatever the memo holds (another process's turns, a retry, a failed request, another
    format): messages are compared with the previous body's, never assumed. The reused messages
    are the very objects of the previous parse, so :func:`turn_ingest` recognizes them at once.

    Raises:
        FormatError: as ``parse`` (the memo is left as it was).
    """
    key = (project.pk, external_id)
    with _PARSED_LOCK:
        previous = _PARSED.get(key)
    context, memo = parse_incremental(format, request, previous)
    with _PARSED_LOCK:
        _PARSED[key] = memo
        _PARSED.move_to_end(key)
        held = sum(len(m.raw) for m in _PARSED.values())
        while len(_PARSED) > 1 and (len(_PARSED) > _PARSED_MAX or held > _PARSED_MAX_MESSAGES):
            _, dropped = _PARSED.popitem(last=False)
            held -= len(dropped.raw)
    return context


@dataclass
class _Recent:
    """What this process stored for a session's latest turn, to ingest the next one cheaply.

    Valid only while that turn is the session's previous turn: it is looked up by the previous
    turn's primary key *and* creation time, so a turn rolled back (whose key SQLite may reuse) or
    written by another process never matches and the slow path runs instead.
    """

    turn_key: tuple[int, Any]
    messages: tuple[LibMessage, ...]
    hashes: list[str]
    ids: list[int]
    regions: list[Mapping[str, int]]
    #: cumulative[i]: the regions of messages[:i] added up.
    cumulative: list[dict[str, int]]
    system: tuple[Any, ...]
    system_row: MessageRow | None
    tools: tuple[Any, ...]
    toolset: ToolSet | None


#: Sessions' latest turns as this process stored them (a bounded LRU).
_RECENT: OrderedDict[int, _Recent] = OrderedDict()
_RECENT_MAX = 64
_RECENT_LOCK = threading.Lock()


def _recent_get(session_id: int, turn_key: tuple[int, Any] | None) -> _Recent | None:
    if turn_key is None:
        return None
    with _RECENT_LOCK:
        recent = _RECENT.get(session_id)
        if recent is None or recent.turn_key != turn_key:
            return None
        _RECENT.move_to_end(session_id)
        return recent


def _recent_put(session_id: int, recent: _Recent) -> None:
    with _RECENT_LOCK:
        _RECENT[session_id] = recent
        _RECENT.move_to_end(session_id)
        while len(_RECENT) > _RECENT_MAX:
            _RECENT.popitem(last=False)


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


@dataclass
class _Messages:
    hashes: list[str]
    ids: list[int]
    regions: list[Mapping[str, int]]
    cumulative: list[dict[str, int]]


def _message_rows(
    *,
    project: Project,
    messages: Sequence[LibMessage],
    encoding: str,
    recent: _Recent | None = None,
    path: str = "messages",
) -> _Messages:
    """The ids and regions of ``messages``, in order, inserting and counting only the new ones.

    The messages that ``recent`` (the previous turn) starts with are taken from it without
    serializing them; the others are hashed, and those the previous turn does not hold are looked
    up in one query.
    """
    start = 0
    hashes: list[str] = []
    ids: list[int] = []
    regions: list[Mapping[str, int]] = []
    cumulative: list[dict[str, int]] = [_zero_regions()]
    cached: dict[str, tuple[int, Mapping[str, int]]] = {}
    if recent is not None:
        limit = min(len(messages), len(recent.messages))
        # Messages parsed incrementally (turn_request_parse) are the previous turn's own objects.
        while start < limit and messages[start] is recent.messages[start]:
            start += 1
        while start < limit and _same_message(messages[start], recent.messages[start]):
            start += 1
        hashes = recent.hashes[:start]
        ids = recent.ids[:start]
        regions = recent.regions[:start]
        cumulative = recent.cumulative[: start + 1]
    rest = messages[start:]
    dicts = [message_to_dict(m) for m in rest]
    texts = [_canonical_json(d) for d in dicts]
    digests = [_digest(t) for t in texts]
    if recent is not None:
        cached = _recent_rows(recent, digests)
    wanted = {h for h in digests if h not in cached}
    known = _rows_by_hash(project, wanted)
    counter = counter_for(encoding)
    new: dict[str, MessageRow] = {}
    stale: list[MessageRow] = []
    for offset, (message, data, text, digest) in enumerate(
        zip(rest, dicts, texts, digests, strict=True)
    ):
        if digest in cached:
            continue
        row = known.get(digest) or new.get(digest)
        if row is not None and encoding in row.counts:
            continue
        counted = message_regions(message, counter)
        counts = {"total": sum(counted.values()), "regions": counted}
        if row is None:
            _check_text(data, f"{path}.{start + offset}")
            new[digest] = MessageRow(
                project=project,
                hash=digest,
                role=message.role,
                data=data,
                size=len(text.encode("utf-8")),
                counts={encoding: counts},
            )
        else:  # known, but never counted with this encoding
            row.counts = {**row.counts, encoding: counts}
            stale.append(row)
    if new:
        # One global order (by hash): concurrent turns inserting the same new rows wait for each
        # other instead of deadlocking (each holding a row the other needs).
        rows = sorted(new.values(), key=lambda row: row.hash)
        MessageRow.objects.bulk_create(rows, ignore_conflicts=True)
        known.update(_rows_by_hash(project, set(new)))
    if stale:
        MessageRow.objects.bulk_update(sorted(stale, key=lambda row: row.pk), ["counts"])
    for digest in digests:
        if digest in cached:
            row_id, row_regions = cached[digest]
        else:
            row = known[digest]
            row_id, row_regions = row.id, row.counts[encoding]["regions"]
        hashes.append(digest)
        ids.append(row_id)
        regions.append(row_regions)
        total = dict(cumulative[-1])
        for name, tokens in row_regions.items():
            total[name] = total.get(name, 0) + tokens
        cumulative.append(total)
    return _Messages(hashes, ids, regions, cumulative)


def _recent_rows(recent: _Recent, digests: list[str]) -> dict[str, tuple[int, Mapping[str, int]]]:
    """The ids and regions of the messages of ``digests`` that the previous turn holds."""
    if len(digests) > 16:  # a large tail (after a compaction): index the previous turn
        return {
            h: (i, r) for h, i, r in zip(recent.hashes, recent.ids, recent.regions, strict=True)
        }
    found: dict[str, tuple[int, Mapping[str, int]]] = {}
    for digest in digests:  # a few new messages: a scan each, in C
        try:
            at = recent.hashes.index(digest)
        except ValueError:
            continue
        found[digest] = (recent.ids[at], recent.regions[at])
    return found


def _rows_by_hash(project: Project, hashes: set[str]) -> dict[str, MessageRow]:
    """The project's rows of ``hashes``, without their content."""
    if not hashes:
        return {}
    rows = MessageRow.objects.filter(project=project, hash__in=hashes).only("id", "hash", "counts")
    return {row.hash: row for row in rows}


def _zero_regions() -> dict[str, int]:
    return sum_regions([])


def _system_row(*, project: Project, context: Context, encoding: str) -> MessageRow | None:
    if not context.system:
        return None
    parts = tuple(context.system)
    # A top-level system prompt is stored like a message, marked so it is never taken for one.
    data = message_to_dict(LibMessage("system", parts, extra={"ctxweb_top_level_system": True}))
    text = _canonical_json(data)
    digest = _digest(text)
    row = MessageRow.objects.filter(project=project, hash=digest).first()
    if row is not None and encoding in row.counts:
        return row
    regions = system_regions(parts, counter_for(encoding))
    counts = {"total": sum(regions.values()), "regions": regions}
    if row is None:
        _check_text(data, "system")
        row, _ = MessageRow.objects.get_or_create(
            project=project,
            hash=digest,
            defaults={
                "role": "system",
                "data": data,
                "size": len(text.encode()),
                "counts": {encoding: counts},
            },
        )
    if encoding not in row.counts:
        row.counts = {**row.counts, encoding: counts}
        row.save(update_fields=["counts"])
    return row


def _toolset_row(*, project: Project, context: Context, encoding: str) -> ToolSet | None:
    if not context.tools:
        return None
    data = [
        {
            "name": t.name,
            "description": t.description,
            "parameters": dict(t.parameters),
            "extra": dict(t.extra),
        }
        for t in context.tools
    ]
    text = _canonical_json(data)
    digest = _digest(text)
    row = ToolSet.objects.filter(project=project, hash=digest).first()
    if row is None:
        _check_text(data, "tools")
        row, _ = ToolSet.objects.get_or_create(
            project=project, hash=digest, defaults={"data": data, "counts": {}}
        )
    if encoding not in row.counts:
        row.counts = {**row.counts, encoding: counter_for(encoding).count_tools(context.tools)}
        row.save(update_fields=["counts"])
    return row


def _body_digest(body: Any, context: Context, hashes: Sequence[str]) -> str:
    """The idempotency hash of a posted body: the SHA-256 of its canonical JSON, with the request's
    messages replaced by their hashes (``hashes``, which ingestion computes anyway), so hashing
    costs the body's small parts only. Bodies are equal exactly when their hashes are: a request
    renders back from its parsed messages exactly, so their hashes stand for them.
    """
    key = "input" if context.format == "openai-responses" else "messages"
    request = body.get("request") if isinstance(body, Mapping) else None
    items = request.get(key) if isinstance(request, Mapping) else None
    if not isinstance(items, list) or len(items) != len(hashes):  # not a parsed request's body
        return _digest(_canonical_json(body))
    assert isinstance(request, Mapping)
    short = {**body, "request": {**request, key: {"ctxweb:message_hashes": list(hashes)}}}
    return _digest(_canonical_json(short))


def _same_body(stored: str, body: Any, context: Context) -> bool:
    """Whether ``body`` is the body hashed as ``stored`` (a retry; the slow path is fine)."""
    hashes = [_digest(_canonical_json(message_to_dict(m))) for m in context.messages]
    # Turns stored before bodies were hashed by parts hold the hash of the whole body.
    return stored in (_body_digest(body, context, hashes), _digest(_canonical_json(body)))


def _delta(previous: list[int], ids: list[int], index: int) -> tuple[int, list[int], bool]:
    """How turn ``index`` stores ``ids``: (shared prefix with the previous turn, tail, keyframe)."""
    if index % KEYFRAME_EVERY == 0 or not previous:
        return 0, ids, True
    shared = min(len(previous), len(ids))
    if previous[:shared] != ids[:shared]:  # compared in C; walked only when they differ
        shared = 0
        for a, b in zip(previous, ids, strict=False):
            if a != b:
                break
            shared += 1
    if shared == 0:
        return 0, ids, True
    return shared, ids[shared:], False


def turn_ingest(
    *,
    project: Project,
    external_id: str,
    context: Context,
    model: str | None = None,
    response: Any = None,
    usage: Mapping[str, Any] | None = None,
    turn_id: str | None = None,
    body: Any = None,
    context_window: int | None = None,
    unknown: Sequence[str] = (),
    events: Sequence[Mapping[str, Any]] = (),
    source: str = "api",
) -> IngestResult:
    """Store one model call of session ``external_id`` (created on first use), whole or not at all.

    A retry with the same ``turn_id`` and body returns the stored turn (``created`` False); the
    same ``turn_id`` with another body raises :class:`TurnConflict`. ``body`` is the posted body
    (``{"request": ..., ...}``) that ``context`` was parsed from.
    """
    # Only a turn with a turn_id can be retried: hash the body only then.
    hashed = body is not None and turn_id is not None
    normalized = normalize_usage(usage) if usage else None
    with transaction.atomic():
        session = session_get_or_create(
            project=project,
            external_id=external_id,
            format=context.format,
            model=model or str(context.extra.get("model") or ""),
            context_window=context_window,
            output_reserve=context.max_output_tokens,
            source=source,
        )
        encoding = session.encoding
        index = session.turn_count
        # One query finds both the turn this one may retry and the previous turn.
        wanted = Q(index=index - 1) if index > 0 else Q(pk__in=[])
        if turn_id is not None:
            wanted |= Q(turn_id=turn_id)
        found = (
            list(
                Turn.objects.filter(wanted, session=session).annotate(
                    # Whether an operation made a context from this turn: only then may the new
                    # turn continue from it (operations.turn_operation_event), saving its queries.
                    operated=Exists(
                        ManagedContext.objects.filter(
                            session=OuterRef("session"),
                            turn_index=OuterRef("index"),
                            operation__isnull=False,
                        )
                    )
                )
            )
            if index > 0 or turn_id is not None
            else []
        )
        existing = next((t for t in found if turn_id is not None and t.turn_id == turn_id), None)
        if existing is not None:
            if hashed and existing.body_hash and not _same_body(existing.body_hash, body, context):
                raise TurnConflict(turn_id)
            return IngestResult(existing, False)
        previous = next((t for t in found if t.index == index - 1), None)
        recent = _recent_get(
            session.pk, (previous.pk, previous.created_at) if previous is not None else None
        )
        stored = _message_rows(
            project=project, messages=context.messages, encoding=encoding, recent=recent
        )
        body_hash = _body_digest(body, context, stored.hashes) if hashed else ""
        system_parts, tools = tuple(context.system), tuple(context.tools)
        if recent is not None and _typed_equal(system_parts, recent.system):
            system = recent.system_row
        else:
            system = _system_row(project=project, context=context, encoding=encoding)
        if recent is not None and _typed_equal(tools, recent.tools):
            toolset = recent.toolset
        else:
            toolset = _toolset_row(project=project, context=context, encoding=encoding)
        regions = sum_regions(
            [
                {"system": REQUEST_OVERHEAD},
                system.counts[encoding]["regions"] if system else {},
                {"tools": toolset.counts[encoding]} if toolset else {},
                stored.cumulative[-1],
            ]
        )
        counted = sum(regions.values())
        reported = normalized["input_tokens"] if normalized else None
        if reported is not None and reported > counted:
            regions["unattributed"] = reported - counted
        total = sum(regions.values())
        ids = stored.ids
        if recent is not None:
            previous_ids = recent.ids
        elif previous is not None:
            previous_ids = selectors.turn_message_ids(session=session, index=index - 1)
        else:
            previous_ids = []
        shared, tail, keyframe = _delta(previous_ids, ids, index)
        turn_events = [dict(e) for e in events]
        from ctxweb.contexts import operations  # builds on this module's helpers

        applied, applied_event = (
            operations.turn_operation_event(
                session=session,
                index=index,
                message_ids=ids,
                system_id=system.id if system else None,
            )
            if previous is not None and previous.operated
            else (None, None)
        )
        if applied_event is not None:
            turn_events.append(applied_event)
        if (
            previous is not None
            and previous.total_tokens
            and (total < previous.total_tokens * (1 - COMPACTION_DROP))
            and not any(e.get("type") in ("compaction", "operation") for e in turn_events)
        ):
            turn_events.append(
                {
                    "type": "compaction",
                    "source": "detected",
                    "tokens_before": previous.total_tokens,
                    "tokens_after": total,
                }
            )
        window = context_window or session.context_window
        extra = dict(context.extra)
        _check_text(extra, "request")
        if response is not None:
            _check_text(response, "response")
        turn = Turn.objects.create(
            session=session,
            index=index,
            turn_id=turn_id,
            body_hash=body_hash,
            shared=shared,
            tail=tail,
            keyframe=keyframe,
            message_count=len(ids),
            system=system,
            toolset=toolset,
            unknown=sorted(set(unknown)),
            request_extra=extra,
            max_output_tokens=context.max_output_tokens,
            context_window=window,
            total_tokens=total,
            counted_tokens=counted,
            regions=regions,
            reported_input_tokens=reported,
            usage=normalized,
            response=response,
            events=turn_events,
            operation=applied,
        )
        _recent_put(
            session.pk,
            _Recent(
                turn_key=(turn.pk, turn.created_at),
                messages=tuple(context.messages),
                hashes=stored.hashes,
                ids=ids,
                regions=stored.regions,
                cumulative=stored.cumulative,
                system=system_parts,
                system_row=system,
                tools=tools,
                toolset=toolset,
            ),
        )
        reserve = context.max_output_tokens or session.output_reserve
        usable = max(1, window - reserve)
        session.turn_count = index + 1
        session.last_total_tokens = total
        session.last_fill = total / usable
        session.last_activity_at = timezone.now()
        session.compaction_count += sum(1 for e in turn_events if e.get("type") == "compaction")
        if context.max_output_tokens:
            session.output_reserve = context.max_output_tokens
        session.save(
            update_fields=[
                "turn_count",
                "last_total_tokens",
                "last_fill",
                "last_activity_at",
                "compaction_count",
                "output_reserve",
            ]
        )
        transaction.on_commit(lambda: live_events.turn_created(turn))
        operations.operation_auto_after_turn(
            session=session, turn=turn, previous_total=previous.total_tokens if previous else None
        )
    return IngestResult(turn, True)


__all__ = [
    "IngestResult",
    "TurnConflict",
    "session_get_or_create",
    "turn_ingest",
    "turn_request_parse",
]
