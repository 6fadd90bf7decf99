"""Reads of replays: a session's list, one by id, and the one JSON shape that the API, the live
events and the page give a replay (:func:`replay_data`)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet

from compaction.messages import Context, Message, ToolDefinition, message_from_dict
from ctxweb.contexts.models import Message as MessageRow
from ctxweb.contexts.models import Replay, Session, ToolSet, Turn
from ctxweb.contexts.selectors.turns import _tools, messages_by_id

#: Turns read per query when a replay loads a session.
TURNS_PER_QUERY = 256

#: A replay's fields in every shape; ``results`` is added in the detail only.
REPLAY_FIELDS = (
    "id",
    "status",
    "done",
    "total",
    "policies",
    "created_by",
    "created_at",
    "started_at",
    "finished_at",
    "error",
)


def replay_list(*, session: Session) -> QuerySet[Replay]:
    """The session's replays, newest first, without their results (a list never loads them:
    a 1,000-turn replay's results weigh megabytes)."""
    return (
        Replay.objects.filter(session=session)
        .select_related("created_by")
        .defer("results")
        .order_by("-created_at", "-pk")
    )


def replay_get(*, session: Session, replay_id: int) -> Replay | None:
    """The session's replay ``replay_id`` with its results, or None (never another session's)."""
    return Replay.objects.filter(session=session, pk=replay_id).select_related("created_by").first()


def replay_active_count(*, project_id: int) -> int:
    """How many of the project's replays are queued or running."""
    return Replay.objects.filter(
        session__project_id=project_id,
        status__in=[Replay.Status.QUEUED, Replay.Status.RUNNING],
    ).count()


def _when(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


def _creator(replay: Replay) -> str | None:
    if replay.key_name:
        return f"key {replay.key_name}"
    if replay.created_by_id is not None and replay.created_by is not None:
        return replay.created_by.get_username()
    return None


def replay_data(replay: Replay, *, results: bool = False) -> dict[str, Any]:
    """A replay as JSON-ready data: ``id, status, done, total, policies, created_by,
    created_at, started_at, finished_at, error`` and, with ``results``, ``results`` (one entry a
    policy, None until that column finished). ``error`` is None unless it failed."""
    out: dict[str, Any] = {
        "id": replay.pk,
        "status": replay.status,
        "done": replay.done,
        "total": replay.total,
        "policies": list(replay.policies or []),
        "created_by": _creator(replay),
        "created_at": _when(replay.created_at),
        "started_at": _when(replay.started_at),
        "finished_at": _when(replay.finished_at),
        "error": replay.error or None,
    }
    if results:
        out["results"] = list(replay.results or [])
    return out


@dataclass(frozen=True, slots=True)
class RecordedTurn:
    """A stored turn as a replay walks it."""

    index: int
    context: Context
    window: int
    max_output_tokens: int | None
    reported_input_tokens: int | None
    #: the stored total: ctxweb's count at ingest plus what the provider reported beyond it
    total_tokens: int


def replay_turn_contexts(
    *, session: Session, turns: int | None = None, chunk: int = TURNS_PER_QUERY
) -> Iterator[RecordedTurn]:
    """Every turn of the session in order (the first ``turns`` only, when given), its context
    rebuilt as :func:`~ctxweb.contexts.selectors.turn_context` does, with its window, max output
    tokens, the input tokens the provider reported and the stored total.

    Turns are read ``chunk`` at a time with their message ids (keyframes and deltas); each
    message, system prompt and tool set is read and parsed once, and the contexts of all the
    turns share them: a 1,000-turn session costs a few queries a chunk, not a parse of every
    message of every turn.
    """
    messages: dict[int, Message] = {}
    systems: dict[int, tuple[Any, ...]] = {}
    toolsets: dict[int, tuple[ToolDefinition, ...]] = {}
    ids: list[int] = []
    last = -1
    left = turns
    while left is None or left > 0:
        size = chunk if left is None else min(chunk, left)
        rows = list(
            Turn.objects.filter(session=session, index__gt=last)
            .order_by("index")
            .values_list(
                "index",
                "shared",
                "tail",
                "system_id",
                "toolset_id",
                "max_output_tokens",
                "context_window",
                "request_extra",
                "reported_input_tokens",
                "total_tokens",
            )[:size]
        )
        if not rows:
            return
        lists: list[list[int]] = []
        for _, shared, tail, *_rest in rows:
            ids = ids[:shared] + list(tail)
            lists.append(ids)
        wanted = {i for found in lists for i in found} - messages.keys()
        for pk, row in messages_by_id(ids=wanted).items():
            messages[pk] = message_from_dict(row.data)
        new_systems = {row[3] for row in rows if row[3] is not None} - systems.keys()
        for pk, data in MessageRow.objects.filter(pk__in=new_systems).values_list("pk", "data"):
            systems[pk] = message_from_dict(data).parts
        new_tools = {row[4] for row in rows if row[4] is not None} - toolsets.keys()
        for toolset in ToolSet.objects.filter(pk__in=new_tools):
            toolsets[toolset.pk] = _tools(toolset)
        for (
            (index, _, _, system, tools, max_output, window, extra, reported, total),
            found,
        ) in zip(rows, lists, strict=True):
            context = Context(
                format=session.format,  # type: ignore[arg-type]
                messages=tuple(messages[i] for i in found),
                system=systems[system] if system is not None else (),
                tools=toolsets[tools] if tools is not None else (),
                max_output_tokens=max_output,
                extra=extra,
            )
            yield RecordedTurn(index, context, window, max_output, reported, total)
        last = rows[-1][0]
        if left is not None:
            left -= len(rows)
