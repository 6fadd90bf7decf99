"""Replays through the REST API and the session's socket: start one, follow it, read it, apply a
column; the project's default policy; who may do what."""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from ctxweb.api.replays import ReplayDetailOutput, ReplayOutput
from ctxweb.asgi import application
from ctxweb.contexts.models import Replay, Session, Turn
from tests.support.builders import body, history
from tests.support.world import World

pytestmark = pytest.mark.django_db

ORIGIN = (b"origin", b"http://testserver")
TURNS = 4


@pytest.fixture(autouse=True)
def inline_tasks(settings: Any) -> None:
    settings.CTXWEB_TASKS_INLINE = True
    settings.CTXWEB_RATE_LIMIT = ""
    settings.CTXWEB_RATE_LIMIT_COSTLY = ""


@pytest.fixture
def commit(django_capture_on_commit_callbacks: Any) -> Any:
    """Run what the request left for after commit (the replay, its events)."""

    def run(call: Any) -> Any:
        with django_capture_on_commit_callbacks(execute=True):
            return call()

    return run


def post_json(client: Any, url: str, payload: Any, method: str = "post") -> Any:
    return getattr(client, method)(url, data=json.dumps(payload), content_type="application/json")


def make_session(world: World, external_id: str = "s1") -> None:
    for step in range(TURNS):
        response = post_json(
            world.api(world.ingest_key),
            f"/api/v1/sessions/{external_id}/turns",
            body(history(step + 1)),
        )
        assert response.status_code == 201, response.content


@pytest.fixture
def session(world: World) -> Session:
    make_session(world)
    return Session.objects.get(external_id="s1")


POLICIES = [
    {"label": "outputs cut", "strategy": "baseagent-middle-out", "trigger": {"tokens": 1000}},
    {"strategy": "nanobot-trim", "params": {"budget": 8000}},
]


def start(world: World, commit: Any, policies: Any = None, key: str | None = None) -> Any:
    client = world.api(key or world.operator_key)
    payload = {"policies": POLICIES if policies is None else policies}
    return commit(lambda: post_json(client, "/api/v1/sessions/s1/replays", payload))


def test_an_operator_replays_a_session_and_reads_the_columns(
    world: World, session: Session, commit: Any
) -> None:
    response = start(world, commit)
    assert response.status_code == 202, response.content
    created = response.json()
    assert response["Location"] == created["url"] == f"/api/v1/sessions/s1/replays/{created['id']}"
    assert [p["label"] for p in created["policies"]] == [
        "as recorded",
        "outputs cut",
        "nanobot-trim above 80% of usable",
    ]
    creator = created["created_by"]
    assert creator.startswith("key ")
    assert world.operator_key.startswith(creator.removeprefix("key "))

    reader = world.api(world.ingest_key)
    detail = reader.get(created["url"]).json()
    assert detail["status"] == "succeeded", detail["error"]
    assert detail["done"] == detail["total"] == TURNS * 3
    assert set(detail) == set(ReplayDetailOutput().fields)
    totals = list(
        Turn.objects.filter(session=session)
        .order_by("index")
        .values_list("total_tokens", flat=True)
    )
    recorded, cut, _ = detail["results"]
    assert [t["total"] for t in recorded["turns"]] == totals
    assert cut["compactions"][0]["turn"] == 0  # the first call is above 1,000 tokens
    assert cut["totals"]["input_tokens"] < recorded["totals"]["input_tokens"]

    listed = reader.get("/api/v1/sessions/s1/replays").json()
    assert listed["count"] == 1
    assert set(listed["results"][0]) == set(ReplayOutput().fields)  # no results in a list
    assert listed["results"][0]["id"] == created["id"]


def test_viewers_and_ingest_keys_read_replays_but_do_not_start_or_apply_them(
    world: World, session: Session, commit: Any
) -> None:
    replay_id = start(world, commit).json()["id"]
    for client in (world.login(world.teammate), world.api(world.ingest_key)):
        refused = post_json(client, "/api/v1/sessions/s1/replays", {"policies": POLICIES})
        assert refused.status_code == 403
        assert refused.json()["error"]["code"] == "permission_denied"
        applied = post_json(
            client, f"/api/v1/sessions/s1/replays/{replay_id}/apply", {"column": 1, "to": "session"}
        )
        assert applied.status_code == 403
        assert client.get(f"/api/v1/sessions/s1/replays/{replay_id}").status_code == 200
        assert client.get("/api/v1/sessions/s1/replay-presets").status_code == 200
    assert Replay.objects.count() == 1
    assert Session.objects.get(pk=session.pk).policy == {}


