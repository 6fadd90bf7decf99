"""Running a job after the current transaction commits, as the shape of the deployment says:
on a Celery worker when there is a broker (``REDIS_URL``), else in a background thread of this
process (the embedded shape), or inline with ``CTXWEB_TASKS_INLINE`` (tests).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from django.conf import settings
from django.db import connection, transaction

logger = logging.getLogger(__name__)


def schedule_after_commit(
    *,
    task: str,
    job_id: int,
    run: Callable[[int], object],
    inline: Callable[[int], object] | None = None,
    unsent: Callable[[int, Exception], object],
) -> None:
    """Run job ``job_id`` once the current transaction commits.

    Args:
        task: the Celery task's name, sent to the broker by name.
        run: runs the job in this process (in a thread of its own in the embedded shape).
        inline: runs it inline (``CTXWEB_TASKS_INLINE``); ``run`` when not given.
        unsent: called when the broker cannot be reached, to fail the job saying so.
    """
    if getattr(settings, "CTXWEB_TASKS_INLINE", False):
        now = inline or run
        transaction.on_commit(lambda: now(job_id))
    elif settings.REDIS_URL:
        from ctxweb.celery import app

        def send() -> None:
            try:
                app.send_task(task, args=(job_id,))
            except Exception as error:  # the broker is down: say so now
                logger.exception("could not queue %s %s", task, job_id)
                unsent(job_id, error)

        transaction.on_commit(send)
    else:

        def in_thread() -> None:
            try:
                run(job_id)
            except Exception:
                logger.exception("%s %s failed in its thread", task, job_id)
            finally:
                connection.close()

        transaction.on_commit(
            lambda: threading.Thread(target=in_thread, daemon=True, name=task).start()
        )
