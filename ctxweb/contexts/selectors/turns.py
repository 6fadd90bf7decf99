"""Reads of turns and their messages: a turn's ids, its context rebuilt from stored rows, the
inspector's detail, the chart's list."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from django.db import connections
from django.db.models import QuerySet
from django.db.models.expressions import RawSQL
from django.db.models.fields.json import KeyTransform

from compaction.messages import Context, ToolDefinition, message_from_dict, message_identity
from compaction.messages import Message as LibMessage
from compaction.regions import find_artifact_pointers as find_artifact_pointers  # for the pages
from compaction.regions import placeholder_of
from ctxweb.contexts.models import (
    KEYFRAME_EVERY,
    Session,
    ToolSet,
    Turn,
)
from ctxweb.contexts.models import Message as MessageRow


def turn_previous(*, session: Session, index: int) -> Turn | None:
    """The turn before ``index``, or None for the first."""
    if index <= 0:
        return None
    return (
        Turn.objects.filter(session=session, index=index - 1)
        .only("id", "index", "total_tokens")
        .first()
    )


def turn_message_ids(*, session: Session, index: int) -> list[int]:
    """Turn ``index``'s message ids, rebuilt from its keyframe and deltas in one query."""
    if index < 0:
        return []
    start = index - index % KEYFRAME_EVERY
    ids: list[int] = []
    rows = (
        Turn.objects.filter(session=session, index__gte=start, index__lte=index)
        .order_by("index")
        .values_list("shared", "tail")
    )
    for shared, tail in rows:
        ids = ids[:shared] + list(tail)
    return ids


def turn_message_ids_after(
    *, session: Session, index: int, known: tuple[int, int, Any], ids: list[int]
) -> list[int] | None:
    """Turn ``index``'s message ids, from those of an earlier turn (``known``: its index, primary
    key and creation time; ``ids``: its message ids) and the deltas of the turns after it, in one
    query over those turns only. None when that earlier turn is not stored as said (rolled back,
    or the session was replaced).
    """
    since = known[0]
    rows = list(
        Turn.objects.filter(session=session, index__gte=since, index__lte=index)
        .order_by("index")
        .values_list("index", "pk", "created_at", "shared", "tail")
    )
    return turn_message_ids_rebuilt(rows, index=index, known=known, ids=ids)


def turn_message_ids_rebuilt(
    rows: Sequence[tuple[int, int, Any, int, list[int]]],
    *,
    index: int,
    known: tuple[int, int, Any],
    ids: list[int],
) -> list[int] | None:
    """Turn ``index``'s message ids from ``rows``, the (index, primary key, creation time,
    shared, tail) of the session's turns from ``known``'s index to ``index`` at least, in order,
    as :func:`turn_message_ids_after` reads them (or a statement sent with the session's lock);
    None when the earlier turn is not stored as ``known`` says."""
    rows = [row for row in rows if row[0] <= index]
    if not rows or tuple(rows[0][:3]) != tuple(known) or rows[-1][0] != index:
        return None
    current = list(ids)
    for _, _, _, shared, tail in rows[1:]:
        current = current[:shared] + list(tail)
    return current


def turn_list(*, session: Session, after: int | None = None) -> QuerySet[Turn]:
    """The session's turns (those whose index is greater than ``after``, when given), for the
    chart: no message content loaded."""
    turns = Turn.objects.filter(session=session)
    if after is not None:
        turns = turns.filter(index__gt=after)
    return turns.order_by("index").only(*Turn.CHART_FIELDS)


def turn_get(*, session: Session, index: int) -> Turn | None:
    return (
        Turn.objects.filter(session=session, index=index)
        .select_related("system", "toolset")
        .first()
    )


def _one_of(ids: set[int]) -> Any:
    """``ids`` as the right-hand side of an ``id__in`` lookup, as ONE query parameter on SQLite
    (a JSON array) and PostgreSQL (an array): a plain list takes a parameter per id, and
    ``in_bulk`` splits it past SQLite's 999, so the number of queries would grow with the ids."""
    values = sorted(ids)
    vendor = connections[MessageRow.objects.db].vendor
    if vendor == "sqlite":
        return RawSQL("SELECT value FROM json_each(%s)", [json.dumps(values)])
    if vendor == "postgresql":
        return RawSQL("SELECT unnest(%s::bigint[])", [values])
    return values


