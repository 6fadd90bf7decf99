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
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from compaction.messages import Context
from compaction.messages import Message as LibMessage
from compaction.regions import Policy, budget
from compaction.strategies import get_strategy
from compaction.summarizers import FactSummarizer, Summarizer
from ctxweb.contexts import events, planning, selectors, services
from ctxweb.contexts.models import Artifact, ManagedContext, Operation, Session, Turn

logger = logging.getLogger(__name__)

#: The Celery task that runs an operation, sent by name.
OPERATION_TASK = "ctxweb.contexts.tasks.operation_run"
#: How many times a run is attempted when its worker dies under it.
MAX_ATTEMPTS = 2
#: Seconds between heartbeats of a running operation.
HEARTBEAT_SECONDS = 10.0
#: A running operation without a heartbeat for this long has lost its worker.
STALE_SECONDS = 120.0
#: A queued operation never started after this long was lost on its way to a worker.
QUEUED_STALE_SECONDS = 3600.0
#: Progress stages of a run.
STAGES = 4

ACTIVE = (Operation.Status.QUEUED, Operation.Status.RUNNING)


class OperationConflict(Exception):
    """Another operation of the session is queued or running."""

    def __init__(self, active: Operation | None) -> None:
        self.active = active
        which = f" (operation {active.pk}, {active.status})" if active is not None else ""
        super().__init__(
            f"Another operation of this session is already queued or running{which}; "
            "wait for it to finish."
        )


class UndoRefused(Exception):
    """The operation cannot be undone (not succeeded, already undone, or superseded)."""


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


# --- the managed context ----------------------------------------------------------------------


def managed_context(*, session: Session) -> ManagedState:
    """The session's managed context: its latest version while no turn came after it, else the
    latest turn's context. Raises :class:`NoContext` before the first turn."""
    latest_turn = selectors.turn_latest(session=session)
    if latest_turn is None:
        raise NoContext(session.external_id)
    managed = selectors.managed_context_latest(session=session)
    version = managed.version if managed is not None else 0
    if managed is not None and managed.turn_index >= latest_turn.index:
        return ManagedState(
            selectors.managed_context_context(managed=managed, session=session),
            version,
            managed.turn_index,
            True,
            managed.operation_id,
            managed.total_tokens,
        )
    return ManagedState(
        selectors.turn_context(turn=latest_turn),
        version,
        latest_turn.index,
        False,
        None,
        latest_turn.total_tokens,
    )


def _regions_of(
    *,
    session: Session,
    regions: Sequence[Mapping[str, int]],
    system: Any,
    toolset: Any,
) -> dict[str, int]:
    """A stored context's regions, added up from its rows as ingestion does."""
    from compaction.regions import sum_regions
    from compaction.tokens import REQUEST_OVERHEAD

    encoding = session.encoding
    return sum_regions(
        [
            {"system": REQUEST_OVERHEAD},
            system.counts[encoding]["regions"] if system else {},
            {"tools": toolset.counts[encoding]} if toolset else {},
            *regions,
        ]
    )


def _version_store(
    *, session: Session, context: Context, operation: Operation | None, turn_index: int
) -> ManagedContext:
    """Store ``context`` as the session's next managed context version (messages stored once,
    with ingestion's own helpers)."""
    project = session.project
    encoding = session.encoding
    stored = services._message_rows(project=project, messages=context.messages, encoding=encoding)
    system = services._system_row(project=project, context=context, encoding=encoding)
    toolset = services._toolset_row(project=project, context=context, encoding=encoding)
    regions = _regions_of(session=session, regions=stored.regions, system=system, toolset=toolset)
    latest = selectors.managed_context_latest(session=session)
    return ManagedContext.objects.create(
        session=session,
        version=(latest.version if latest is not None else 0) + 1,
        operation=operation,
        turn_index=turn_index,
        message_ids=list(stored.ids),
        system=system,
        toolset=toolset,
        request_extra=dict(context.extra),
        max_output_tokens=context.max_output_tokens,
        total_tokens=sum(regions.values()),
        regions=regions,
    )


