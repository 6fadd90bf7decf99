"""Deletion and retention: a deleted or expired session and a deleted project leave nothing
behind (row counts per table back to what they were), shared messages stay with the sessions that
share them, and the audit log says who applied, undid or deleted what."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any

import pytest
from django.apps import apps
from django.contrib.auth.models import User
from django.utils import timezone

from ctxweb import tasks
from ctxweb.accounts.models import Project
from ctxweb.contexts.models import Artifact, AuditEvent, Message, Session
from tests.support.builders import body, history
from tests.support.world import World

pytestmark = pytest.mark.django_db

#: The tables of what ctxweb stores (not users, keys or the audit log).
CONTENT = ("session", "turn", "message", "toolset", "operation", "managedcontext", "artifact")


@pytest.fixture(autouse=True)
def inline_tasks(settings: Any) -> None:
    settings.CTXWEB_TASKS_INLINE = True


@pytest.fixture
def commit(django_capture_on_commit_callbacks: Any) -> Any:
    def run(call: Any) -> Any:
        with django_capture_on_commit_callbacks(execute=True):
            return call()

    return run


def row_counts() -> dict[str, int]:
    """Rows in every table of the project's apps."""
    counts = {}
    for label in ("accounts", "contexts"):
        for model in apps.get_app_config(label).get_models():
            counts[model._meta.model_name] = model.objects.count()
    return counts


def post_turn(client: Any, external_id: str, payload: dict[str, Any]) -> Any:
    return client.post(
        f"/api/v1/sessions/{external_id}/turns",
        data=json.dumps(payload),
        content_type="application/json",
    )


def grow(world: World, external_id: str, commit: Any, steps: int = 3) -> None:
    """A session of ``steps`` turns, with tools, whose first messages every such session shares,
    then an operation that externalizes (artifacts, a managed context), undone."""
    client = world.api(world.ingest_key)
    for step in range(1, steps + 1):
        payload = body(history(step))
        payload["request"]["tools"] = [
            {"type": "function", "function": {"name": "read", "parameters": {"type": "object"}}}
        ]
        assert post_turn(client, external_id, payload).status_code == 201
    operator = world.api(world.operator_key)
    created = commit(
        lambda: operator.post(
            f"/api/v1/sessions/{external_id}/operations",
            data=json.dumps({"strategy": "llm4s-pipeline", "params": {}}),
            content_type="application/json",
        )
    )
    assert created.status_code == 202, created.content
    assert operator.post(f"/api/v1/operations/{created.json()['id']}/undo").status_code == 200


def test_deleting_a_session_returns_every_table_to_its_size_before_it_was_ingested(
    world: World, commit: Any
) -> None:
    # Another session shares its first messages: they must stay.
    assert post_turn(world.api(world.ingest_key), "keep", body(history(1))).status_code == 201
    before = row_counts()
    grow(world, "gone", commit)
    grown = row_counts()
    assert grown["artifact"] > before["artifact"], "the operation externalized something"
    assert grown["message"] > before["message"]
    assert grown["managedcontext"] > before["managedcontext"]

    response = world.api(world.operator_key).delete("/api/v1/sessions/gone")
    assert response.status_code == 204, response.content
    after = row_counts()
    assert after.pop("auditevent") == before.pop("auditevent") + 3  # apply, undo, delete
    assert after == before
    kept = world.api(world.ingest_key).get("/api/v1/sessions/keep/turns/0")
    assert kept.status_code == 200
    assert len(kept.json()["messages"]) == len(history(1))
    assert world.api(world.ingest_key).get("/api/v1/sessions/gone").status_code == 404


def test_an_artifact_a_kept_session_points_at_survives_the_session_that_made_it(
    world: World, commit: Any
) -> None:
    """The agent continued from its managed context (pointers and all), then forked: deleting
    the session whose operation made the artifacts leaves the fork's pointers whole."""
    client = world.api(world.ingest_key)
    for step in range(1, 4):
        assert post_turn(client, "origin", body(history(step))).status_code == 201
    operator = world.api(world.operator_key)
    created = commit(
        lambda: operator.post(
            "/api/v1/sessions/origin/operations",
            data=json.dumps({"strategy": "llm4s-pipeline", "params": {}}),
            content_type="application/json",
        )
    )
    assert created.status_code == 202, created.content
    managed = client.get("/api/v1/sessions/origin/context").json()
    pointers = list(Artifact.objects.values_list("key", flat=True))
    assert pointers, "the operation externalized something"
    sent = json.dumps(managed["request"])
    assert any(key in sent for key in pointers), "the managed context points at its artifacts"
    fork = {"format": "openai-chat", "request": managed["request"]}
    assert post_turn(client, "fork", fork).status_code == 201

    assert operator.delete("/api/v1/sessions/origin").status_code == 204
    for key in pointers:
        if key in sent:
            assert client.get(f"/api/v1/artifacts/{key}").status_code == 200, key
    assert operator.delete("/api/v1/sessions/fork").status_code == 204
    assert not Artifact.objects.exists()
    assert not Message.objects.exists()