def test_a_bad_policy_is_a_400_naming_its_field(
    world: World, session: Session, commit: Any
) -> None:
    cases: list[tuple[Any, str]] = [
        (
            [POLICIES[0], {"strategy": "nanobot-trim", "trigger": {"fraction": 0}}],
            "policies[1].trigger.fraction",
        ),
        ([{"strategy": "nope"}], "policies[0].strategy"),
        ([{"strategy": "nanobot-trim", "params": {"budget": -5}}], "policies[0].params.budget"),
        ([], "policies"),
        ([POLICIES[0]] * 7, "policies"),
        ({"strategy": "nanobot-trim"}, "policies"),
    ]
    for policies, field in cases:
        response = start(world, commit, policies)
        assert response.status_code == 400, response.content
        assert field in response.json()["error"]["fields"], (field, response.json())
    missing = commit(
        lambda: post_json(world.api(world.operator_key), "/api/v1/sessions/s1/replays", {})
    )
    assert missing.status_code == 400
    assert "policies" in missing.json()["error"]["fields"]
    assert not Replay.objects.exists()


def test_a_session_past_the_turn_bound_is_a_400_naming_its_turns(
    world: World, session: Session, commit: Any, settings: Any
) -> None:
    settings.CTXWEB_REPLAY_MAX_TURNS = TURNS - 1
    response = start(world, commit)
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "invalid"
    assert error["fields"]["session"].startswith(
        f"has {TURNS} turns: a replay walks at most {TURNS - 1} (CTXWEB_REPLAY_MAX_TURNS)."
    )
    assert error["message"] == f"The session {error['fields']['session']}"
    assert not Replay.objects.exists()
    settings.CTXWEB_REPLAY_MAX_TURNS = TURNS
    assert start(world, commit).status_code == 202


def test_past_the_active_bound_a_replay_waits_429(
    world: World, session: Session, settings: Any
) -> None:
    settings.CTXWEB_REPLAYS_ACTIVE_PER_PROJECT = 1
    client = world.api(world.operator_key)
    # Nothing runs after commit here: the first stays queued.
    first = post_json(client, "/api/v1/sessions/s1/replays", {"policies": POLICIES})
    assert first.status_code == 202
    second = post_json(client, "/api/v1/sessions/s1/replays", {"policies": POLICIES})
    assert second.status_code == 429
    assert second["Retry-After"] == "5"
    assert second.json()["error"]["code"] == "busy"


def test_the_presets_are_sized_to_the_session(world: World, session: Session) -> None:
    presets = (
        world.api(world.ingest_key).get("/api/v1/sessions/s1/replay-presets").json()["presets"]
    )
    assert len(presets) == 11
    copaw = next(p for p in presets if p["label"] == "CoPaw")
    assert copaw["params"]["max_input_length"] == session.context_window
    assert copaw["trigger"] == {"tokens": int(session.context_window * 0.75) - 1}


def test_a_column_is_applied_to_the_session_then_as_the_projects_default(
    world: World, session: Session, commit: Any
) -> None:
    replay_id = start(world, commit).json()["id"]
    client = world.api(world.operator_key)
    url = f"/api/v1/sessions/s1/replays/{replay_id}/apply"

    applied = post_json(client, url, {"column": 2, "to": "session"})
    assert applied.status_code == 200, applied.content
    expected = {
        "auto": {"strategy": "nanobot-trim", "params": {"budget": 8000}, "enabled": True},
        "trigger": {"fraction": 0.8},
    }
    assert applied.json() == {"to": "session", "column": 2, "policy": expected}
    assert Session.objects.get(external_id="s1").policy == expected

    applied = post_json(client, url, {"column": 1, "to": "project"})
    assert applied.status_code == 200, applied.content
    project = client.get("/api/v1/project").json()
    assert project["name"] == "alpha"
    assert project["default_policy"]["auto"]["strategy"] == "baseagent-middle-out"
    assert project["default_policy"]["trigger"] == {"tokens": 1000}

    make_session(world, "s2")
    assert Session.objects.get(external_id="s2").policy == project["default_policy"]

    for bad, field in (
        ({"column": 3, "to": "session"}, "column"),
        ({"column": 1, "to": "x"}, "to"),
    ):
        response = post_json(client, url, bad)
        assert response.status_code == 400
        assert field in response.json()["error"]["fields"]


def test_another_sessions_or_an_unknown_replay_is_not_found(
    world: World, session: Session, commit: Any
) -> None:
    replay_id = start(world, commit).json()["id"]
    make_session(world, "s2")
    client = world.api(world.ingest_key)
    for path in (
        f"/api/v1/sessions/s2/replays/{replay_id}",
        f"/api/v1/sessions/s1/replays/{replay_id + 1}",
        "/api/v1/sessions/s1/replays/-1",
        "/api/v1/sessions/s1/replays/one",
    ):
        response = client.get(path)
        assert response.status_code == 404, path
        assert response.json()["error"]["code"] == "not_found"


