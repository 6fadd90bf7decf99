"""Work a request leaves for after its answer is sent.

A view's work that the caller does not wait for (a turn's attribution rollups: issue 36) is handed
to :func:`after_answer`. Served by :class:`ctxweb.serving.ThreadedDjangoApplication`, which opens
:func:`answers_pending` around each request, it runs in the same pool thread once the answer's
last byte is handed to the server (the next request on the connection does not wait for it);
anywhere else (the test client, a management command, a recorder) it runs at once. Either way it
runs outside the request's transaction, and its failure is logged, never the caller's: whatever
it leaves undone must be caught up by whoever reads its result.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from django.db import close_old_connections

logger = logging.getLogger(__name__)

Work = Callable[[], object]

#: Work a request may leave for after its answer; past it (a capture batch of thousands of
#: calls), work runs at once, as it would without an answer to wait for: what a work holds (a
#: turn's messages) is not kept for the whole batch.
PENDING_MAX = 16

_LOCAL = threading.local()


def after_answer(work: Work) -> None:
    """Run ``work`` once the current answer is sent, or now when nothing sends one here."""
    if answer_deferred():
        _LOCAL.pending.append(work)
    else:
        run_all([work], release=False)


def answer_deferred() -> bool:
    """Whether work handed to :func:`after_answer` now waits for an answer to be sent."""
    pending: list[Work] | None = getattr(_LOCAL, "pending", None)
    return pending is not None and len(pending) < PENDING_MAX


@contextmanager
def answers_pending() -> Iterator[list[Work]]:
    """Collect the work :func:`after_answer` is handed in this thread while the block runs (a
    request's), to be run by :func:`run_all` once its answer is sent."""
    previous = getattr(_LOCAL, "pending", None)
    pending: list[Work] = []
    _LOCAL.pending = pending
    try:
        yield pending
    finally:
        _LOCAL.pending = previous


def run_all(works: list[Work], *, release: bool = True) -> None:
    """Run ``works`` in order, each failure logged; with ``release``, this thread's database
    connection then closed or kept as the end of a request leaves it."""
    try:
        for work in works:
            try:
                work()
            except Exception:
                logger.exception("after the answer: %r failed", work)
    finally:
        works.clear()
        if release:
            close_old_connections()
