"""Celery tasks: each only calls a service. ``import_run`` imports an uploaded transcript.

``operation_run`` is acked late and rejected when its worker is lost, so a run killed with its
worker is delivered again (the service retries it or gives up, saying why). Its soft time limit
fails the operation with "time limit"; the hard limit kills the child, and the reaper fails
the operation once its heartbeat is stale.
"""

from __future__ import annotations

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings

from ctxweb.contexts.services import imports, operations


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
    """Fail operations whose worker is gone (for a beat schedule, or called by hand)."""
    return operations.operation_reap_stale()


@shared_task(name=imports.IMPORT_TASK, acks_late=True, reject_on_worker_lost=True)
def import_run(job_id: int) -> str | None:
    """Run import job ``job_id``; returns its final status (a redelivered job resumes)."""
    job = imports.import_job_run(job_id=job_id)
    return job.status if job is not None else None