# --- creating and scheduling ------------------------------------------------------------------


def _run_in_thread(operation_id: int) -> None:
    try:
        operation_run(operation_id=operation_id)
    except Exception:
        logger.exception("operation %s failed in its thread", operation_id)
    finally:
        connection.close()


def operation_schedule(operation_id: int) -> None:
    """Run the operation after the current transaction commits (see the module's docstring)."""
    if getattr(settings, "CTXWEB_TASKS_INLINE", False):
        transaction.on_commit(lambda: _run_inline(operation_id))
    elif settings.REDIS_URL:
        from ctxweb.celery import app

        def send() -> None:
            try:
                app.send_task(OPERATION_TASK, args=(operation_id,))
            except Exception as error:  # the broker is down: say so now, don't block the session
                logger.exception("could not queue operation %s", operation_id)
                operation_fail(
                    operation_id=operation_id, error=f"could not reach the task broker: {error}"
                )

        transaction.on_commit(send)
    else:
        transaction.on_commit(
            lambda: threading.Thread(
                target=_run_in_thread, args=(operation_id,), daemon=True, name="ctxweb-operation"
            ).start()
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
            operation_schedule(operation.pk)
    except IntegrityError:  # the partial unique constraint: a concurrent create won
        raise OperationConflict(selectors.operation_active(session=session)) from None
    return operation


# --- running ----------------------------------------------------------------------------------


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
            state = managed_context(session=session)
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


def operation_reap_stale(
    *,
    older_than: float | None = None,
    queued_older_than: float | None = None,
) -> list[int]:
    """Fail operations whose worker is gone: running without a heartbeat for ``older_than``
    seconds ("worker lost"), queued for ``queued_older_than`` ("never started"). Returns their
    ids."""
    now = timezone.now()
    stale = now - timedelta(seconds=STALE_SECONDS if older_than is None else older_than)
    lost = now - timedelta(
        seconds=QUEUED_STALE_SECONDS if queued_older_than is None else queued_older_than
    )
    reaped: list[int] = []
    candidates = list(
        Operation.objects.filter(
            Q(status=Operation.Status.RUNNING, heartbeat_at__lt=stale)
            | Q(status=Operation.Status.QUEUED, created_at__lt=lost)
        ).values_list("pk", flat=True)
    )
    for pk in candidates:
        with transaction.atomic():
            operation = (
                Operation.objects.select_for_update().filter(pk=pk, status__in=ACTIVE).first()
            )
            if operation is None:
                continue
            if operation.status == Operation.Status.RUNNING:
                if operation.heartbeat_at is None or operation.heartbeat_at >= stale:
                    continue
                seconds = int((now - operation.heartbeat_at).total_seconds())
                _fail(
                    operation,
                    f"worker lost: no heartbeat from {operation.worker or 'its worker'}"
                    f" for {seconds}s",
                )
            else:
                _fail(operation, "never started: no worker picked it up")
            reaped.append(pk)
    return reaped


# --- undo -------------------------------------------------------------------------------------


def operation_undo(*, operation: Operation, actor: Any = None) -> ManagedContext:
    """Bring the managed context back to what it was before ``operation``: a new version equal
    to its base. Only the current version's operation can be undone (no turn or other version
    since). Raises :class:`UndoRefused` otherwise."""
    with transaction.atomic():
        session = Session.objects.select_for_update().get(pk=operation.session_id)
        operation = Operation.objects.select_for_update().get(pk=operation.pk)
        if operation.status != Operation.Status.SUCCEEDED or operation.result_version is None:
            raise UndoRefused("Only a succeeded operation can be undone.")
        if operation.undone_at is not None:
            raise UndoRefused("This operation was already undone.")
        latest = selectors.managed_context_latest(session=session)
        latest_turn = selectors.turn_latest(session=session)
        if (
            latest is None
            or latest.version != operation.result_version
            or (latest_turn is not None and latest_turn.index > latest.turn_index)
        ):
            raise UndoRefused(
                "The managed context moved on since this operation (a newer version or turn);"
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
        payload = {
            "type": "operation.undone",
            "operation": events.operation_payload(operation),
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


# --- ingestion hooks --------------------------------------------------------------------------


def turn_operation_event(
    *, session: Session, index: int, message_ids: Sequence[int], system_id: int | None
) -> tuple[Operation | None, dict[str, Any] | None]:
    """Whether turn ``index`` continues from the current managed context version: its messages
    start with the version's and its system prompt is the version's. Returns the version's
    operation and the chart's ``operation`` event, or ``(None, None)``."""
    managed = selectors.managed_context_latest(session=session)
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


def session_policy_validate(policy: Any) -> dict[str, Any]:
    """A session's policy, checked: ``{"auto": {"strategy", "params", "enabled"}}``.
    Raises :class:`~compaction.errors.StrategyError` naming the field."""
    from compaction.errors import StrategyError

    if not isinstance(policy, Mapping):
        raise StrategyError("policy", "must be an object")
    out = dict(policy)
    auto = policy.get("auto")
    if auto is None:
        return out
    if not isinstance(auto, Mapping):
        raise StrategyError("policy.auto", "must be an object")
    if not isinstance(auto.get("enabled", True), bool):
        raise StrategyError("policy.auto.enabled", "must be a boolean")
    strategy = auto.get("strategy")
    if not isinstance(strategy, str):
        raise StrategyError("policy.auto.strategy", "must name a strategy")
    try:
        resolved = get_strategy(strategy).validate(auto.get("params") or {})
    except StrategyError as exc:
        raise StrategyError(f"policy.auto.{exc.path}", exc.reason) from None
    out["auto"] = {
        "strategy": strategy,
        "params": {k: list(v) if isinstance(v, tuple) else v for k, v in resolved.items()},
        "enabled": auto.get("enabled", True),
    }
    return out


def session_policy_set(*, session: Session, policy: Mapping[str, Any]) -> Session:
    """Replace the session's policy after validating it."""
    session.policy = session_policy_validate(policy)
    session.save(update_fields=["policy"])
    return session


def operation_auto_after_turn(*, session: Session, turn: Turn, previous_total: int | None) -> None:
    """Start the session's automatic operation when ``turn`` crosses the compaction trigger and
    nothing is queued or running. Never raises into ingestion: problems are logged."""
    auto = (session.policy or {}).get("auto") if isinstance(session.policy, dict) else None
    if not isinstance(auto, dict) or not auto.get("enabled", True) or not auto.get("strategy"):
        return
    reserve = turn.max_output_tokens or session.output_reserve
    limits = budget(turn.context_window, reserve, Policy.ctxweb())
    if not limits.over_trigger(turn.total_tokens):
        return
    if previous_total is not None and limits.over_trigger(previous_total):
        return  # crossed earlier: one automatic operation per crossing
    if selectors.operation_active(session=session) is not None:
        return
    try:
        with transaction.atomic():
            operation_create(
                session=session,
                strategy=auto["strategy"],
                params=auto.get("params") or {},
                automatic=True,
            )
    except Exception:
        logger.exception("automatic operation of session %s not started", session.pk)


__all__ = [
    "MAX_ATTEMPTS",
    "OPERATION_TASK",
    "ManagedState",
    "NoContext",
    "OperationConflict",
    "UndoRefused",
    "managed_context",
    "operation_auto_after_turn",
    "operation_create",
    "operation_fail",
    "operation_reap_stale",
    "operation_run",
    "operation_schedule",
    "operation_undo",
    "session_policy_set",
    "turn_operation_event",
]
