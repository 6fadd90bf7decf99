"""Managed mode's preparation budget: bodies being parsed at once are bounded in bytes, a big
body waits for room, and a small one finds room beside a big one."""

from __future__ import annotations

import asyncio

from ctxweb.proxy.relay import _Budget


def test_a_body_waits_for_room_and_a_small_one_passes_beside_a_big_one() -> None:
    order: list[str] = []

    async def prepare(budget: _Budget, name: str, size: int, hold: asyncio.Event) -> None:
        async with budget.held(size):
            order.append(f"{name} in")
            await hold.wait()
        order.append(f"{name} out")

    async def scenario() -> None:
        budget = _Budget(32)
        first_done, second_done, small_done = asyncio.Event(), asyncio.Event(), asyncio.Event()
        first = asyncio.create_task(prepare(budget, "big-1", 24, first_done))
        await asyncio.sleep(0)
        second = asyncio.create_task(prepare(budget, "big-2", 24, second_done))
        small = asyncio.create_task(prepare(budget, "small", 4, small_done))
        await asyncio.sleep(0.01)
        # the second big body waits; the small one is prepared beside the first
        assert order == ["big-1 in", "small in"]
        assert budget.free == 4
        small_done.set()
        first_done.set()
        await asyncio.wait_for(asyncio.gather(first, small), 5)
        await asyncio.sleep(0.01)
        assert order[-1] == "big-2 in"
        second_done.set()
        await asyncio.wait_for(second, 5)
        assert budget.free == 32

    asyncio.run(scenario())


def test_a_body_larger_than_the_budget_is_prepared_alone() -> None:
    async def scenario() -> int:
        budget = _Budget(10)
        async with budget.held(1000):
            return budget.free

    assert asyncio.run(scenario()) == 0
