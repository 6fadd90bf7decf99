"""A hang detector for tests of work that must stay linear in its input: past a generous bound
(far above what linear work takes), the test fails instead of hanging CI. Not a timing
assertion: a quadratic regression takes minutes, linear work a fraction of a second."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def hang_detector(seconds: int, what: str) -> Iterator[None]:
    """Raise :class:`TimeoutError` in the block once it has run ``seconds`` (main thread)."""

    def expire(signum: int, frame: Any) -> None:
        raise TimeoutError(f"{what} still running after {seconds} s: superlinear?")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
