"""Reads of managed contexts: the latest version, one version, a version's context, and what the
agent should send next (:func:`managed_context`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.urls import reverse

from compaction.messages import Context, message_from_dict, render
from compaction.regions import part_placeholder
from ctxweb.contexts.models import (
    ManagedContext,
    Session,
    Turn,
)
from ctxweb.contexts.selectors.turns import _tools, messages_by_id, turn_context, turn_latest


def managed_context_latest(*, session: Session) -> ManagedContext | None:
    """The session's latest managed context version, or None before the first operation."""
    return (
        ManagedContext.objects.filter(session=session)
        .order_by("-version")
        .select_related("system", "toolset")
        .first()
    )


def managed_context_get(*, session: Session, version: int) -> ManagedContext | None:
    return (
        ManagedContext.objects.filter(session=session, version=version)
        .select_related("system", "toolset")
        .first()
    )


def managed_context_context(*, managed: ManagedContext, session: Session) -> Context:
    """The context a managed context version holds, rebuilt from stored messages."""
    ids = list(managed.message_ids)
    rows = messages_by_id(ids=ids)
    system: tuple[Any, ...] = ()
    if managed.system is not None:
        system = message_from_dict(managed.system.data).parts
    return Context(
        format=session.format,  # type: ignore[arg-type]
        messages=tuple(message_from_dict(rows[i].data) for i in ids),
        system=system,
        tools=_tools(managed.toolset),
        max_output_tokens=managed.max_output_tokens,
        extra=managed.request_extra,
    )


class NoContext(Exception):
    """The session has no turn yet, so no managed context."""


@dataclass(frozen=True)
class ManagedState:
    """What the agent should send next, and where it comes from.

    ``version`` is the session's latest managed context version (0 before any); ``current`` says
    whether that version is the context (no turn was posted since it was made), else the context
    is turn ``turn_index``'s. ``etag`` changes whenever the context may have.
    """

    context: Context
    version: int
    turn_index: int
    current: bool
    operation_id: int | None
    total_tokens: int

    @property
    def etag(self) -> str:
        return f'"v{self.version}.t{self.turn_index}"'


def managed_context(*, session: Session) -> ManagedState:
    """The session's managed context: its latest version while no turn came after it, else the
    latest turn's context. Raises :class:`NoContext` before the first turn."""
    latest_turn = turn_latest(session=session)
    if latest_turn is None:
        raise NoContext(session.external_id)
    managed = managed_context_latest(session=session)
    version = managed.version if managed is not None else 0
    if managed is not None and managed.turn_index >= latest_turn.index:
        return ManagedState(
            managed_context_context(managed=managed, session=session),
            version,
            managed.turn_index,
            True,
            managed.operation_id,
            managed.total_tokens,
        )
    return ManagedState(
        turn_context(turn=latest_turn),
        version,
        latest_turn.index,
        False,
        None,
        latest_turn.total_tokens,
    )


def managed_context_current(*, session: Session) -> ManagedState | None:
    """The session's latest managed context version while it is the context (no turn was posted
    since it was made), else None (no version, or no turn yet). Unlike :func:`managed_context`,
    the latest turn's context is never loaded: a proxied managed call needs only the version,
    and a session's latest turn may be a call of tens of megabytes."""
    latest_turn = (
        Turn.objects.filter(session=session).order_by("-index").values_list("index", flat=True)
    ).first()
    if latest_turn is None:
        return None
    managed = managed_context_latest(session=session)
    if managed is None or managed.turn_index < latest_turn:
        return None
    return ManagedState(
        managed_context_context(managed=managed, session=session),
        managed.version,
        managed.turn_index,
        True,
        managed.operation_id,
        managed.total_tokens,
    )


def managed_context_request(state: ManagedState) -> dict[str, Any]:
    """The managed context as a request body in the session's format, ready to send."""
    return render(state.context)


def artifact_pointers(context: Context) -> list[dict[str, Any]]:
    """The artifacts a context points at (``[EXTERNALIZED:<id>]`` and the like), in order."""
    seen: dict[str, dict[str, Any]] = {}
    parts = [*context.system, *(p for m in context.messages for p in m.parts)]
    for part in parts:
        placeholder = part_placeholder(part)
        if (
            placeholder is not None
            and placeholder.artifact_id
            and placeholder.artifact_id not in seen
        ):
            key = placeholder.artifact_id
            if key.startswith("content_") and len(key) == 72:  # LLM4S: content_<sha256>
                key = key.removeprefix("content_")
            seen[placeholder.artifact_id] = {
                "id": placeholder.artifact_id,
                "key": key,
                "kind": placeholder.kind,
                "url": reverse("api-artifact", args=[key]),
            }
    return list(seen.values())
