"""Operations: applying a plan in the background to make a new managed context.

An operation is created ``queued`` (one queued or running operation per session, enforced by a
row lock and a partial unique constraint), scheduled after commit, then run: marked ``running``
under a row lock, planned on the session's managed context, and finished ``succeeded`` with a new
:class:`~ctxweb.contexts.models.ManagedContext` version (and the plan's artifacts) or ``failed``
with its error, in which case nothing was written. Stored turns are never changed.

Scheduling lives here, not in the interfaces, because an ingested turn can start an automatic
operation: with ``REDIS_URL`` the task is sent to the broker *by name* after commit (services never
import tasks); without it the operation runs in a background thread after commit so the request
returns at once and progress flows over the in-memory layer; ``CTXWEB_TASKS_INLINE`` runs it
synchronously on commit (tests).

Worker death: tasks are acked late and rejected when their worker is lost, so a killed run is
delivered again; the re-run sees the operation ``running`` under a dead process and retries it (up
to :data:`MAX_ATTEMPTS`). A run whose worker vanished for good stops sending heartbeats; the
reaper (:func:`operation_reap_stale`) marks it failed, "worker lost".

Undo makes a new version equal to the operation's base (its content, not a pointer), so versions
only grow and a client's ``ETag`` never comes back meaning something else.

The parts: storing a managed context version (``_managed``; reading one is
:mod:`ctxweb.contexts.selectors.managed`), creating and scheduling (``_scheduling``), running,
heartbeats and progress (``_running``), reaping stale ones (``_reaping``) and undo (``_undo``).
The automatic policy that ingestion starts is :mod:`ctxweb.contexts.services.policy`. A test that
patches what a run reads (``operation_summarizer``, ``HEARTBEAT_SECONDS``) patches ``_running``,
where it is read.
"""

from __future__ import annotations

from ctxweb.contexts.services.operations._reaping import QUEUED_STALE_SECONDS, operation_reap_stale
from ctxweb.contexts.services.operations._running import (
    ACTIVE,
    HEARTBEAT_SECONDS,
    MAX_ATTEMPTS,
    STAGES,
    STALE_SECONDS,
    operation_fail,
    operation_run,
    operation_summarizer,
)
from ctxweb.contexts.services.operations._scheduling import (
    OPERATION_TASK,
    OperationConflict,
    operation_create,
    operation_schedule,
)
from ctxweb.contexts.services.operations._undo import UndoRefused, operation_undo

__all__ = [
    "ACTIVE",
    "HEARTBEAT_SECONDS",
    "MAX_ATTEMPTS",
    "OPERATION_TASK",
    "QUEUED_STALE_SECONDS",
    "STAGES",
    "STALE_SECONDS",
    "OperationConflict",
    "UndoRefused",
    "operation_create",
    "operation_fail",
    "operation_reap_stale",
    "operation_run",
    "operation_schedule",
    "operation_summarizer",
    "operation_undo",
]
