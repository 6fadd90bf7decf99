"""Running an operation: marked running (or retried after a lost worker), heartbeats and
progress while it plans, then finished succeeded with a new version, or failed.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable, Sequence
from datetime import timedelta

from django.db import connection, transaction
from django.utils import timezone

from compaction.messages import Message as LibMessage
from compaction.summarizers import FactSummarizer, Summarizer
from ctxweb.contexts import events, selectors
from ctxweb.contexts.models import Artifact, Operation
from ctxweb.contexts.services import planning
from ctxweb.contexts.services.operations._managed import _version_store

logger = logging.getLogger(__name__)


#: How many times a run is attempted when its worker dies under it.
MAX_ATTEMPTS = 2
#: Seconds between heartbeats of a running operation.
HEARTBEAT_SECONDS = 10.0
#: A running operation without a heartbeat for this long has lost its worker.
STALE_SECONDS = 120.0


#: Progress stages of a run.
STAGES = 4

ACTIVE = (Operation.Status.QUEUED, Operation.Status.RUNNING)


def operation_summarizer() -> Summarizer:
    """The summarizer operations use: the configured LLM one, else the offline one."""
    return planning.default_summarizer()


def _worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _worker_alive(worker: str) -> bool:
    """Whether ``host:pid`` still runs, as far as this host can tell (other hosts: assume so)."""
    host, _, pid = worker.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class _Heartbeat:
    """Touches ``heartbeat_at`` from a side thread while a run computes (an LLM call can be
    long); the reaper takes a silent running operation for a dead one."""

    def __init__(self, operation_id: int, every: float) -> None:
        self.operation_id = operation_id
        self.every = every
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._beat, daemon=True, name="ctxweb-heartbeat")

    def _beat(self) -> None:
        try:
            while not self.stop.wait(self.every):
                Operation.objects.filter(
                    pk=self.operation_id, status=Operation.Status.RUNNING
                ).update(heartbeat_at=timezone.now())
        except Exception:
            logger.exception("heartbeat of operation %s stopped", self.operation_id)
        finally:
            connection.close()

    def __enter__(self) -> _Heartbeat:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=5)


class _ReportingSummarizer:
    """Reports the summarizing stage (an LLM request in flight) before each summary."""

    def __init__(self, inner: Summarizer, report: Callable[[str], None]) -> None:
        self.inner = inner
        self.report = report

    def summarize(
        self, messages: Sequence[LibMessage], *, previous: str | None, prompt: str
    ) -> str:
        llm = not isinstance(self.inner, FactSummarizer)
        self.report("summarizing: request in flight" if llm else "summarizing")
        return self.inner.summarize(messages, previous=previous, prompt=prompt)


def _progress(operation: Operation, stage: str, done: int) -> None:
    retry = operation.progress.get("retry")
    operation.progress = {"stage": stage, "done": done, "total": STAGES}
    if retry:
        operation.progress["retry"] = retry
    operation.heartbeat_at = timezone.now()
    Operation.objects.filter(pk=operation.pk).update(
        progress=operation.progress, heartbeat_at=operation.heartbeat_at
    )
    events.operation_progress(operation)


def _start(operation_id: int) -> Operation | None:
    """Mark the operation running (or retried after a lost worker); None when there is nothing
    to run: finished already, unknown, or running in a live process."""
    with transaction.atomic():
        operation = (
            Operation.objects.select_for_update()
            .select_related("session__project")
            .filter(pk=operation_id)
            .first()
        )
        if operation is None:
            logger.warning(
                "operation %s does not exist (deleted, or another database)", operation_id
            )
            return None
        if operation.status in (Operation.Status.SUCCEEDED, Operation.Status.FAILED):
            return None
        now = timezone.now()
        retry = ""
        if operation.status == Operation.Status.RUNNING:
            fresh = operation.heartbeat_at and operation.heartbeat_at > now - timedelta(
                seconds=STALE_SECONDS
            )
            if fresh and _worker_alive(operation.worker):
                return None  # a duplicate delivery while the first run is alive
            retry = f"retried after its worker was lost ({operation.worker or 'unknown'})"
            if operation.attempts >= MAX_ATTEMPTS:
                _fail(operation, f"worker lost: gave up after {operation.attempts} attempts")
                return None
        operation.status = Operation.Status.RUNNING
        operation.attempts += 1
        operation.started_at = operation.started_at or now
        operation.heartbeat_at = now
        operation.worker = _worker_id()
        operation.progress = {"stage": "starting", "done": 0, "total": STAGES}
        if retry:
            operation.progress["retry"] = retry
        operation.save(
            update_fields=[
                "status",
                "attempts",
                "started_at",
                "heartbeat_at",
                "worker",
                "progress",
            ]
        )
    events.operation_progress(operation)
    return operation


def _fail(operation: Operation, error: str) -> None:
    """Mark failed (within the caller's transaction when there is one) and announce it."""
    operation.status = Operation.Status.FAILED
    operation.error = error[:2000]
    operation.finished_at = timezone.now()
    operation.progress = {**operation.progress, "stage": "failed"}
    operation.save(update_fields=["status", "error", "finished_at", "progress"])
    transaction.on_commit(lambda: events.operation_finished(operation))


def operation_fail(*, operation_id: int, error: str) -> None:
    """Mark a queued or running operation failed with ``error`` (time limit, lost worker)."""
    with transaction.atomic():
        operation = (
            Operation.objects.select_for_update().filter(pk=operation_id, status__in=ACTIVE).first()
        )
        if operation is not None:
            _fail(operation, error)


def operation_run(
    *,
    operation_id: int,
    summarizer: Summarizer | None = None,
    heartbeat: bool = True,
) -> Operation | None:
    """Run a queued operation: plan on the managed context, store artifacts and a new version.

    Reports ``operation.progress`` at each stage and ``operation.finished`` at the end. Any
    error (a failed LLM call included) fails the operation and writes nothing else.
    Returns the finished operation, or None when there was nothing to run.
    """
    operation = _start(operation_id)
    if operation is None:
        return None
    session = operation.session
    try:
        beat = _Heartbeat(operation.pk, HEARTBEAT_SECONDS) if heartbeat else None
        if beat is not None:
            beat.__enter__()
        try:
            _progress(operation, "loading context", 1)
            state = selectors.managed_context(session=session)
            _progress(operation, "planning", 2)
            plan = planning.plan_for_context(
                context=state.context,
                strategy=operation.strategy,
                params=operation.params,
                encoding=session.encoding,
                summarizer=_ReportingSummarizer(
                    summarizer or operation_summarizer(),
                    lambda stage: _progress(operation, stage, 2),
                ),
            )
            _progress(operation, "storing", 3)
        finally:
            if beat is not None:
                beat.__exit__()
        with transaction.atomic():
            locked = Operation.objects.select_for_update().get(pk=operation.pk)
            if locked.status != Operation.Status.RUNNING or locked.worker != operation.worker:
                logger.warning("operation %s was taken from this run; dropping it", operation.pk)
                return locked
            warnings = list(plan.warnings)
            latest = selectors.turn_latest(session=session)
            if latest is not None and latest.index != state.turn_index:
                warnings.append(
                    f"turn {latest.index} arrived while the operation ran: its context is newer"
                    " than this result"
                )
            if plan.artifacts:
                Artifact.objects.bulk_create(
                    [
                        Artifact(
                            project=session.project,
                            key=a.id,
                            kind=a.kind,
                            content=a.content,
                            size=a.size,
                            tokens=a.tokens,
                            summary=a.summary,
                            session=session,
                        )
                        for a in plan.artifacts
                    ],
                    ignore_conflicts=True,
                )
            version = _version_store(
                session=session,
                context=plan.context,
                operation=operation,
                turn_index=state.turn_index,
            )
            operation.status = Operation.Status.SUCCEEDED
            operation.base_version = state.version if state.current else 0
            operation.result_version = version.version
            operation.finished_at = timezone.now()
            operation.progress = {
                **operation.progress,
                "stage": "done",
                "done": STAGES,
                "total": STAGES,
            }
            operation.result = {
                "tokens_before": int(plan.before.total),
                "tokens_after": version.total_tokens,
                "tokens_saved": int(plan.before.total) - version.total_tokens,
                "edits": len(plan.edits),
                "warnings": warnings,
                "artifacts": [a.id for a in plan.artifacts],
                "version": version.version,
                "base_version": operation.base_version,
                "turn_index": state.turn_index,
                "attempts": operation.attempts,
            }
            operation.save(
                update_fields=[
                    "status",
                    "base_version",
                    "result_version",
                    "finished_at",
                    "progress",
                    "result",
                ]
            )
            transaction.on_commit(lambda: events.operation_finished(operation))
    except Exception as exc:
        logger.exception("operation %s failed", operation.pk)
        message = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        operation_fail(operation_id=operation.pk, error=message)
        operation.refresh_from_db()
    return operation
