"""Creating and scheduling operations: one queued or running operation per session, run
after commit by the broker, a background thread or inline (see the package's docstring).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from django.db import IntegrityError, transaction

from compaction.errors import StrategyError
from compaction.strategies import get_strategy
from ctxweb.contexts import selectors
from ctxweb.contexts.models import AuditEvent, Operation, Session
from ctxweb.contexts.services import planning
from ctxweb.contexts.services._background import schedule_after_commit
from ctxweb.contexts.services.audit import audit_record
from ctxweb.contexts.services.operations._reaping import operation_reap_stale
from ctxweb.contexts.services.operations._running import STAGES, operation_fail, operation_run

logger = logging.getLogger(__name__)


#: The Celery task that runs an operation, sent by name.
OPERATION_TASK = "ctxweb.contexts.tasks.operation_run"


class OperationConflict(Exception):
    """Another operation of the session is queued or running."""

    def __init__(self, active: Operation | None) -> None:
        self.active = active
        which = f" (operation {active.pk}, {active.status})" if active is not None else ""
        super().__init__(
            f"Another operation of this session is already queued or running{which}; "
            "wait for it to finish."
        )


def operation_schedule(operation_id: int) -> None:
    """Run the operation after the current transaction commits (see the module's docstring)."""
    schedule_after_commit(
        task=OPERATION_TASK,
        job_id=operation_id,
        run=lambda pk: operation_run(operation_id=pk),
        inline=_run_inline,
        unsent=lambda pk, error: operation_fail(
            operation_id=pk, error=f"could not reach the task broker: {error}"
        ),
    )


def _run_inline(operation_id: int) -> None:
    operation_run(operation_id=operation_id, heartbeat=False)


def operation_create(
    *,
    session: Session,
    strategy: str,
    params: Mapping[str, Any] | None,
    actor: Any = None,
    automatic: bool = False,
) -> Operation:
    """Queue ``strategy`` with ``params`` on the session's managed context and schedule it.

    ``actor`` is the dashboard user or the API key that asked (None for automatic ones).
    Raises :class:`~compaction.errors.StrategyError` (unknown strategy, bad parameter) and
    :class:`OperationConflict` (another operation of the session is queued or running).
    """
    operation_reap_stale()
    # Window and reserve parameters the caller left out come from the session, as in previews.
    if params is not None and not isinstance(params, Mapping):
        raise StrategyError("params", "must be an object of parameter names")
    given = dict(params or {})
    defaults = planning.session_defaults(session=session, strategy=strategy)
    resolved = get_strategy(strategy).validate({**defaults, **given})
    stored_params = {k: list(v) if isinstance(v, tuple) else v for k, v in resolved.items()}
    user = actor if getattr(actor, "is_authenticated", False) else None
    key_prefix = getattr(actor, "prefix", "") if user is None and actor is not None else ""
    try:
        with transaction.atomic():
            locked = Session.objects.select_for_update().get(pk=session.pk)
            active = selectors.operation_active(session=locked)
            if active is not None:
                raise OperationConflict(active)
            operation = Operation.objects.create(
                session=locked,
                strategy=strategy,
                params=stored_params,
                automatic=automatic,
                created_by=user,
                key_prefix=key_prefix or "",
                progress={"stage": "queued", "done": 0, "total": STAGES},
            )
            audit_record(
                project_id=locked.project_id,
                action=AuditEvent.Action.OPERATION_APPLY,
                actor=actor if actor is not None else ("policy" if automatic else None),
                session_external_id=locked.external_id,
                operation_id=operation.pk,
                detail={"strategy": strategy, "automatic": automatic},
            )
            operation_schedule(operation.pk)
    except IntegrityError:  # the partial unique constraint: a concurrent create won
        raise OperationConflict(selectors.operation_active(session=session)) from None
    return operation