def messages_by_id(*, ids: Iterable[int]) -> dict[int, MessageRow]:
    """Message rows by id, in one query however many ids (none without ids)."""
    wanted = set(ids)
    if not wanted:
        return {}
    return {row.pk: row for row in MessageRow.objects.filter(pk__in=_one_of(wanted))}


def message_data_by_id(*, ids: Iterable[int]) -> dict[int, dict[str, Any]]:
    """Messages' canonical dicts (``data``) by id, nothing else of their rows: one query however
    many ids (none without ids)."""
    wanted = set(ids)
    if not wanted:
        return {}
    return dict(MessageRow.objects.filter(pk__in=_one_of(wanted)).values_list("pk", "data"))


def turn_message_hashes(*, session: Session, index: int) -> list[str]:
    """Turn ``index``'s messages by hash (``compaction.messages.message_hash``, stored with each
    row), in order: two queries, no message content loaded or parsed."""
    ids = turn_message_ids(session=session, index=index)
    if not ids:
        return []
    hashes = dict(MessageRow.objects.filter(pk__in=_one_of(set(ids))).values_list("pk", "hash"))
    return [hashes[i] for i in ids]


def turn_system_identity(*, session: Session, index: int) -> str | None:
    """The identity of turn ``index``'s top-level system prompt (``message_identity`` of a system
    message holding its parts, as the proxy reads a request's), or None when it sent none: one
    query."""
    row = (
        Turn.objects.filter(session=session, index=index)
        .select_related("system")
        .only("system__data")
        .first()
    )
    if row is None or row.system is None:
        return None
    return message_identity(LibMessage("system", message_from_dict(row.system.data).parts))


def turn_message_identities(*, session: Session, index: int) -> list[str]:
    """Turn ``index``'s messages by identity (``compaction.messages.message_identity``: what each
    says, whatever its cache markers or key order), in order: two queries, every message of the
    turn loaded and read (for managed mode's prefix match, once per applied operation)."""
    ids = turn_message_ids(session=session, index=index)
    if not ids:
        return []
    rows = messages_by_id(ids=ids)
    identities = {pk: message_identity(message_from_dict(row.data)) for pk, row in rows.items()}
    return [identities[i] for i in ids]


def message_tokens(*, ids: Iterable[int], encoding: str) -> dict[int, int]:
    """Each message's tokens in ``encoding`` (0 when not counted in it), read by the database
    without loading content or counts: one query however many ids (none without ids)."""
    wanted = set(ids)
    if not wanted:
        return {}
    total = KeyTransform("total", KeyTransform(encoding, "counts"))
    rows = MessageRow.objects.filter(pk__in=_one_of(wanted)).values_list("pk", total)
    return {pk: tokens if isinstance(tokens, int) else 0 for pk, tokens in rows}


def message_secrets(*, ids: Sequence[int]) -> list[dict[str, Any]]:
    """The secrets found in the messages ``ids`` (a turn's, in order), each with its
    ``position``: one query, reading only the rows that hold some."""
    wanted = set(ids)
    if not wanted:
        return []
    flagged = dict(
        MessageRow.objects.filter(pk__in=_one_of(wanted))
        .exclude(secrets=[])
        .values_list("pk", "secrets")
    )
    if not flagged:
        return []
    return [
        {**finding, "position": position}
        for position, message_id in enumerate(ids)
        for finding in flagged.get(message_id, ())
    ]


def turn_messages(*, turn: Turn) -> list[MessageRow]:
    """The turn's message rows in order (repeated messages repeated), in two queries."""
    ids = turn_message_ids(session=turn.session, index=turn.index)
    rows = messages_by_id(ids=ids)
    return [rows[i] for i in ids]


def _tools(toolset: ToolSet | None) -> tuple[ToolDefinition, ...]:
    if toolset is None:
        return ()
    return tuple(
        ToolDefinition(
            name=t["name"],
            description=t.get("description", ""),
            parameters=t.get("parameters", {}),
            extra=t.get("extra", {}),
        )
        for t in toolset.data
    )