def test_an_artifact_a_kept_session_points_at_by_a_short_id_survives(
    world: World, commit: Any
) -> None:
    """ctxweb-auto's pointers name an artifact by a short id (a prefix of its key): deleting
    the session that made it keeps what a fork still points at, and the pointer resolves."""
    client = world.api(world.ingest_key)
    for step in range(1, 4):
        assert post_turn(client, "origin", body(history(step))).status_code == 201
    operator = world.api(world.operator_key)
    created = commit(
        lambda: operator.post(
            "/api/v1/sessions/origin/operations",
            data=json.dumps({"strategy": "ctxweb-auto", "params": {"target_tokens": 200}}),
            content_type="application/json",
        )
    )
    assert created.status_code == 202, created.content
    managed = client.get("/api/v1/sessions/origin/context").json()
    sent = json.dumps(managed["request"])
    shorts = re.findall(r"\[EXTERNALIZED:([0-9a-f]+)\]", sent)
    assert shorts, "the operation externalized something"
    assert all(len(short) == 16 for short in shorts)
    assert {p["url"] for p in managed["artifacts"]} == {f"/api/v1/artifacts/{s}" for s in shorts}
    fork = {"format": "openai-chat", "request": managed["request"]}
    assert post_turn(client, "fork", fork).status_code == 201

    assert operator.delete("/api/v1/sessions/origin").status_code == 204
    for short in shorts:
        assert client.get(f"/api/v1/artifacts/{short}").status_code == 200, short
    assert operator.delete("/api/v1/sessions/fork").status_code == 204
    assert not Artifact.objects.exists()


def test_the_audit_log_says_who_applied_undid_and_deleted_what(world: World, commit: Any) -> None:
    grow(world, "gone", commit, steps=1)
    world.login(world.owner).delete("/api/v1/sessions/gone")
    response = world.api(world.operator_key).get("/api/v1/audit")
    assert response.status_code == 200, response.content
    entries = response.json()["results"]
    assert [(e["action"], e["actor"], e["session"]) for e in entries] == [
        ("session.delete", "owner", "gone"),
        ("operation.undo", f"key {world.operator_key[:12]}", "gone"),
        ("operation.apply", f"key {world.operator_key[:12]}", "gone"),
    ]
    assert entries[0]["detail"]["turns"] == 1
    assert entries[2]["detail"]["strategy"] == "llm4s-pipeline"
    only = world.api(world.operator_key).get("/api/v1/audit?action=session.delete").json()
    assert [e["action"] for e in only["results"]] == ["session.delete"]


@pytest.mark.parametrize(
    ("who", "status"),
    [("ingest_key", 403), ("teammate", 403), ("outsider_key", 404), ("outsider", 404)],
)
def test_only_operators_of_the_project_delete_a_session(
    world: World, who: str, status: int
) -> None:
    assert post_turn(world.api(world.ingest_key), "s1", body(history(1))).status_code == 201
    value = getattr(world, who)
    client = world.login(value) if isinstance(value, User) else world.api(value)
    assert client.delete("/api/v1/sessions/s1").status_code == status
    assert Session.objects.filter(external_id="s1").exists()


def test_viewers_and_ingest_keys_do_not_read_the_audit_log(world: World) -> None:
    assert world.api(world.ingest_key).get("/api/v1/audit").status_code == 403
    assert world.login(world.teammate).get("/api/v1/audit").status_code == 403
    assert world.api(world.ingest_key).get("/api/v1/audit?action=nope").status_code == 403
    bad = world.api(world.operator_key).get("/api/v1/audit?action=nope")
    assert bad.status_code == 400
    assert "action" in bad.json()["error"]["fields"]


def test_the_session_page_asks_before_deleting(world: World) -> None:
    assert post_turn(world.api(world.ingest_key), "s1", body(history(1))).status_code == 201
    owner = world.login(world.owner)
    page = owner.get("/sessions/s1/").content.decode()
    assert 'href="/sessions/s1/delete/"' in page
    confirm = owner.get("/sessions/s1/delete/")
    assert confirm.status_code == 200
    assert b"Delete for good" in confirm.content
    assert Session.objects.filter(external_id="s1").exists(), "asking deletes nothing"
    done = owner.post("/sessions/s1/delete/", follow=True)
    assert done.status_code == 200
    assert b"Deleted session s1" in done.content
    assert not Session.objects.filter(external_id="s1").exists()