def test_operators_set_the_projects_default_policy(world: World) -> None:
    operator = world.api(world.operator_key)
    assert world.login(world.teammate).get("/api/v1/project").json() == {
        "name": "alpha",
        "default_policy": {},
    }
    policy = {
        "auto": {"strategy": "ctxweb-auto", "params": {"target_fraction": 0.4}},
        "trigger": {"fraction": 0.7},
    }
    response = post_json(operator, "/api/v1/project", {"default_policy": policy}, method="patch")
    assert response.status_code == 200, response.content
    assert response.json()["default_policy"] == {
        "auto": {"strategy": "ctxweb-auto", "params": {"target_fraction": 0.4}, "enabled": True},
        "trigger": {"fraction": 0.7},
    }
    bad = post_json(
        operator,
        "/api/v1/project",
        {"default_policy": {"trigger": {"fraction": 3}}},
        method="patch",
    )
    assert bad.status_code == 400
    assert list(bad.json()["error"]["fields"]) == ["default_policy.trigger.fraction"]
    unknown = post_json(operator, "/api/v1/project", {"name": "renamed"}, method="patch")
    assert unknown.status_code == 400
    assert list(unknown.json()["error"]["fields"]) == ["name"]
    refused = post_json(
        world.api(world.ingest_key), "/api/v1/project", {"default_policy": {}}, method="patch"
    )
    assert refused.status_code == 403
    assert world.api(world.ingest_key).get("/api/v1/project").json()["default_policy"][
        "trigger"
    ] == {"fraction": 0.7}


@pytest.mark.django_db(transaction=True)
def test_progress_and_the_end_arrive_over_the_sessions_socket(world: World) -> None:
    make_session(world)
    client = Client()
    client.force_login(world.owner)
    cookie = (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())

    async def scenario() -> None:
        socket = WebsocketCommunicator(application, "/ws/sessions/s1/", headers=[ORIGIN, cookie])
        assert (await socket.connect())[0]
        assert (await socket.receive_json_from())["type"] == "hello"
        response = await sync_to_async(
            lambda: post_json(
                world.api(world.operator_key), "/api/v1/sessions/s1/replays", {"policies": POLICIES}
            )
        )()
        assert response.status_code == 202
        replay_id = response.json()["id"]
        seen = []
        while True:
            message = await socket.receive_json_from(timeout=30)
            seen.append(message)
            if message["type"] == "replay.finished":
                break
        await socket.disconnect()
        progress = [m for m in seen if m["type"] == "replay.progress"]
        assert progress
        assert all(m["replay"] == replay_id for m in progress)
        assert all(m["total"] == TURNS * 3 for m in progress)
        done = [m["done"] for m in progress]
        assert done == sorted(done)
        assert done[-1] == TURNS * 3
        assert seen[-1] == {
            "type": "replay.finished",
            "replay": replay_id,
            "done": TURNS * 3,
            "total": TURNS * 3,
            "status": "succeeded",
            "error": None,
        }

    async_to_sync(scenario)()


@pytest.mark.usefixtures("clear_of_a_minutes_end")
def test_starting_replays_spends_the_costly_budget_and_reading_them_does_not(
    world: World, session: Session, commit: Any, settings: Any
) -> None:
    settings.CTXWEB_RATE_LIMIT_COSTLY = "1/min"
    operator = world.api(world.operator_key)
    for _ in range(3):
        assert operator.get("/api/v1/sessions/s1/replays").status_code == 200
    assert start(world, commit).status_code == 202
    again = start(world, commit)
    assert again.status_code == 429
    assert again.json()["error"]["code"] == "throttled"  # the rate limit, not the active bound
    assert operator.get("/api/v1/sessions/s1/replays").status_code == 200
    assert Replay.objects.count() == 1


def test_applying_a_column_is_in_the_audit_log(world: World, session: Session, commit: Any) -> None:
    from ctxweb.contexts.models import AuditEvent

    replay_id = start(world, commit).json()["id"]
    operator = world.api(world.operator_key)
    url = f"/api/v1/sessions/s1/replays/{replay_id}/apply"
    assert post_json(operator, url, {"column": 1, "to": "session"}).status_code == 200
    assert post_json(operator, url, {"column": 2, "to": "project"}).status_code == 200
    # Every action the log records can be asked for by name.
    for action in AuditEvent.Action.values:
        assert operator.get(f"/api/v1/audit?action={action}").status_code == 200, action
    for action, column in (("session.policy", 1), ("project.policy", 2)):
        entries = operator.get(f"/api/v1/audit?action={action}").json()["results"]
        assert len(entries) == 1
        assert entries[0]["session"] == "s1"
        assert entries[0]["actor"].startswith("key ")
        assert entries[0]["detail"]["replay"] == replay_id
        assert entries[0]["detail"]["column"] == column