def turn_context(
    *,
    turn: Turn,
    rows: list[MessageRow] | None = None,
    messages: Sequence[LibMessage] | None = None,
) -> Context:
    """The context turn ``turn`` sent, rebuilt from stored messages (``messages``: already
    read from them, in order)."""
    if messages is None:
        rows = turn_messages(turn=turn) if rows is None else rows
        messages = [message_from_dict(row.data) for row in rows]
    system: tuple[Any, ...] = ()
    if turn.system is not None:
        system = message_from_dict(turn.system.data).parts
    return Context(
        format=turn.session.format,  # type: ignore[arg-type]
        messages=tuple(messages),
        system=system,
        tools=_tools(turn.toolset),
        max_output_tokens=turn.max_output_tokens,
        extra=turn.request_extra,
    )


def _dominant(regions: dict[str, int]) -> str:
    return max(regions.items(), key=lambda item: item[1])[0] if regions else "user"


def _placeholders(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Placeholders in a stored message's text (cleared, truncated, externalized)."""
    found: list[dict[str, Any]] = []
    stack: list[Any] = list(data.get("parts", []))
    while stack:
        part = stack.pop(0)
        if not isinstance(part, dict):
            continue
        if isinstance(part.get("text"), str):
            placeholder = placeholder_of(part["text"])
            if placeholder is not None:
                found.append(
                    {
                        "kind": placeholder.kind,
                        "source": placeholder.source,
                        "artifact_id": placeholder.artifact_id,
                    }
                )
        stack.extend(part.get("content", []) if isinstance(part.get("content"), list) else [])
    return found


def message_detail(*, position: int, row: MessageRow, encoding: str) -> dict[str, Any]:
    """A message at ``position`` of a turn with its region, tokens and placeholders."""
    counts = row.counts.get(encoding, {})
    regions = counts.get("regions", {})
    placeholders = _placeholders(row.data)
    return {
        "position": position,
        "id": row.hash,
        "role": row.role,
        "region": _dominant(regions),
        "regions": regions,
        "tokens": counts.get("total", 0),
        "placeholders": placeholders,
        "artifact_ids": [p["artifact_id"] for p in placeholders if p["artifact_id"]],
        "message": row.data,
        "secrets": row.secrets,
    }


def turn_detail(*, turn: Turn, messages: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A turn with its messages in order (:func:`message_detail`), for the API and the
    inspector; ``messages`` when given stand for them (the inspector's one page of them)."""
    session = turn.session
    encoding = session.encoding
    if messages is None:
        messages = [
            message_detail(position=position, row=row, encoding=encoding)
            for position, row in enumerate(turn_messages(turn=turn))
        ]
    system = None
    secrets: list[dict[str, Any]] = []
    if turn.system is not None:
        counts = turn.system.counts.get(encoding, {})
        system = {"tokens": counts.get("total", 0), "message": turn.system.data}
        secrets += [{**s, "position": None} for s in turn.system.secrets]
    for message in messages:
        secrets += [{**s, "position": message["position"]} for s in message.get("secrets", ())]
    tools = None
    if turn.toolset is not None:
        tools = {"tokens": turn.toolset.counts.get(encoding, 0), "tools": turn.toolset.data}
        secrets += [{**s, "position": None} for s in turn.toolset.secrets]
    # The call's own: its options' and its response's, recorded with the turn.
    secrets += [s for s in turn.secrets if s.get("field", "").startswith(("request", "response"))]
    return {
        "session": session.external_id,
        "index": turn.index,
        "total_tokens": turn.total_tokens,
        "counted_tokens": turn.counted_tokens,
        "regions": turn.regions,
        "context_window": turn.context_window,
        "max_output_tokens": turn.max_output_tokens,
        "reported_input_tokens": turn.reported_input_tokens,
        "usage": turn.usage,
        "events": turn.events,
        "unknown": turn.unknown,
        "created_at": turn.created_at,
        "occurred_at": turn.occurred_at,
        "system": system,
        "tools": tools,
        "messages": messages,
        "secrets": secrets,
        "response": turn.response,
    }


def turn_latest(*, session: Session) -> Turn | None:
    """The session's latest turn, or None before the first."""
    return (
        Turn.objects.filter(session=session)
        .order_by("-index")
        .select_related("system", "toolset", "session")
        .first()
    )
