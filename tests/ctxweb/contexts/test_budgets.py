"""Previews run within a time budget, a few at a time, and pages are rate limited like the API.

A preview that runs out of time is stopped and answered 422 (the page says so beside the form);
when every preview slot stays taken the caller gets 503 with ``Retry-After``; a user loading the
preview page faster than ``CTXWEB_RATE_LIMIT_COSTLY`` gets 429 with ``Retry-After``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client

from ctxweb.contexts.services import budgets, planning
from tests.support.world import World

pytestmark = pytest.mark.django_db

PREVIEW = {
    "format": "openai-chat",
    "request": {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]},
    "strategy": "nanobot-trim",
}


def spin(**_: Any) -> Any:
    """A computation that never ends on its own (it sleeps in steps, as Python code does)."""
    while True:
        time.sleep(0.005)


def wait_for_no_thread(name: str, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(t.name == f"ctxweb-{name}" for t in threading.enumerate()):
            return True
        time.sleep(0.01)
    return False


@pytest.fixture
def one_slot(settings: Any) -> None:
    settings.CTXWEB_PREVIEW_WORKERS = 1


@pytest.fixture
def occupied(one_slot: None) -> Iterator[None]:
    """The one preview slot held by another computation until the test ends."""
    release = threading.Event()
    started = threading.Event()

    def hold() -> None:
        started.set()
        while not release.is_set():
            time.sleep(0.005)

    holder = threading.Thread(
        target=lambda: budgets.run_within_budget(hold, seconds=60, name="holder"), daemon=True
    )
    holder.start()
    assert started.wait(10)
    yield
    release.set()
    holder.join(10)


# --- the budget itself ----------------------------------------------------------------------------


def test_a_computation_within_its_budget_returns_its_value() -> None:
    assert budgets.run_within_budget(lambda: sum(range(10)), seconds=10) == 45


def test_a_computations_own_error_reaches_the_caller() -> None:
    def fail() -> None:
        raise ValueError("bad parameter")

    with pytest.raises(ValueError, match="bad parameter"):
        budgets.run_within_budget(fail, seconds=10)


def test_a_runaway_computation_is_stopped_and_frees_its_slot(one_slot: None) -> None:
    with pytest.raises(budgets.OverBudget) as raised:
        budgets.run_within_budget(spin, seconds=0.2, name="runaway")
    assert not isinstance(raised.value, budgets.Busy)
    assert "0.2 s" in str(raised.value)
    assert wait_for_no_thread("runaway"), "the stopped computation's thread is still running"
    # Its one slot is free again.
    assert budgets.run_within_budget(lambda: "next", seconds=10) == "next"


def test_a_caller_finding_every_slot_taken_is_told_busy(occupied: None) -> None:
    with pytest.raises(budgets.Busy):
        budgets.run_within_budget(lambda: "never run", seconds=0.2)


# --- the API --------------------------------------------------------------------------------------


def post_preview(world: World) -> Any:
    return world.api(world.operator_key).post(
        "/api/v1/preview", json.dumps(PREVIEW), content_type="application/json"
    )


def test_a_preview_over_its_budget_answers_422_and_is_stopped(
    world: World, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.CTXWEB_PREVIEW_SECONDS = 0.3
    monkeypatch.setattr(planning, "plan_for_context", spin)
    response = post_preview(world)
    assert response.status_code == 422, response.content
    error = response.json()["error"]
    assert error["code"] == "too_slow"
    assert "0.3 s" in error["message"]
    assert "operation" in error["message"]
    assert wait_for_no_thread("preview")


def test_a_preview_when_every_slot_stays_busy_answers_503_with_retry_after(
    world: World, settings: Any, occupied: None
) -> None:
    settings.CTXWEB_PREVIEW_SECONDS = 0.2
    response = post_preview(world)
    assert response.status_code == 503, response.content
    assert response.json()["error"]["code"] == "busy"
    assert int(response["Retry-After"]) > 0


def test_a_preview_within_its_budget_is_unchanged(world: World, settings: Any) -> None:
    settings.CTXWEB_PREVIEW_SECONDS = 30
    response = post_preview(world)
    assert response.status_code == 200, response.content
    assert response.json()["strategy"] == "nanobot-trim"


# --- the preview page -----------------------------------------------------------------------------


def ingest(world: World, external_id: str = "s1") -> None:
    response = world.api(world.ingest_key).post(
        f"/api/v1/sessions/{external_id}/turns",
        json.dumps({"format": "openai-chat", "request": PREVIEW["request"]}),
        content_type="application/json",
    )
    assert response.status_code == 201, response.content


def viewer(world: World) -> Client:
    client = Client()
    client.force_login(world.teammate)
    return client


def test_the_preview_page_says_when_a_preview_ran_out_of_time(
    world: World, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    ingest(world)
    settings.CTXWEB_PREVIEW_SECONDS = 0.3
    monkeypatch.setattr(planning, "plan_for_context", spin)
    response = viewer(world).get("/sessions/s1/preview/", {"strategy": "llm4s-pipeline"})
    assert response.status_code == 200
    html = response.content.decode()
    assert "took longer than 0.3 s and was stopped" in html
    assert 'role="alert"' in html


def test_the_preview_page_answers_503_when_every_slot_stays_busy(
    world: World, settings: Any, occupied: None
) -> None:
    ingest(world)
    settings.CTXWEB_PREVIEW_SECONDS = 0.2
    response = viewer(world).get("/sessions/s1/preview/")
    assert response.status_code == 503
    assert int(response["Retry-After"]) > 0
    assert "stayed busy" in response.content.decode()


# --- rate limits on pages -------------------------------------------------------------------------


@pytest.mark.usefixtures("clear_of_a_minutes_end")
def test_a_viewer_loading_the_preview_page_too_fast_gets_429(world: World, settings: Any) -> None:
    ingest(world)
    settings.CTXWEB_RATE_LIMIT_COSTLY = "2/min"
    client = viewer(world)
    for _ in range(2):
        assert client.get("/sessions/s1/preview/").status_code == 200
    response = client.get("/sessions/s1/preview/", {"strategy": "llm4s-pipeline", "budget": "50"})
    assert response.status_code == 429
    assert 0 < int(response["Retry-After"]) <= 60
    assert "Too many requests" in response.content.decode()
    # Other pages count against the general budget only; other users have their own.
    assert client.get("/sessions/s1/").status_code == 200
    owner = Client()
    owner.force_login(world.owner)
    assert owner.get("/sessions/s1/preview/").status_code == 200


@pytest.mark.usefixtures("clear_of_a_minutes_end")
def test_every_page_counts_against_the_general_budget(world: World, settings: Any) -> None:
    ingest(world)
    settings.CTXWEB_RATE_LIMIT = "3/min"
    client = viewer(world)
    for path in ("/", "/sessions/s1/", "/sessions/s1/turns/0/"):
        assert client.get(path).status_code == 200, path
    assert client.get("/").status_code == 429
    # The API and the page share one budget per user.
    assert client.get("/api/v1/sessions").status_code == 429


@pytest.mark.usefixtures("clear_of_a_minutes_end")
def test_the_login_page_and_static_files_are_not_counted(settings: Any) -> None:
    settings.CTXWEB_RATE_LIMIT = "1/min"
    for _ in range(3):
        assert Client().get("/accounts/login/").status_code == 200
