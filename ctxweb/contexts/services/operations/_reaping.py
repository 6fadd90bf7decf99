"""Reaping stale operations: running ones whose worker stopped sending heartbeats, queued
ones no worker ever picked up.
"""

from __future__ import annotations

from datetime import timedelta

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from ctxweb.contexts.models import Operation
from ctxweb.contexts.services.operations._running import ACTIVE, STALE_SECONDS, _fail

#: A queued operation never started after this long was lost on its way to a worker.
QUEUED_STALE_SECONDS = 3600.0


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
