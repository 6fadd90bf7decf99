"""Costly computations (previews) run with a time budget, a few at a time, off the caller's thread.

A preview plans a strategy over a whole context inside the web process. Every strategy runs in
time linear in its input, but a 30 MB context still takes seconds, and a server must keep
answering everyone else meanwhile. :func:`run_within_budget` runs the computation on a thread of
its own, at most ``CTXWEB_PREVIEW_WORKERS`` at once per process, and gives up after
``CTXWEB_PREVIEW_SECONDS``:

- a caller that finds every slot taken waits for one until its budget runs out, then gets
  :class:`Busy` (the API answers 503 with ``Retry-After``), so a burst of costly requests queues
  instead of starving the process;
- a computation still running when its budget runs out is stopped: :class:`Cancelled` is raised
  inside its thread at the next Python instruction (``PyThreadState_SetAsyncExc``, the only way
  CPython offers to stop a thread), its slot is freed as it unwinds, and the caller gets
  :class:`OverBudget` at once. What a plan touches while it runs is either its own (the plan's
  scoped counter, its edits) or a shared cache whose entries are written whole, so stopping it
  between two instructions loses nothing but the plan.

The budget is wall time, not CPU time: a server under load cancels sooner, which is the point.
"""

from __future__ import annotations

import ctypes
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from django.conf import settings

T = TypeVar("T")

__all__ = ["Busy", "Cancelled", "OverBudget", "run_within_budget"]


class OverBudget(Exception):
    """The computation did not finish within its budget and was stopped."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"took longer than {seconds:g} s")
        self.seconds = seconds


class Busy(OverBudget):
    """Every slot stayed taken by other computations for the whole budget."""

    def __init__(self, seconds: float) -> None:
        super().__init__(seconds)
        self.args = (f"no free slot within {seconds:g} s",)


class Cancelled(BaseException):
    """Raised inside a computation's thread to stop it (a BaseException: ``except Exception``
    in the computation does not swallow it)."""


_slots_lock = threading.Lock()
_slots: threading.BoundedSemaphore | None = None
_slots_size = 0


def _semaphore() -> threading.BoundedSemaphore:
    """The process's slots, sized by ``CTXWEB_PREVIEW_WORKERS`` (re-read when it changes)."""
    global _slots, _slots_size
    size = max(1, int(settings.CTXWEB_PREVIEW_WORKERS))
    with _slots_lock:
        if _slots is None or _slots_size != size:
            _slots, _slots_size = threading.BoundedSemaphore(size), size
        return _slots


def _stop(thread: threading.Thread) -> None:
    ident = thread.ident
    if ident is not None and thread.is_alive():
        ctypes.pythonapi.PyThreadState_SetAsyncExc(
            ctypes.c_ulong(ident), ctypes.py_object(Cancelled)
        )


def run_within_budget(
    function: Callable[[], T], *, seconds: float | None = None, name: str = "budgeted"
) -> T:
    """``function()``'s result, computed on its own thread within ``seconds`` of wall time
    (default ``CTXWEB_PREVIEW_SECONDS``), waiting for a free slot inside that same budget.

    Raises :class:`Busy` when no slot frees in time, :class:`OverBudget` when the computation
    runs out of time (it is stopped), and whatever ``function`` raises otherwise.

    Example:
        >>> run_within_budget(lambda: 6 * 7, seconds=5)
        42
    """
    budget = float(settings.CTXWEB_PREVIEW_SECONDS if seconds is None else seconds)
    deadline = time.monotonic() + budget
    slots = _semaphore()
    if not slots.acquire(timeout=budget):
        raise Busy(budget)
    outcome: dict[str, object] = {}
    finished = threading.Event()

    def work() -> None:
        try:
            try:
                outcome["value"] = function()
            except Cancelled:
                return
            except BaseException as error:  # handed to the caller, raised there
                outcome["error"] = error
            finally:
                finished.set()
        except Cancelled:  # arrived after the function returned: nothing left to stop
            pass
        finally:
            slots.release()

    worker = threading.Thread(target=work, name=f"ctxweb-{name}", daemon=True)
    try:
        worker.start()
    except BaseException:
        slots.release()
        raise
    finished_in_time = finished.wait(timeout=max(0.0, deadline - time.monotonic()))
    # Finished just after the wait gave up: its thread is freeing its slot, leave it be.
    if not finished_in_time and not finished.is_set():
        _stop(worker)
        raise OverBudget(budget)
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["value"]  # type: ignore[return-value]
