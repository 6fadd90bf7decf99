"""Work left for after a request's answer (:mod:`ctxweb.afterwards`)."""

from __future__ import annotations

import logging

import pytest

from ctxweb.afterwards import PENDING_MAX, after_answer, answer_deferred, answers_pending, run_all


def test_work_waits_for_the_answer_only_inside_a_request() -> None:
    done: list[int] = []
    assert not answer_deferred()
    after_answer(lambda: done.append(0))
    assert done == [0]  # nothing sends an answer here: at once
    with answers_pending() as later:
        assert answer_deferred()
        after_answer(lambda: done.append(1))
        after_answer(lambda: done.append(2))
    assert done == [0]
    assert not answer_deferred()
    run_all(later, release=False)
    assert done == [0, 1, 2]
    assert later == []


def test_past_the_limit_work_runs_at_once() -> None:
    done: list[int] = []
    with answers_pending() as later:
        for number in range(PENDING_MAX + 3):
            after_answer(lambda number=number: done.append(number))
        assert not answer_deferred()
    assert done == [PENDING_MAX, PENDING_MAX + 1, PENDING_MAX + 2]
    run_all(later, release=False)
    assert sorted(done) == list(range(PENDING_MAX + 3))


def test_a_failing_work_is_logged_and_the_rest_runs(caplog: pytest.LogCaptureFixture) -> None:
    done: list[str] = []

    def fails() -> None:
        raise RuntimeError("the rollups could not be written")

    with caplog.at_level(logging.ERROR, logger="ctxweb.afterwards"):
        run_all([fails, lambda: done.append("after")], release=False)
    assert done == ["after"]
    assert "the rollups could not be written" in caplog.text
