"""Reads of operations: one by id in a project, a session's active one, its recent ones, and
whether a turn continues from an operation's managed context."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

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


def operation_list(*, session: Session, limit: int = 20) -> list[Operation]:
    """The session's latest operations, newest first."""
    return list(Operation.objects.filter(session=session).order_by("-created_at")[:limit])


def turn_operation_event(
    *, session: Session, index: int, message_ids: Sequence[int], system_id: int | None
) -> tuple[Operation | None, dict[str, Any] | None]:
    """Whether turn ``index`` continues from the current managed context version: its messages
    start with the version's and its system prompt is the version's. Returns the version's
    operation and the chart's ``operation`` event, or ``(None, None)``."""
    managed = managed_context_latest(session=session)
    if managed is None or managed.operation_id is None or managed.turn_index != index - 1:
        return None, None
    ids = list(managed.message_ids)
    if list(message_ids[: len(ids)]) != ids or managed.system_id != system_id:
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