def test_a_viewer_sees_no_delete_button_and_cannot_delete_from_the_page(world: World) -> None:
    assert post_turn(world.api(world.ingest_key), "s1", body(history(1))).status_code == 201
    viewer = world.login(world.teammate)
    assert b"/sessions/s1/delete/" not in viewer.get("/sessions/s1/").content
    assert viewer.post("/sessions/s1/delete/").status_code == 403
    assert Session.objects.filter(external_id="s1").exists()


def test_deleting_a_project_in_the_admin_deletes_everything_in_it(
    world: World, commit: Any
) -> None:
    assert post_turn(world.api(world.outsider_key), "other", body(history(1))).status_code == 201
    before = {name: n for name, n in row_counts().items() if name in CONTENT}
    grow(world, "gone", commit)
    admin = User.objects.create_superuser("root", password="pw-root-123")
    client = world.login(admin)
    url = f"/admin/accounts/project/{world.project.pk}/delete/"
    assert client.get(url).status_code == 200
    response = client.post(url, {"post": "yes"})
    assert response.status_code == 302, response.content
    assert not Project.objects.filter(pk=world.project.pk).exists()
    after = {name: n for name, n in row_counts().items() if name in CONTENT}
    assert after == before, "only the other project's rows remain"
    assert not Message.objects.filter(project_id=world.project.pk).exists()


def test_deleting_a_session_in_the_admin_goes_through_the_service(
    world: World, commit: Any
) -> None:
    grow(world, "gone", commit, steps=1)
    admin = User.objects.create_superuser("root", password="pw-root-123")
    session = Session.objects.get(external_id="gone")
    response = world.login(admin).post(
        f"/admin/contexts/session/{session.pk}/delete/", {"post": "yes"}
    )
    assert response.status_code == 302
    assert not Message.objects.filter(project=world.project).exists()
    assert AuditEvent.objects.filter(action="session.delete", actor_name="root").exists()


def test_the_retention_task_deletes_sessions_idle_past_their_projects_retention(
    world: World, commit: Any
) -> None:
    client = world.api(world.ingest_key)
    assert post_turn(client, "old", body(history(1))).status_code == 201
    assert post_turn(client, "new", body(history(2))).status_code == 201
    assert post_turn(world.api(world.outsider_key), "old", body(history(1))).status_code == 201
    Session.objects.filter(external_id="old").update(
        last_activity_at=timezone.now() - timedelta(days=10)
    )
    assert tasks.sessions_expire() == {}, "no retention set: nothing expires"
    world.project.retention_days = 7
    world.project.save()
    assert tasks.sessions_expire() == {"alpha": 1}
    assert list(
        Session.objects.filter(project=world.project).values_list("external_id", flat=True)
    ) == ["new"]
    assert Session.objects.filter(project=world.other_project, external_id="old").exists()
    entry = AuditEvent.objects.get(action="session.expire")
    assert (entry.actor_name, entry.session_external_id) == ("retention", "old")
    # The newer session still reads whole: the messages it shares with the expired one stayed.
    turn = client.get("/api/v1/sessions/new/turns/0")
    assert turn.status_code == 200
    assert len(turn.json()["messages"]) == len(history(2))


def test_the_beat_schedule_runs_the_retention_task(settings: Any) -> None:
    from ctxweb.celery import app

    tasks_by_name = {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert tasks.RETENTION_TASK in tasks_by_name
    assert tasks.RETENTION_TASK in app.tasks


@pytest.mark.slow
def test_the_embedded_server_runs_retention_in_process(tmp_path: Any) -> None:
    """`make run`'s shape: no Celery beat, the web process's own scheduler deletes expired
    sessions (every CTXWEB_RETENTION_SECONDS), and leaves the others."""
    import time

    from tests.support.servers import create_key, embedded_env, live_server, manage, post

    env = embedded_env(tmp_path, CTXWEB_SCHEDULER="1", CTXWEB_RETENTION_SECONDS="1")
    key = create_key(env, role="ingest")
    with live_server(env) as server:
        for name in ("old", "fresh"):
            url = f"{server.url}/api/v1/sessions/{name}/turns"
            assert post(url, key, body(history(1))).status == 201
        manage(
            env,
            "shell",
            "-c",
            "from datetime import timedelta; from django.utils import timezone;"
            " from ctxweb.accounts.models import Project;"
            " from ctxweb.contexts.models import Session;"
            " Project.objects.update(retention_days=30);"
            " Session.objects.filter(external_id='old')"
            ".update(last_activity_at=timezone.now() - timedelta(days=31))",
        )
        deadline = time.monotonic() + 30
        gone = ""
        while time.monotonic() < deadline and "'old'" not in gone:
            gone = manage(
                env,
                "shell",
                "-c",
                "from ctxweb.contexts.models import Session;"
                " print(sorted({'old', 'fresh'} - set(Session.objects.values_list('external_id',"
                " flat=True))))",
            )
            time.sleep(0.5)
    assert gone.strip().splitlines()[-1] == "['old']"  # (the shell first lists its imports)
