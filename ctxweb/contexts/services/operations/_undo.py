"""Undo: a new managed context version equal to an operation's base."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from ctxweb.contexts import events, selectors
from ctxweb.contexts.models import AuditEvent, ManagedContext, Operation, Session, Turn
from ctxweb.contexts.services.audit import audit_record


class UndoRefused(Exception):
    """The operation cannot be undone (not succeeded, already undone, or superseded)."""


def operation_undo(*, operation: Operation, actor: Any = None) -> ManagedContext:
    """Bring the managed context back to what it was before ``operation``: a new version equal
    to its base. Only the latest version's operation can be undone. Turns posted since (an agent
    that sent the compacted context, or the proxy's managed mode) keep what they sent: the
    managed context is the latest turn's again, and the proxy sends agents' requests whole.
    Raises :class:`UndoRefused` otherwise."""
    with transaction.atomic():
        session = Session.objects.select_for_update().get(pk=operation.session_id)
        operation = Operation.objects.select_for_update().get(pk=operation.pk)
        if operation.status != Operation.Status.SUCCEEDED or operation.result_version is None:
            raise UndoRefused("Only a succeeded operation can be undone.")
        if operation.undone_at is not None:
            raise UndoRefused("This operation was already undone.")
        latest = selectors.managed_context_latest(session=session)
        if latest is None or latest.version != operation.result_version:
            raise UndoRefused(
                "The managed context moved on since this operation (a newer version);"
                " only the latest operation can be undone."
            )
        base = (
            selectors.managed_context_get(session=session, version=operation.base_version)
            if operation.base_version
            else None
        )
        if base is not None:
            restored = ManagedContext.objects.create(
                session=session,
                version=latest.version + 1,
                operation=None,
                turn_index=latest.turn_index,
                message_ids=base.message_ids,
                system=base.system,
                toolset=base.toolset,
                request_extra=base.request_extra,
                max_output_tokens=base.max_output_tokens,
                total_tokens=base.total_tokens,
                regions=base.regions,
            )
        else:
            turn = selectors.turn_get(session=session, index=latest.turn_index)
            if turn is None:
                raise UndoRefused("The turn this operation ran on is gone.")
            restored = _restore_turn(session=session, turn=turn, version=latest.version + 1)
        operation.undone_at = timezone.now()
        operation.result = {**(operation.result or {}), "undone_by_version": restored.version}
        operation.save(update_fields=["undone_at", "result"])
        audit_record(
            project_id=session.project_id,
            action=AuditEvent.Action.OPERATION_UNDO,
            actor=actor,
            session_external_id=session.external_id,
            operation_id=operation.pk,
            detail={"strategy": operation.strategy, "version": restored.version},
        )
        payload = {
            "type": "operation.undone",
            "operation": events.operation_row(operation),
            "version": restored.version,
        }
        transaction.on_commit(lambda: events.publish(session.pk, payload))
    return restored


def _restore_turn(*, session: Session, turn: Turn, version: int) -> ManagedContext:
    return ManagedContext.objects.create(
        session=session,
        version=version,
        operation=None,
        turn_index=turn.index,
        message_ids=selectors.turn_message_ids(session=session, index=turn.index),
        system=turn.system,
        toolset=turn.toolset,
        request_extra=turn.request_extra,
        max_output_tokens=turn.max_output_tokens,
        total_tokens=turn.counted_tokens,
        regions={k: v for k, v in turn.regions.items() if k != "unattributed"},
    )
