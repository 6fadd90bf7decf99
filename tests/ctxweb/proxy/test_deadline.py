"""The relay's deadlines: one timer bounds every await of a call (the provider's answer, each
chunk sent to the caller), a wait past the deadline ends in TimeoutError, and a cancellation
from elsewhere (a caller that left) stays a cancellation. On asyncio's loop and on uvloop's,
which the server runs."""

from __future__ import annotations

import asyncio
import functools
import math
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import uvloop

from ctxweb.proxy.relay import Deadline


class MillisecondLoop(asyncio.SelectorEventLoop):
    """asyncio's loop with a clock that counts milliseconds, as uvloop's does, kept busy: a timer
    then runs while ``time()`` still reads a tick before its time (what uvloop did once in CI)."""

    def __init__(self) -> None:
        super().__init__()
        self._clock_resolution = 0.002  # a timer due within 2 ms runs
        self.call_soon(self._tick)

    def _tick(self) -> None:
        self.call_later(0.0005, self._tick)

    def time(self) -> float:
        return math.floor(time.monotonic() * 1000) / 1000


LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "asyncio": asyncio.new_event_loop,
    "uvloop": uvloop.new_event_loop,
    "milliseconds": MillisecondLoop,
}


def run(make_loop: Callable[[], asyncio.AbstractEventLoop], scenario: Awaitable[Any]) -> Any:
    loop = make_loop()
    try:
        return loop.run_until_complete(scenario)
    finally:
        loop.close()


@pytest.fixture(params=sorted(LOOPS))
def make_loop(request: pytest.FixtureRequest) -> Callable[[], asyncio.AbstractEventLoop]:
    return LOOPS[request.param]


def test_awaits_within_the_deadline_return_and_one_past_it_times_out(
    make_loop: Callable[[], asyncio.AbstractEventLoop],
) -> None:
    async def scenario() -> tuple[list[int], float]:
        loop = asyncio.get_running_loop()
        start = loop.time()
        deadline = Deadline(loop, start + 0.3)
        results = []
        for n in range(5):  # many awaits, one deadline
            results.append(await deadline.run(functools.partial(asyncio.sleep, 0.01, n)))
        with pytest.raises(TimeoutError):
            await deadline.run(lambda: asyncio.sleep(30))
        stopped = loop.time() - start
        with pytest.raises(TimeoutError):  # past it: at once, the awaitable never made
            await deadline.run(lambda: pytest.fail("awaited past the deadline"))
        deadline.close()
        return results, stopped

    results, stopped = run(make_loop, scenario())
    assert results == [0, 1, 2, 3, 4]
    assert 0.25 <= stopped < 10


def test_a_deadline_moved_later_lets_a_wait_past_the_first_one_finish(
    make_loop: Callable[[], asyncio.AbstractEventLoop],
) -> None:
    """As the caller's send timeout: each send has its own seconds, on the same timer."""

    async def scenario() -> list[str]:
        loop = asyncio.get_running_loop()
        deadline = Deadline(loop)
        done = []
        for n in range(3):
            deadline.until(loop.time() + 0.2)
            done.append(await deadline.run(functools.partial(asyncio.sleep, 0.15, f"sent {n}")))
        deadline.until(loop.time() + 0.1)
        with pytest.raises(TimeoutError):
            await deadline.run(lambda: asyncio.sleep(30))
        deadline.close()
        return done

    assert run(make_loop, scenario()) == ["sent 0", "sent 1", "sent 2"]


def test_a_cancellation_from_elsewhere_stays_a_cancellation(
    make_loop: Callable[[], asyncio.AbstractEventLoop],
) -> None:
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        deadline = Deadline(loop, loop.time() + 30)
        waiting = asyncio.ensure_future(deadline.run(lambda: asyncio.sleep(30)))
        await asyncio.sleep(0.05)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert waiting.cancelled()
        deadline.close()

    run(make_loop, scenario())


class CancelledAsItFires(Deadline):
    """A deadline whose timer fires in the same turn of the loop as a cancellation from
    elsewhere, before or after it (two timers due at the same time do not promise that: uvloop
    rounds each to its milliseconds when it is set, and may run them a turn apart)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, at: float, *, first: bool) -> None:
        super().__init__(loop, at)
        self.first = first

    def _fire(self) -> None:
        task = self.waiting
        if task is not None and self.first:
            task.cancel()
        super()._fire()
        if task is not None and not self.first:
            task.cancel()


@pytest.mark.parametrize("first", [True, False], ids=["cancelled-first", "deadline-first"])
def test_a_cancellation_from_elsewhere_as_the_deadline_passes_stays_one(
    make_loop: Callable[[], asyncio.AbstractEventLoop], first: bool
) -> None:
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        deadline = CancelledAsItFires(loop, loop.time() + 0.1, first=first)

        async def waits() -> None:
            await deadline.run(lambda: asyncio.sleep(30))

        waiting = asyncio.ensure_future(waits())
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert waiting.cancelled()
        deadline.close()

    run(make_loop, scenario())


def test_the_deadline_interrupts_only_the_wait_it_bounds(
    make_loop: Callable[[], asyncio.AbstractEventLoop],
) -> None:
    """The timer fires while the task waits on something else: nothing is cancelled, and the
    next bounded wait times out at once."""

    async def scenario() -> str:
        loop = asyncio.get_running_loop()
        deadline = Deadline(loop, loop.time() + 0.05)
        assert await deadline.run(lambda: asyncio.sleep(0, "in time")) == "in time"
        await asyncio.sleep(0.2)  # not bounded: the timer fires meanwhile
        with pytest.raises(TimeoutError):
            await deadline.run(lambda: asyncio.sleep(30))
        deadline.close()
        return "not cancelled"

    assert run(make_loop, scenario()) == "not cancelled"
