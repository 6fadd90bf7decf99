"""Every input that answered 500 (issue "No input brings ctxweb down") answers a 4xx, or succeeds,
and leaves nothing half done: Unicode digits and integers past 64 bits where numbers enter,
infinite and NaN numbers, values past what a column holds, ids that read as routes, a turn in
another format than its session's, an Apply form's parameters that are not an object."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from ctxweb.contexts.models import Operation, Session, Turn
from tests.support.world import World

pytestmark = pytest.mark.django_db

MESSAGES = [{"role": "user", "content": "hi"}]


def post(client: Any, path: str, body: Any) -> Any:
    data = body if isinstance(body, str) else json.dumps(body)
    return client.post(path, data, content_type="application/json")


def turn(world: World, session: str = "s1", **extra: Any) -> Any:
    request = {"model": "gpt-4o", "messages": MESSAGES, **extra.pop("request", {})}
    body = {"format": "openai-chat", "request": request, **extra}
    return post(world.api(world.operator_key), f"/api/v1/sessions/{session}/turns", body)


@pytest.fixture
def owner(world: World) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(world.owner)
    assert turn(world).status_code == 201
    return client


def assert_error(response: Any, status: int, field: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.content[:500]
    error: dict[str, Any] = response.json()["error"]
    if field is not None:
        assert field in error["fields"], error
    return error


# --- Unicode digits and huge integers in ids, page numbers and project= -----------------------


@pytest.mark.parametrize(
    "path",
    [
        "/?project=²",
        "/?project=" + str(2**70),
        "/?page=²",
        "/sessions/s1/turns/0/?page=²",
    ],
)
def test_pages_read_unicode_digits_and_huge_numbers_as_no_number(owner: Client, path: str) -> None:
    assert owner.get(path).status_code == 200


def test_an_artifact_id_of_unicode_digits_is_not_found(world: World, owner: Client) -> None:
    assert_error(world.api(world.operator_key).get("/api/v1/artifacts/²"), 404)
    assert owner.get("/artifacts/²/").status_code == 404


def test_a_turn_index_of_unicode_digits_jumps_to_the_latest_turn(owner: Client) -> None:
    response = owner.get("/sessions/s1/turns/", {"index": "²"})
    assert response.status_code == 302
    assert response["Location"].endswith("/sessions/s1/turns/0/")


def test_a_preview_turn_of_unicode_digits_is_shown_as_a_field_error(owner: Client) -> None:
    response = owner.get("/sessions/s1/preview/", {"turn": "²"})
    assert response.status_code == 200
    assert "must be a turn number" in response.content.decode()


def test_switching_to_a_project_of_unicode_digits_is_refused(owner: Client) -> None:
    response = owner.post("/accounts/project/", {"project": "²"})
    assert response.status_code == 302


# --- numbers a column cannot hold -----------------------------------------------------------------


def test_usage_past_a_columns_range_is_a_400_naming_it(world: World) -> None:
    response = turn(world, "s2", usage={"prompt_tokens": 2**70, "completion_tokens": 1})
    assert_error(response, 400)
    assert not Session.objects.filter(external_id="s2").exists()


@pytest.mark.parametrize("value", [2**70, -1, 0])
def test_an_output_reserve_out_of_range_is_a_400_naming_it(world: World, value: int) -> None:
    response = turn(world, "s3", request={"max_tokens": value})
    assert_error(response, 400, "request.max_tokens")
    assert not Session.objects.filter(external_id="s3").exists()


@pytest.mark.parametrize(
    "body",
    [
        '{"format": "openai-chat", "request": {"model": "gpt-4o", "messages": [{"role": "user",'
        ' "content": "hi"}], "temperature": 1e999}}',
        '{"format": "openai-chat", "request": {"model": "gpt-4o", "messages": [{"role": "user",'
        ' "content": "hi", "x": NaN}]}}',
    ],
)
def test_infinite_and_nan_numbers_are_refused(world: World, body: str) -> None:
    response = post(world.api(world.operator_key), "/api/v1/sessions/s5/turns", body)
    assert_error(response, 400)
    assert not Session.objects.filter(external_id="s5").exists()


def test_a_policy_with_an_infinite_number_is_refused(world: World, owner: Client) -> None:
    body = '{"policy": {"auto": {"strategy": "ctxweb-auto", "params": {"target_fraction": 1e999}}}}'
    response = world.api(world.operator_key).patch(
        "/api/v1/sessions/s1", body, content_type="application/json"
    )
    assert_error(response, 400)


@pytest.mark.parametrize(
    "query", [{"min_fill": "nan"}, {"max_fill": "inf"}, {"offset": "10833189975747055616"}]
)
def test_session_filters_out_of_range_are_a_400(world: World, query: dict[str, str]) -> None:
    response = world.api(world.operator_key).get("/api/v1/sessions", query)
    assert_error(response, 400, next(iter(query)))


def test_a_model_longer_than_its_column_is_a_400(world: World) -> None:
    response = turn(world, "s7", request={"model": "m" * 5000})
    assert_error(response, 400, "request.model")


# --- ids, formats and half-done work ------------------------------------------------------------


@pytest.mark.parametrize("session", ["x/turns", "w/preview", "q/turns/5", "a//b", "a/./b", ".."])
def test_a_session_id_that_reads_as_a_route_is_refused(world: World, session: str) -> None:
    response = turn(world, session)
    assert response.status_code in (400, 404), response.content
    assert not Session.objects.filter(external_id=session).exists()


def test_a_turn_in_another_format_than_its_sessions_is_a_409(world: World, owner: Client) -> None:
    body = {
        "format": "anthropic-messages",
        "request": {"model": "claude", "max_tokens": 10, "messages": MESSAGES},
    }
    response = post(world.api(world.operator_key), "/api/v1/sessions/s1/turns", body)
    error = assert_error(response, 409, "format")
    assert "openai-chat" in error["message"]
    assert Turn.objects.filter(session__external_id="s1").count() == 1


@pytest.mark.parametrize("params", ["[]", '[["target_tokens", 500]]', "1e999", "[[[["])
def test_the_apply_form_refuses_parameters_that_are_no_object(owner: Client, params: str) -> None:
    response = owner.post("/sessions/s1/operations/", {"strategy": "ctxweb-auto", "params": params})
    assert response.status_code == 302
    assert not Operation.objects.exists()


def test_an_unhandled_error_under_the_api_is_the_contracts_json(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ctxweb.api import health

    def fail(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(health.HealthApi, "get", fail)
    client = Client(raise_request_exception=False)
    error = assert_error(client.get("/api/v1/health"), 500)
    assert error["code"] == "server_error"
