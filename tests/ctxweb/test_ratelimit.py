"""Rate limits counted in fixed windows of the cache: rates as DRF writes them, one count per
request in its window (exact under concurrent requests, with the local cache and with Redis),
a new window starting from zero, ``Retry-After`` until the window ends."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from django.core.cache import caches
from django.core.exceptions import ImproperlyConfigured

from ctxweb import ratelimit
from ctxweb.ratelimit import Hit, Rate, parse_rate


@pytest.mark.parametrize(
    ("text", "rate"),
    [
        ("1200/min", Rate(1200, 60)),
        ("10/s", Rate(10, 1)),
        ("10/sec", Rate(10, 1)),
        (" 5/hour ", Rate(5, 3600)),
        ("7/day", Rate(7, 86400)),
        ("", None),
        (None, None),
    ],
)
def test_rates_are_read_as_drf_writes_them(text: str | None, rate: Rate | None) -> None:
    assert parse_rate(text) == rate


@pytest.mark.parametrize("text", ["1200", "x/min", "12/fortnight", "0/min", "-3/min", "/min"])
def test_a_value_that_is_no_rate_is_refused_by_name(text: str) -> None:
    with pytest.raises(ImproperlyConfigured, match="is not a rate"):
        parse_rate(text)


def test_a_hit_over_the_rate_waits_until_its_window_ends() -> None:
    rate = Rate(3, 60)
    assert Hit(3, 12.5).wait(rate) is None
    assert Hit(4, 12.5).wait(rate) == 13
    assert Hit(9, 0.2).wait(rate) == 1  # never 0: the window ends within the second


@pytest.fixture
def name() -> str:
    return f"test-{uuid.uuid4().hex}"


def test_each_request_counts_once_in_its_window(name: str) -> None:
    rate = Rate(3, 60)
    start = 6_000_000.0  # the start of a window of 60 s
    counts = [ratelimit.hit(name, rate, now=start + i).count for i in range(5)]
    assert counts == [1, 2, 3, 4, 5]
    last = ratelimit.hit(name, rate, now=start + 59.5)
    assert (last.count, last.remaining, last.wait(rate)) == (6, 0.5, 1)
    # the next window starts from nothing; another caller, or another period, has its own
    assert ratelimit.hit(name, rate, now=start + 60).count == 1
    assert ratelimit.hit(name + "-other", rate, now=start + 1).count == 1
    assert ratelimit.hit(name, Rate(3, 1), now=start + 1).count == 1


def _from_threads(call: Callable[[], Any], *, threads: int = 8, each: int = 25) -> list[Any]:
    """What ``call`` returned, called ``each`` times on each of ``threads`` threads at once."""
    seen: list[Any] = []
    lock = threading.Lock()

    def work() -> None:
        results = [call() for _ in range(each)]
        with lock:
            seen.extend(results)

    running = [threading.Thread(target=work) for _ in range(threads)]
    for thread in running:
        thread.start()
    for thread in running:
        thread.join()
    return seen


def test_concurrent_requests_are_each_counted(name: str) -> None:
    rate = Rate(1000, 3600)
    seen = _from_threads(lambda: ratelimit.hit(name, rate, now=7_200_000.0).count)
    assert sorted(seen) == list(range(1, 201))  # every request its own count, none lost


def test_with_redis_a_count_is_one_round_trip_that_expires(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from redis.client import Pipeline

    from ctxweb.cache import RedisCache

    backend = caches["default"]
    if not isinstance(backend, RedisCache):
        pytest.skip("the Redis cache: REDIS_URL is not set (the production pass sets it)")
    sent: list[list[str]] = []
    execute = Pipeline.execute

    def counting(self: Pipeline, *args: Any, **kwargs: Any) -> Any:
        sent.append([command[0][0] for command in self.command_stack])
        return execute(self, *args, **kwargs)

    monkeypatch.setattr(Pipeline, "execute", counting)
    hit = ratelimit.hit(name, Rate(5, 60), now=60_000.0 + 30)
    assert hit.count == 1
    assert sent == [["INCRBY", "EXPIRE"]]  # sent together: one round trip
    key = backend.make_and_validate_key(f"{name}:60:1000")
    assert 0 < backend._cache.get_client().ttl(key) <= 61


def test_a_budget_goes_into_debt_by_one_call_and_refills_at_its_rate(name: str) -> None:
    now = 9_000_000.0

    def debit(amount: int, at: float) -> float | None:
        return ratelimit.debit(name, amount, per_second=100.0, burst=10.0, now=now + at)

    assert debit(600, 0) is None  # 6 s of the 10 s it holds
    assert debit(600, 0) is None  # within its burst when sent: 12 s, 2 s in debt
    assert debit(1, 0) == pytest.approx(2.0)  # refused, and not charged
    assert debit(1, 1) == pytest.approx(1.0)
    assert debit(100, 2) is None  # repaid: 11 s from whole again
    assert debit(1, 2.5) == pytest.approx(0.5)
    # a call far over the budget goes when the budget is whole; its debt is then waited for
    assert debit(100_000, 60) is None
    assert debit(1, 61) == pytest.approx(1000 - 1 - 10)
    # another caller's budget is its own
    assert ratelimit.debit(name + "-other", 1, per_second=100.0, burst=10.0, now=now) is None


def test_concurrent_debits_are_each_charged(name: str) -> None:
    admitted = _from_threads(
        lambda: ratelimit.debit(name, 1, per_second=1.0, burst=99.0, now=9_100_000.0) is None
    )
    # within 99 s of debt: the first 100 calls of 1 s each, none more (none charged twice)
    assert admitted.count(True) == 100


def test_with_redis_a_debit_is_one_script_that_expires(name: str) -> None:
    from ctxweb.cache import RedisCache

    backend = caches["default"]
    if not isinstance(backend, RedisCache):
        pytest.skip("the Redis cache: REDIS_URL is not set (the production pass sets it)")
    client = backend._cache.get_client()
    before = client.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0)
    now = time.time()
    assert ratelimit.debit(name, 500, per_second=100.0, burst=1.0, now=now) is None
    after = client.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0)
    assert after == before + 1
    key = backend.make_and_validate_key(f"{name}:debit")
    assert float(client.get(key)) == pytest.approx(now + 5.0)
    assert 0 < client.ttl(key) <= 6
