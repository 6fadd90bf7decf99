"""Reads of operations: one by id in a project, a session's active one, all of a session's, and
whether a turn continues from an operation's managed context."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db.models import QuerySet

from ctxweb.accounts.models import Project
from ctxweb.contexts.models import (
    Operation,
    Session,
)
from ctxweb.contexts.selectors.managed import managed_context_latest


def operation_get(*, project: Project, operation_id: int) -> Operation | None:
    """The project's operation ``operation_id``, or None (never another project's)."""
    return (
        Operation.objects.filter(pk=operation_id, session__project=project)
        .select_related("session")
        .first()
    )


def operation_active(*, session: Session) -> Operation | None:
    """The session's queued or running operation, if any."""
    return (
        Operation.objects.filter(
            session=session, status__in=[Operation.Status.QUEUED, Operation.Status.RUNNING]
        )
        .order_by("created_at")
        .first()
    )


def operation_list_for_session(*, session: Session) -> QuerySet[Operation]:
    """Every operation of the session, whatever its status or whoever applied it, newest first
    (the latest id first among those created in the same instant). Each comes with its session
    and the user who applied it: a page of them takes one query, whatever its size."""
    return (
        Operation.objects.filter(session=session)
        .select_related("session", "created_by")
        .order_by("-created_at", "-pk")
    )


def turn_operation_event(
    *,
    session: Session,
    index: int,
    message_ids: Sequence[int],
    system_id: int | None,
    managed_by: int | None = None,
) -> tuple[Operation | None, dict[str, Any] | None]:
    """Whether turn ``index`` continues from the current managed context version: its messages
    start with the version's and its system prompt is the version's, or the proxy sent it in
    managed mode from that version's operation (``managed_by``: it started it with the version's
    messages, their cache breakpoints left out). Returns the version's operation and the chart's
    ``operation`` event, or ``(None, None)``."""
    managed = managed_context_latest(session=session)
    if managed is None or managed.operation_id is None or managed.turn_index != index - 1:
        return None, None
    ids = list(managed.message_ids)
    continues = list(message_ids[: len(ids)]) == ids and managed.system_id == system_id
    if not continues and managed_by != managed.operation_id:
        return None, None
    operation = Operation.objects.filter(pk=managed.operation_id).first()
    if operation is None or operation.undone_at is not None:
        return None, None
    result = operation.result or {}
    return operation, {
        "type": "operation",
        "strategy": operation.strategy,
        "operation_id": operation.pk,
        "tokens_before": result.get("tokens_before"),
        "tokens_after": result.get("tokens_after"),
    }
