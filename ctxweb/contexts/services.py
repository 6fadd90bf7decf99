"""Writes for sessions, turns, messages, artifacts and operations.

Ingestion costs a turn its new content: every message is hashed once, the known ones are found in
one query, only new ones are counted (through the process-wide token cache) and inserted in bulk,
and the turn stores its message ids as a delta on the previous turn.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from compaction.errors import FormatError
from compaction.messages import Context, message_to_dict
from compaction.messages import Message as LibMessage
from compaction.regions import message_regions, sum_regions, system_regions
from compaction.tokens import REQUEST_OVERHEAD
from compaction.usage import normalize_usage
from compaction.windows import DEFAULT_CONTEXT_WINDOW, context_window_for_model
from ctxweb.accounts.models import Project
from ctxweb.contexts import selectors
from ctxweb.contexts.counting import counter_for, encoding_for
from ctxweb.contexts.models import KEYFRAME_EVERY, Session, ToolSet, Turn
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


def _message_rows(
    *, project: Project, messages: Sequence[LibMessage], encoding: str, path: str = "messages"
) -> list[MessageRow]:
    """The stored rows of ``messages``, in order, inserting and counting only the new ones."""
    dicts = [message_to_dict(m) for m in messages]
    texts = [_canonical_json(d) for d in dicts]
    hashes = [_digest(t) for t in texts]
    wanted = set(hashes)
    known = {row.hash: row for row in MessageRow.objects.filter(project=project, hash__in=wanted)}
    counter = counter_for(encoding)
    new: dict[str, MessageRow] = {}
    stale: list[MessageRow] = []
    for index, (message, data, text, digest) in enumerate(
        zip(messages, dicts, texts, hashes, strict=True)
    ):
        row = known.get(digest) or new.get(digest)
        if row is not None and encoding in row.counts:
            continue
        regions = message_regions(message, counter)
        counts = {"total": sum(regions.values()), "regions": regions}
        if row is None:
            _check_text(data, f"{path}.{index}")
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
        MessageRow.objects.bulk_create(new.values(), ignore_conflicts=True)
        for row in MessageRow.objects.filter(project=project, hash__in=new.keys()):
            known[row.hash] = row
    if stale:
        MessageRow.objects.bulk_update(stale, ["counts"])
    return [known[h] for h in hashes]


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


def _delta(previous: list[int], ids: list[int], index: int) -> tuple[int, list[int], bool]:
    """How turn ``index`` stores ``ids``: (shared prefix with the previous turn, tail, keyframe)."""
    if index % KEYFRAME_EVERY == 0 or not previous:
        return 0, ids, True
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
    same ``turn_id`` with another body raises :class:`TurnConflict`.
    """
    body_hash = _digest(_canonical_json(body)) if body is not None else ""
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
        if turn_id is not None:
            existing = Turn.objects.filter(session=session, turn_id=turn_id).first()
            if existing is not None:
                if body_hash and existing.body_hash and existing.body_hash != body_hash:
                    raise TurnConflict(turn_id)
                return IngestResult(existing, False)
        encoding = session.encoding
        rows = _message_rows(project=project, messages=context.messages, encoding=encoding)
        system = _system_row(project=project, context=context, encoding=encoding)
        toolset = _toolset_row(project=project, context=context, encoding=encoding)
        regions = sum_regions(
            [
                {"system": REQUEST_OVERHEAD},
                system.counts[encoding]["regions"] if system else {},
                {"tools": toolset.counts[encoding]} if toolset else {},
                *(row.counts[encoding]["regions"] for row in rows),
            ]
        )
        counted = sum(regions.values())
        reported = normalized["input_tokens"] if normalized else None
        if reported is not None and reported > counted:
            regions["unattributed"] = reported - counted
        total = sum(regions.values())
        index = session.turn_count
        previous = selectors.turn_previous(session=session, index=index)
        ids = [row.id for row in rows]
        shared, tail, keyframe = _delta(
            selectors.turn_message_ids(session=session, index=index - 1) if previous else [],
            ids,
            index,
        )
        turn_events = [dict(e) for e in events]
        if (
            previous is not None
            and previous.total_tokens
            and (total < previous.total_tokens * (1 - COMPACTION_DROP))
            and not any(e.get("type") == "compaction" for e in turn_events)
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
    return IngestResult(turn, True)


__all__ = ["IngestResult", "TurnConflict", "session_get_or_create", "turn_ingest"]
