"""A session's context window: stated by a posted turn, or guessed (and shown as guessed)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.world import World

pytestmark = pytest.mark.django_db

ASK = {"role": "user", "content": "List the files in the repository."}


def post(world: World, external_id: str, model: str, **extra: Any) -> Any:
    body = {"format": "openai-chat", "request": {"model": model, "messages": [ASK]}, **extra}
    response = world.api(world.ingest_key).post(
        f"/api/v1/sessions/{external_id}/turns",
        data=json.dumps(body),
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    return response.json()


def session(world: World, external_id: str) -> dict[str, Any]:
    response = world.api(world.ingest_key).get(f"/api/v1/sessions/{external_id}")
    assert response.status_code == 200, response.content
    body: dict[str, Any] = response.json()
    return body


def test_a_window_the_turn_states_is_the_sessions_and_not_guessed(world: World) -> None:
    assert post(world, "stated", "gpt-4o", context_window=64_000)["context_window"] == 64_000
    detail = session(world, "stated")
    assert (detail["context_window"], detail["context_window_source"]) == (64_000, "request")


def test_a_known_models_window_is_guessed_from_the_table(world: World) -> None:
    assert post(world, "table", "gpt-4.1")["context_window"] == 1_047_576
    detail = session(world, "table")
    assert (detail["context_window"], detail["context_window_source"]) == (1_047_576, "model")


def test_an_unknown_models_window_is_the_default_and_guessed(world: World) -> None:
    post(world, "unknown", "brand-new-model")
    detail = session(world, "unknown")
    assert (detail["context_window"], detail["context_window_source"]) == (128_000, "default")


def test_a_later_turn_stating_the_window_replaces_the_guess(world: World) -> None:
    post(world, "later", "gpt-4o")
    assert session(world, "later")["context_window_source"] == "model"
    answer = post(world, "later", "gpt-4o", context_window=100_000)
    assert answer["context_window"] == 100_000
    assert answer["usage_ratio"] == pytest.approx(answer["total_tokens"] / 100_000)
    detail = session(world, "later")
    assert (detail["context_window"], detail["context_window_source"]) == (100_000, "request")
    # a turn that states nothing keeps the stated window
    assert post(world, "later", "gpt-4o")["context_window"] == 100_000
    assert session(world, "later")["context_window_source"] == "request"


def test_the_session_page_marks_a_guessed_window_and_says_how_to_state_it(world: World) -> None:
    post(world, "guessed", "gpt-4o")
    post(world, "known", "gpt-4o", context_window=64_000)
    page = world.login(world.owner).get("/sessions/guessed/").content.decode()
    assert ">guessed</span>" in page
    assert "State it with context_window in a posted turn" in page
    assert "ctxweb's figure for the model" in page
    assert (
        ">guessed</span>" not in world.login(world.owner).get("/sessions/known/").content.decode()
    )
