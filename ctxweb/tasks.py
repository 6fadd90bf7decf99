"""Celery tasks: each only calls a service. ``import_run`` imports an uploaded transcript;
``recordings_drain`` records the calls the proxy relayed (``recordings_sweep`` takes up what a
crash left); ``sessions_expire`` enforces retention (the projects' sessions and import jobs, and
failed imports' files), on Celery beat's schedule
(``CELERY_BEAT_SCHEDULE``) or, in the embedded shape, on :func:`start_in_process_scheduler`'s.

``replay_run`` sends one ``replay_run_column`` task a column of a replay, so the columns run in
parallel on as many workers as there are; the last column to land finishes the replay.

``operation_run`` is acked late and rejected when its worker is lost, so a run killed with its
worker is delivered again (the service retries it or gives up, saying why). Its soft time limit
fails the operation with "time limit"; the hard limit kills the child, and the reaper fails
the operation once its heartbeat is stale.
"""

from __future__ import annotations

import logging
import threading

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from celery.signals import worker_process_init
from django.conf import settings
from django.db import connection

from ctxweb.contexts.services import deletion, imports, operations, recording, replays

logger = logging.getLogger(__name__)


@worker_process_init.connect
def _background_priority(**_: object) -> None:
    """A worker's process runs at a lower CPU priority (``CTXWEB_BACKGROUND_NICE``) than the web
    processes: its tasks (recording, operations, imports) are background work."""
    recording.background_priority()


#: The retention task's name (Celery beat's schedule names it).
RETENTION_TASK = "ctxweb.tasks.sessions_expire"


@shared_task(
    name=operations.OPERATION_TASK,
    acks_late=True,
    reject_on_worker_lost=True,
    soft_time_limit=settings.CELERY_TASK_SOFT_TIME_LIMIT,
    time_limit=settings.CELERY_TASK_TIME_LIMIT,
)
def operation_run(operation_id: int) -> str | None:
    """Run operation ``operation_id``; returns its final status."""
    operations.operation_reap_stale()
    try:
        operation = operations.operation_run(operation_id=operation_id)
    except SoftTimeLimitExceeded:
        limit = settings.CELERY_TASK_SOFT_TIME_LIMIT
        operations.operation_fail(operation_id=operation_id, error=f"time limit ({limit}s)")
        return "failed"
    return operation.status if operation is not None else None


@shared_task(name="ctxweb.contexts.tasks.operation_reap_stale")
def operation_reap_stale() -> list[int]:
    """Fail operations whose worker is gone (for a beat schedule, or called by hand); replays
    too."""
    replays.replay_reap_stale()
    return operations.operation_reap_stale()


def _send_column(replay_id: int, column: int) -> None:
    replay_run_column.apply_async(args=(replay_id, column))


@shared_task(
    name=replays.REPLAY_TASK,
    acks_late=True,
    reject_on_worker_lost=True,
    soft_time_limit=settings.CELERY_TASK_SOFT_TIME_LIMIT,
    time_limit=settings.CELERY_TASK_TIME_LIMIT,
)
def replay_run(replay_id: int) -> str | None:
    """Start replay ``replay_id``: one ``replay_run_column`` task a column, so the columns run
    in parallel on the workers there are; returns its status."""
    replays.replay_reap_stale()
    replay = replays.replay_run(replay_id=replay_id, fan_out=_send_column)
    return replay.status if replay is not None else None


@shared_task(
    name=replays.COLUMN_TASK,
    acks_late=True,
    reject_on_worker_lost=True,
    soft_time_limit=settings.CELERY_TASK_SOFT_TIME_LIMIT,
    time_limit=settings.CELERY_TASK_TIME_LIMIT,
)
def replay_run_column(replay_id: int, column: int) -> str | None:
    """Run column ``column`` of replay ``replay_id`` and store it (the last column finishes the
    replay); returns the replay's status."""
    try:
        replay = replays.replay_run_column(replay_id=replay_id, column=column)
    except SoftTimeLimitExceeded:
        limit = settings.CELERY_TASK_SOFT_TIME_LIMIT
        replays.replay_fail(replay_id=replay_id, error=f"column {column}: time limit ({limit}s)")
        return "failed"
    return replay.status if replay is not None else None


@shared_task(name=imports.IMPORT_TASK, acks_late=True, reject_on_worker_lost=True)
def import_run(job_id: int) -> str | None:
    """Run import job ``job_id``; returns its final status (a redelivered job resumes)."""
    job = imports.import_job_run(job_id=job_id)
    return job.status if job is not None else None


@shared_task(name=RETENTION_TASK)
def sessions_expire() -> dict[str, int]:
    """Delete the sessions past their project's retention (how many per project: the return),
    and the import files and jobs past theirs."""
    deletion.imports_expire()
    return deletion.sessions_expire()


@shared_task(name=recording.DRAIN_TASK, acks_late=True, reject_on_worker_lost=True)
def recordings_drain(lane: str) -> int:
    """Record the relayed calls waiting in ``lane``, in order, for a slice of time (the rest
    is queued again behind the other lanes); how many were recorded."""
    return recording.recordings_drain(lane)


@shared_task(name=recording.SWEEP_TASK)
def recordings_sweep() -> dict[str, int]:
    """Take up the calls crashes left, and give every waiting lane a recorder."""
    return recording.recordings_sweep()


_SCHEDULER: threading.Thread | None = None
_SCHEDULER_LOCK = threading.Lock()


def start_in_process_scheduler(every: float | None = None) -> threading.Thread | None:
    """Run the periodic tasks in a daemon thread of this process (the embedded shape has no
    Celery beat): retention every ``every`` seconds (``CTXWEB_RETENTION_SECONDS``), the first
    run at once. Started once per process; returns the thread (None if already started)."""
    global _SCHEDULER
    interval = every if every is not None else settings.CTXWEB_RETENTION_SECONDS
    stop = threading.Event()

    def loop() -> None:
        while True:
            try:
                deletion.imports_expire()
                deletion.sessions_expire()
                operations.operation_reap_stale()
                replays.replay_reap_stale()
            except Exception:
                logger.exception("the in-process scheduler's run failed")
            finally:
                connection.close()
            if stop.wait(interval):
                return

    with _SCHEDULER_LOCK:
        if _SCHEDULER is not None and _SCHEDULER.is_alive():
            return None
        _SCHEDULER = threading.Thread(target=loop, name="ctxweb-scheduler", daemon=True)
        _SCHEDULER.start()
    return _SCHEDULER
