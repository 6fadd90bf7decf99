"""A session's policy (issue 34, item 10): any shape but the documented one is a 400 naming the
field, and nothing is stored; a policy sets its trigger, a fraction of usable or a number of
tokens, which the automatic policy fires at and the session's chart draws as its trigger line."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from ctxweb.contexts import selectors
from ctxweb.contexts.models import Operation, Session
from ctxweb.numbers import MAX_COUNT
from tests.support.builders import body, history
from tests.support.world import World

pytestmark = pytest.mark.django_db

AUTO = {"strategy": "baseagent-middle-out", "params": {}, "enabled": True}


@pytest.fixture(autouse=True)
def inline_tasks(settings: Any) -> None:
    settings.CTXWEB_TASKS_INLINE = True


@pytest.fixture
def commit(django_capture_on_commit_callbacks: Any) -> Any:
    def run(call: Any) -> Any:
        with django_capture_on_commit_callbacks(execute=True):
            return call()

    return run


def post_turn(world: World, external_id: str, steps: int, window: int) -> int:
    payload = {**body(history(steps)), "context_window": window}
    response = world.api(world.ingest_key).post(
        f"/api/v1/sessions/{external_id}/turns",
        data=json.dumps(payload),
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    return int(response.json()["total_tokens"])


def patch(world: World, external_id: str, data: Any) -> Any:
    return world.api(world.operator_key).patch(
        f"/api/v1/sessions/{external_id}", data=data, format="json"
    )


@pytest.mark.parametrize(
    ("policy", "field"),
    [
        ({"strategy": "ctxweb-auto"}, "policy.strategy"),
        ({"enabled": True}, "policy.enabled"),
        ({"auto": {"strategy": "ctxweb-auto", "enabeld": False}}, "policy.auto.enabeld"),
        ({"auto": "ctxweb-auto"}, "policy.auto"),
        ({"auto": {"strategy": 3}}, "policy.auto.strategy"),
        ({"auto": {"strategy": "ctxweb-auto", "enabled": "yes"}}, "policy.auto.enabled"),
        ({"auto": {"strategy": "ctxweb-auto", "params": [1]}}, "policy.auto.params"),
        ({"auto": {"strategy": "ctxweb-auto", "params": "x"}}, "policy.auto.params"),
        ({"trigger": 0.8}, "policy.trigger"),
        ({"trigger": {}}, "policy.trigger"),
        ({"trigger": {"fraction": 0.5, "tokens": 1000}}, "policy.trigger"),
        ({"trigger": {"percent": 80}}, "policy.trigger.percent"),
        ({"trigger": {"fraction": 0}}, "policy.trigger.fraction"),
        ({"trigger": {"fraction": -0.5}}, "policy.trigger.fraction"),
        ({"trigger": {"fraction": 1.5}}, "policy.trigger.fraction"),
        ({"trigger": {"fraction": True}}, "policy.trigger.fraction"),
        ({"trigger": {"fraction": "0.8"}}, "policy.trigger.fraction"),
        ({"trigger": {"tokens": 0}}, "policy.trigger.tokens"),
        ({"trigger": {"tokens": 1.5}}, "policy.trigger.tokens"),
        ({"trigger": {"tokens": MAX_COUNT + 1}}, "policy.trigger.tokens"),
        ({"trigger": {"tokens": "150000"}}, "policy.trigger.tokens"),
        ({"trigger": {"tokens": False}}, "policy.trigger.tokens"),
    ],
)
def test_it_refuses_a_policy_of_any_other_shape_naming_the_field(
    world: World, policy: Any, field: str
) -> None:
    post_turn(world, "s1", 1, 200_000)
    response = patch(world, "s1", {"policy": policy})
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert field in error["fields"], error
    assert Session.objects.get(external_id="s1").policy == {}


@pytest.mark.parametrize(
    ("data", "field"),
    [({"policy": {}, "polcy": {"auto": AUTO}}, "polcy"), ({"policy": "auto"}, "policy")],
)
def test_it_refuses_a_body_of_any_other_shape_naming_the_field(
    world: World, data: Any, field: str
) -> None:
    post_turn(world, "s1", 1, 200_000)
    response = patch(world, "s1", data)
    assert response.status_code == 400, response.content
    assert field in response.json()["error"]["fields"]


def test_it_stores_a_trigger_and_answers_it(world: World) -> None:
    post_turn(world, "s1", 1, 200_000)
    response = patch(world, "s1", {"policy": {"auto": AUTO, "trigger": {"tokens": 150_000}}})
    assert response.status_code == 200, response.content
    assert response.json()["policy"] == {"auto": AUTO, "trigger": {"tokens": 150_000}}
    response = patch(world, "s1", {"policy": {"trigger": {"fraction": 1}}})
    assert response.json()["policy"] == {"trigger": {"fraction": 1.0}}


def test_the_automatic_policy_fires_at_a_trigger_in_tokens(world: World, commit: Any) -> None:
    first = commit(lambda: post_turn(world, "s1", 1, 200_000))
    patched = patch(world, "s1", {"policy": {"auto": AUTO, "trigger": {"tokens": first + 1}}})
    assert patched.status_code == 200, patched.content
    second = commit(lambda: post_turn(world, "s1", 3, 200_000))
    session = Session.objects.get(external_id="s1")
    assert second < selectors.session_budget(session).usable * 0.8, "the default would not fire"
    operation = Operation.objects.get()
    assert operation.automatic
    assert operation.status == "succeeded", operation.error


def test_a_trigger_in_tokens_above_the_default_holds_the_policy_back(
    world: World, commit: Any
) -> None:
    commit(lambda: post_turn(world, "s1", 1, 25_000))
    patched = patch(world, "s1", {"policy": {"auto": AUTO, "trigger": {"tokens": 24_000}}})
    assert patched.status_code == 200, patched.content
    total = commit(lambda: post_turn(world, "s1", 4, 25_000))
    session = Session.objects.get(external_id="s1")
    usable = selectors.session_budget(session).usable
    assert usable * 0.8 < total <= 24_000, "past the default trigger, not past the policy's"
    assert not Operation.objects.exists()


def test_the_automatic_policy_fires_at_a_trigger_in_a_fraction_of_usable(
    world: World, commit: Any
) -> None:
    first = commit(lambda: post_turn(world, "s1", 1, 200_000))
    usable = selectors.session_budget(Session.objects.get(external_id="s1")).usable
    second = 3 * first  # about: three steps of the same size
    fraction = round((first + second / 2) / 2 / usable, 4)
    patched = patch(world, "s1", {"policy": {"auto": AUTO, "trigger": {"fraction": fraction}}})
    assert patched.status_code == 200, patched.content
    assert not Operation.objects.exists()
    total = commit(lambda: post_turn(world, "s1", 3, 200_000))
    assert first < fraction * usable < total < 0.8 * usable
    assert Operation.objects.get().automatic


def chart(world: World, external_id: str) -> dict[str, Any]:
    page = world.login(world.owner).get(f"/sessions/{external_id}/")
    assert page.status_code == 200
    found = re.search(
        r'<script id="chart-data" type="application/json">(.*?)</script>', page.content.decode()
    )
    assert found is not None
    return dict(json.loads(found.group(1)))


@pytest.mark.parametrize(
    ("trigger", "expected", "label"),
    [
        (None, lambda usable: int(usable * 0.8), "ctxweb default: above 80% of usable"),
        (
            {"fraction": 0.5},
            lambda usable: usable // 2,
            "the session's policy: above 50% of usable",
        ),
        ({"tokens": 150_000}, lambda usable: 150_000, "the session's policy: above 150,000 tokens"),
    ],
)
def test_the_chart_draws_the_trigger_line_at_the_policys_trigger(
    world: World, trigger: Any, expected: Any, label: str
) -> None:
    post_turn(world, "s1", 1, 200_000)
    if trigger is not None:
        assert patch(world, "s1", {"policy": {"trigger": trigger}}).status_code == 200
    data = chart(world, "s1")
    assert data["trigger"] == expected(data["usable"])
    assert data["policy"] == label
