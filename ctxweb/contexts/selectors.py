"""Reads for sessions, turns, messages, artifacts and operations; every query lives here."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from compaction.messages import Context, ToolDefinition, message_from_dict
from compaction.regions import placeholder_of
from ctxweb.accounts.models import Project
from ctxweb.contexts.models import KEYFRAME_EVERY, Session, ToolSet, Turn
from ctxweb.contexts.models import Message as MessageRow

SESSION_SORTS = {
    "recent": "-last_activity_at",
    "-recent": "last_activity_at",
    "fill": "last_fill",
    "-fill": "-last_fill",
    "turns": "turn_count",
    "-turns": "-turn_count",
    "name": "external_id",
    "-name": "-external_id",
}


def session_list(
    *,
    project: Project,
    search: str = "",
    model: str = "",
    min_fill: float | None = None,
    max_fill: float | None = None,
    sort: str = "recent",
) -> QuerySet[Session]:
    """The project's sessions, filtered and sorted (``recent``, ``fill``, ``turns``, ``name``;
    a leading ``-`` reverses)."""
    sessions = Session.objects.filter(project=project)
    if search:
        sessions = sessions.filter(external_id__icontains=search)
    if model:
        sessions = sessions.filter(model=model)
    if min_fill is not None:
        sessions = sessions.filter(last_fill__gte=min_fill)
    if max_fill is not None:
        sessions = sessions.filter(last_fill__lte=max_fill)
    return sessions.order_by(SESSION_SORTS.get(sort, "-last_activity_at"), "-id")


def session_get(*, project: Project, external_id: str) -> Session | None:
    """The project's session ``external_id``, or None (never another project's)."""
    return Session.objects.filter(project=project, external_id=external_id).first()


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


def turn_list(*, session: Session) -> QuerySet[Turn]:
    """The session's turns, for the chart: no message content loaded."""
    return (
        Turn.objects.filter(session=session)
        .order_by("index")
        .only(
            "index",
            "total_tokens",
            "counted_tokens",
            "regions",
            "reported_input_tokens",
            "events",
            "context_window",
            "max_output_tokens",
            "created_at",
        )
    )


def turn_get(*, session: Session, index: int) -> Turn | None:
    return (
        Turn.objects.filter(session=session, index=index)
        .select_related("system", "toolset")
        .first()
    )


def turn_messages(*, turn: Turn) -> list[MessageRow]:
    """The turn's message rows in order (repeated messages repeated), in two queries."""
    ids = turn_message_ids(session=turn.session, index=turn.index)
    rows = MessageRow.objects.in_bulk(set(ids))
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


def turn_context(*, turn: Turn, rows: list[MessageRow] | None = None) -> Context:
    """The context turn ``turn`` sent, rebuilt from stored messages."""
    rows = turn_messages(turn=turn) if rows is None else rows
    system: tuple[Any, ...] = ()
    if turn.system is not None:
        system = message_from_dict(turn.system.data).parts
    return Context(
        format=turn.session.format,  # type: ignore[arg-type]
        messages=tuple(message_from_dict(row.data) for row in rows),
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


def turn_detail(*, turn: Turn) -> dict[str, Any]:
    """A turn with its messages in order, for the API and the inspector."""
    session = turn.session
    encoding = session.encoding
    rows = turn_messages(turn=turn)
    messages = []
    for position, row in enumerate(rows):
        counts = row.counts.get(encoding, {})
        regions = counts.get("regions", {})
        placeholders = _placeholders(row.data)
        messages.append(
            {
                "position": position,
                "id": row.hash,
                "role": row.role,
                "region": _dominant(regions),
                "regions": regions,
                "tokens": counts.get("total", 0),
                "placeholders": placeholders,
                "artifact_ids": [p["artifact_id"] for p in placeholders if p["artifact_id"]],
                "message": row.data,
            }
        )
    system = None
    if turn.system is not None:
        counts = turn.system.counts.get(encoding, {})
        system = {"tokens": counts.get("total", 0), "message": turn.system.data}
    tools = None
    if turn.toolset is not None:
        tools = {"tokens": turn.toolset.counts.get(encoding, 0), "tools": turn.toolset.data}
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
        "system": system,
        "tools": tools,
        "messages": messages,
        "response": turn.response,
    }
