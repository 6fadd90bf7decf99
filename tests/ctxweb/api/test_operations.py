"""Applying operations through the REST API and the apply form, in the embedded shape: the
operation runs synchronously when the request's transaction commits (``CTXWEB_TASKS_INLINE``)."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from compaction.messages import parse
from ctxweb.contexts import events
from ctxweb.contexts.models import Artifact, ManagedContext, Operation, Session, Turn
from ctxweb.contexts.services import operations
from tests.support.builders import OUTPUT, body, history
from tests.support.world import World

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def inline_tasks(settings: Any) -> None:
    settings.CTXWEB_TASKS_INLINE = True


@pytest.fixture
def commit(django_capture_on_commit_callbacks: Any) -> Any:
    """Run what the request left for after commit (the operation, the live events)."""

    def run(call: Any) -> Any:
        with django_capture_on_commit_callbacks(execute=True):
            return call()

    return run


def post_turn(client: Any, external_id: str, payload: dict[str, Any]) -> Any:
    return client.post(
        f"/api/v1/sessions/{external_id}/turns",
        data=json.dumps(payload),
        content_type="application/json",
    )


def apply(client: Any, external_id: str, strategy: str, params: Any = None) -> Any:
    return client.post(
        f"/api/v1/sessions/{external_id}/operations",
        data=json.dumps({"strategy": strategy, "params": params or {}}),
        content_type="application/json",
    )


@pytest.fixture
def session(world: World, commit: Any) -> Session:
    response = commit(lambda: post_turn(world.api(world.ingest_key), "s1", body(history())))
    assert response.status_code == 201, response.content
    return Session.objects.get(external_id="s1")


def test_an_operator_key_applies_a_strategy_and_gets_a_smaller_context(
    world: World, session: Session, commit: Any
) -> None:
    client = world.api(world.operator_key)
    before = client.get("/api/v1/sessions/s1/context").json()
    assert before["version"] == 0
    assert before["source"] == "turn"

    response = commit(lambda: apply(client, "s1", "baseagent-middle-out"))
    assert response.status_code == 202, response.content
    created = response.json()
    assert set(created) >= {"id", "status"}

    operation = client.get(f"/api/v1/operations/{created['id']}").json()
    assert operation["status"] == "succeeded", operation
    assert operation["progress"]["stage"] == "done"
    result = operation["result"]
    assert result["version"] == 1
    assert result["tokens_after"] < result["tokens_before"]
    assert result["tokens_saved"] == result["tokens_before"] - result["tokens_after"]
    assert result["edits"] == 3
    stored = set(Artifact.objects.filter(project=world.project).values_list("key", flat=True))
    assert stored == set(result["artifacts"])
    assert len(stored) == 3
    assert ManagedContext.objects.filter(session=session).count() == 1

    after = client.get("/api/v1/sessions/s1/context")
    assert after.status_code == 200
    data = after.json()
    assert data["version"] == 1
    assert data["source"] == "operation"
    assert data["format"] == "openai-chat"
    assert data["total_tokens"] == result["tokens_after"] < before["total_tokens"]
    context = parse("openai-chat", data["request"])  # ready to send: it parses back
    assert len(context.messages) == len(history())  # same messages, tool outputs truncated
    assert data["request"]["model"] == "gpt-4o"
    assert Turn.objects.filter(session=session).count() == 1  # stored turns are untouched


def test_the_context_has_an_etag_and_answers_304_when_unchanged(
    world: World, session: Session, commit: Any
) -> None:
    client = world.api(world.ingest_key)
    first = client.get("/api/v1/sessions/s1/context")
    etag = first["ETag"]
    assert client.get("/api/v1/sessions/s1/context", HTTP_IF_NONE_MATCH=etag).status_code == 304
    commit(lambda: apply(world.api(world.operator_key), "s1", "baseagent-middle-out"))
    changed = client.get("/api/v1/sessions/s1/context", HTTP_IF_NONE_MATCH=etag)
    assert changed.status_code == 200
    assert changed["ETag"] != etag


def test_externalizing_strategies_leave_pointers_to_stored_artifacts(
    world: World, session: Session, commit: Any
) -> None:
    client = world.api(world.operator_key)
    commit(lambda: apply(client, "s1", "llm4s-pipeline"))
    data = client.get("/api/v1/sessions/s1/context").json()
    assert data["artifacts"], data["artifacts"]
    for pointer in data["artifacts"]:
        download = client.get(pointer["url"])
        assert download.status_code == 200


def test_undo_restores_the_context_before_the_operation(
    world: World, session: Session, commit: Any
) -> None:
    client = world.api(world.operator_key)
    original = client.get("/api/v1/sessions/s1/context").json()
    created = commit(lambda: apply(client, "s1", "baseagent-middle-out")).json()

    undone = client.post(f"/api/v1/operations/{created['id']}/undo")
    assert undone.status_code == 200, undone.content
    assert undone.json()["version"] == 2
    restored = client.get("/api/v1/sessions/s1/context").json()
    assert restored["version"] == 2
    assert restored["request"] == original["request"]
    assert restored["total_tokens"] == original["total_tokens"]
    again = client.post(f"/api/v1/operations/{created['id']}/undo")
    assert again.status_code == 409
    assert "already undone" in again.json()["error"]["message"]


def test_a_second_operation_on_a_busy_session_is_refused(
    world: World, session: Session, commit: Any
) -> None:
    busy = Operation.objects.create(
        session=session, strategy="baseagent-prune", status="running", heartbeat_at=timezone.now()
    )
    response = commit(lambda: apply(world.api(world.operator_key), "s1", "baseagent-middle-out"))
    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "conflict"
    assert f"operation {busy.pk}" in error["message"]
    assert Operation.objects.filter(session=session).count() == 1


def test_unknown_strategies_and_bad_params_are_400_naming_the_field(
    world: World, session: Session
) -> None:
    client = world.api(world.operator_key)
    unknown = apply(client, "s1", "no-such-strategy")
    assert unknown.status_code == 400
    assert "strategy" in unknown.json()["error"]["fields"]
    bad = apply(client, "s1", "baseagent-middle-out", {"nope": 1})
    assert bad.status_code == 400
    assert "params.nope" in bad.json()["error"]["fields"]
    assert not Operation.objects.exists()


def test_viewers_and_ingest_keys_may_not_apply(world: World, session: Session) -> None:
    for client in (world.login(world.teammate), world.api(world.ingest_key)):
        response = apply(client, "s1", "baseagent-middle-out")
        assert response.status_code == 403
        assert "operator" in response.json()["error"]["message"]
    assert not Operation.objects.exists()


def test_outsiders_see_no_session_and_no_operation(
    world: World, session: Session, commit: Any
) -> None:
    created = commit(lambda: apply(world.api(world.operator_key), "s1", "baseagent-middle-out"))
    operation_id = created.json()["id"]
    for client in (world.login(world.outsider), world.api(world.outsider_key)):
        assert apply(client, "s1", "baseagent-middle-out").status_code == 404
        assert client.get(f"/api/v1/operations/{operation_id}").status_code == 404
        assert client.post(f"/api/v1/operations/{operation_id}/undo").status_code == 404
        assert client.get("/api/v1/sessions/s1/context").status_code == 404


def test_a_failed_llm_summary_fails_the_operation_and_changes_nothing(
    world: World, session: Session, commit: Any, settings: Any
) -> None:
    # The configured LLM endpoint refuses connections (nothing listens on loopback port 9).
    settings.CTXWEB_LLM_PROVIDER = "openai"
    settings.CTXWEB_LLM_BASE_URL = "http://127.0.0.1:9/v1"
    settings.CTXWEB_LLM_API_KEY = "sk-test"
    client = world.api(world.operator_key)
    before = client.get("/api/v1/sessions/s1/context").json()
    created = commit(lambda: apply(client, "s1", "codex-compact")).json()
    operation = client.get(f"/api/v1/operations/{created['id']}").json()
    assert operation["status"] == "failed"
    assert "openai" in operation["error"]
    assert "connection" in operation["error"].lower()
    assert operation["result"] is None
    assert not Artifact.objects.exists()
    assert not ManagedContext.objects.exists()
    assert client.get("/api/v1/sessions/s1/context").json() == before
    # The session is free again: the next operation runs (the offline summarizer this time).
    settings.CTXWEB_LLM_PROVIDER = ""
    again = commit(lambda: apply(client, "s1", "codex-compact"))
    assert again.status_code == 202


def test_the_next_turn_from_the_managed_context_is_marked_with_the_operation(
    world: World, session: Session, commit: Any
) -> None:
    client = world.api(world.operator_key)
    created = commit(lambda: apply(client, "s1", "baseagent-middle-out")).json()
    managed = client.get("/api/v1/sessions/s1/context").json()["request"]
    managed["messages"] += [
        {"role": "assistant", "content": "I read all three files."},
        {"role": "user", "content": "Good, now fix the bug."},
    ]
    payload = {"format": "openai-chat", "request": managed}
    response = commit(lambda: post_turn(world.api(world.ingest_key), "s1", payload))
    assert response.status_code == 201, response.content
    turn_events = response.json()["events"]
    assert [e["type"] for e in turn_events] == ["operation"]
    event = turn_events[0]
    assert event["operation_id"] == created["id"]
    assert event["strategy"] == "baseagent-middle-out"
    assert event["tokens_after"] < event["tokens_before"]
    assert Turn.objects.get(session=session, index=1).operation_id == created["id"]
    # The posted turn is now the managed context.
    assert client.get("/api/v1/sessions/s1/context").json()["source"] == "turn"


def test_a_turn_not_from_the_managed_context_is_not_marked(
    world: World, session: Session, commit: Any
) -> None:
    commit(lambda: apply(world.api(world.operator_key), "s1", "baseagent-middle-out"))
    grown = [*history(), {"role": "user", "content": "Go on."}]
    response = commit(lambda: post_turn(world.api(world.ingest_key), "s1", body(grown)))
    assert response.json()["events"] == []
    assert Turn.objects.get(session=session, index=1).operation_id is None


def test_the_automatic_policy_applies_its_strategy_when_a_turn_crosses_the_trigger(
    world: World, commit: Any
) -> None:
    ingest = world.api(world.ingest_key)
    small = {**body(history(1)), "context_window": 20_000}
    commit(lambda: post_turn(ingest, "auto", small))
    policy = {"auto": {"strategy": "baseagent-middle-out", "params": {}, "enabled": True}}
    patched = world.api(world.operator_key).patch(
        "/api/v1/sessions/auto", data={"policy": policy}, format="json"
    )
    assert patched.status_code == 200, patched.content
    assert patched.json()["policy"]["auto"]["strategy"] == "baseagent-middle-out"
    assert not Operation.objects.exists()

    big = {**body(history(4)), "context_window": 20_000}
    response = commit(lambda: post_turn(ingest, "auto", big))
    assert response.status_code == 201
    operation = Operation.objects.get()
    assert operation.automatic
    assert operation.status == "succeeded", operation.error
    # Still above the trigger: one automatic operation per crossing, not one per turn.
    bigger = {**body([*history(4), {"role": "user", "content": "more"}]), "context_window": 20_000}
    commit(lambda: post_turn(ingest, "auto", bigger))
    assert Operation.objects.count() == 1


def test_the_automatic_policy_plans_with_the_small_window_of_its_session(
    world: World, commit: Any
) -> None:
    ingest = world.api(world.ingest_key)
    output = OUTPUT[: len(OUTPUT) // 3]
    commit(lambda: post_turn(ingest, "small", {**body(history(3, output)), "context_window": 8000}))
    policy = {"auto": {"strategy": "ctxweb-auto", "params": {"target_fraction": 0.3}}}
    patched = world.api(world.operator_key).patch(
        "/api/v1/sessions/small", data={"policy": policy}, format="json"
    )
    assert patched.status_code == 200, patched.content
    # only what the operator gave is stored: the window comes from the session when it runs
    assert patched.json()["policy"]["auto"]["params"] == {"target_fraction": 0.3}

    commit(lambda: post_turn(ingest, "small", {**body(history(4, output)), "context_window": 8000}))
    operation = Operation.objects.get()
    assert operation.automatic
    assert operation.status == "succeeded", operation.error
    assert operation.params["context_window"] == 8000
    assert operation.result["tokens_before"] > 6400  # over the trigger: 80% of 8,000
    assert operation.result["tokens_after"] <= 2400  # 30% of the session's own 8,000


def test_an_automatic_policy_keeps_the_window_its_operator_set(
    world: World, session: Session
) -> None:
    policy = {"auto": {"strategy": "ctxweb-auto", "params": {"context_window": 50_000}}}
    patched = world.api(world.operator_key).patch(
        "/api/v1/sessions/s1", data={"policy": policy}, format="json"
    )
    assert patched.status_code == 200, patched.content
    stored = Session.objects.get(pk=session.pk).policy["auto"]["params"]
    assert stored == {"context_window": 50_000}


def test_only_operators_set_a_valid_policy(world: World, session: Session) -> None:
    policy = {"auto": {"strategy": "baseagent-middle-out"}}
    for client in (world.login(world.teammate), world.api(world.ingest_key)):
        response = client.patch("/api/v1/sessions/s1", data={"policy": policy}, format="json")
        assert response.status_code == 403
    bad = world.api(world.operator_key).patch(
        "/api/v1/sessions/s1",
        data={"policy": {"auto": {"strategy": "baseagent-middle-out", "params": {"x": 1}}}},
        format="json",
    )
    assert bad.status_code == 400
    assert "policy.auto.params.x" in bad.json()["error"]["fields"]
    outsider = world.api(world.outsider_key)
    assert (
        outsider.patch("/api/v1/sessions/s1", data={"policy": policy}, format="json").status_code
        == 404
    )
    assert Session.objects.get(pk=session.pk).policy == {}


class BrokenLayer:
    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        raise ConnectionError("channel layer is down")


def test_publish_never_raises_when_the_layer_is_broken(
    world: World, monkeypatch: pytest.MonkeyPatch, commit: Any, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(events, "get_channel_layer", BrokenLayer)
    assert events.publish(1, {"type": "turn.created"}) is False
    assert "could not publish turn.created" in caplog.text
    response = commit(lambda: post_turn(world.api(world.ingest_key), "s1", body(history(1))))
    assert response.status_code == 201
    created = commit(lambda: apply(world.api(world.operator_key), "s1", "baseagent-prune"))
    assert Operation.objects.get(pk=created.json()["id"]).status == "succeeded"


def test_a_run_whose_worker_died_is_retried_and_says_why(world: World, session: Session) -> None:
    operation = Operation.objects.create(
        session=session,
        strategy="baseagent-middle-out",
        status="running",
        attempts=1,
        worker="nowhere:1",
        heartbeat_at=timezone.now() - timedelta(seconds=operations.STALE_SECONDS + 1),
    )
    finished = operations.operation_run(operation_id=operation.pk, heartbeat=False)
    assert finished is not None
    assert finished.status == "succeeded"
    assert finished.attempts == 2
    assert "worker was lost" in finished.progress["retry"]


def test_a_run_gives_up_after_its_attempts(world: World, session: Session) -> None:
    operation = Operation.objects.create(
        session=session,
        strategy="baseagent-middle-out",
        status="running",
        attempts=operations.MAX_ATTEMPTS,
        worker="nowhere:1",
        heartbeat_at=timezone.now() - timedelta(hours=1),
    )
    operations.operation_run(operation_id=operation.pk, heartbeat=False)
    operation.refresh_from_db()
    assert operation.status == "failed"
    assert operation.error.startswith("worker lost")


def test_the_reaper_fails_operations_stuck_without_a_heartbeat(
    world: World, session: Session
) -> None:
    stuck = Operation.objects.create(
        session=session,
        strategy="baseagent-prune",
        status="running",
        worker="elsewhere:42",
        heartbeat_at=timezone.now() - timedelta(minutes=10),
    )
    call_command("reap_operations", "--older-than", "60")
    stuck.refresh_from_db()
    assert stuck.status == "failed"
    assert "worker lost" in stuck.error
    assert "elsewhere:42" in stuck.error
    assert stuck.finished_at is not None


def test_operation_create_reaps_before_refusing(
    world: World, session: Session, commit: Any
) -> None:
    Operation.objects.create(
        session=session,
        strategy="baseagent-prune",
        status="running",
        heartbeat_at=timezone.now() - timedelta(hours=1),
    )
    response = commit(lambda: apply(world.api(world.operator_key), "s1", "baseagent-middle-out"))
    assert response.status_code == 202


@pytest.fixture
def csrf_client(world: World) -> Client:
    client = Client(enforce_csrf_checks=True)
    client.force_login(world.owner)
    return client


def test_the_apply_form_creates_the_operation_and_shows_its_progress(
    world: World, session: Session, commit: Any
) -> None:
    client = Client()
    client.force_login(world.owner)
    response = commit(
        lambda: client.post(
            "/sessions/s1/operations/",
            {"strategy": "baseagent-middle-out", "params": "{}"},
        )
    )
    assert response.status_code == 302
    operation = Operation.objects.get()
    assert response["Location"] == (
        f"/sessions/s1/preview/?strategy=baseagent-middle-out&operation={operation.pk}"
    )
    assert operation.created_by == world.owner
    assert operation.status == "succeeded"


def test_the_apply_form_needs_csrf_and_an_operator(
    world: World, session: Session, csrf_client: Client
) -> None:
    assert csrf_client.post("/sessions/s1/operations/", {"strategy": "x"}).status_code == 403
    viewer = Client()
    viewer.force_login(world.teammate)
    response = viewer.post("/sessions/s1/operations/", {"strategy": "baseagent-prune"})
    assert response.status_code == 403
    outsider = Client()
    outsider.force_login(world.outsider)
    assert outsider.post("/sessions/s1/operations/", {"strategy": "x"}).status_code == 404
    assert not Operation.objects.exists()


# --- the session's operations list ----------------------------------------------------------


def list_operations(client: Any, external_id: str = "s1", **query: Any) -> Any:
    return client.get(f"/api/v1/sessions/{external_id}/operations", query)


def test_the_session_lists_its_operations_newest_first_each_as_it_reads_alone(
    world: World, session: Session, commit: Any
) -> None:
    operator = world.api(world.operator_key)
    first = commit(lambda: apply(operator, "s1", "baseagent-middle-out")).json()["id"]
    assert operator.post(f"/api/v1/operations/{first}/undo").status_code == 200
    second = commit(lambda: apply(operator, "s1", "baseagent-prune")).json()["id"]

    response = list_operations(operator)
    assert response.status_code == 200, response.content
    page = response.json()
    assert set(page) == {"count", "limit", "offset", "next", "previous", "results"}
    assert page["count"] == 2
    assert (page["limit"], page["offset"], page["next"], page["previous"]) == (50, 0, None, None)
    assert [o["id"] for o in page["results"]] == [second, first]
    for listed in page["results"]:
        assert listed == operator.get(f"/api/v1/operations/{listed['id']}").json()
    newest, undone = page["results"]
    assert newest["strategy"] == "baseagent-prune"
    assert newest["session"] == "s1"
    assert newest["undone_at"] is None
    assert undone["status"] == "succeeded"
    assert undone["undone_at"] is not None
    assert undone["result"]["tokens_after"] < undone["result"]["tokens_before"]


def test_a_session_without_operations_lists_none(world: World, session: Session) -> None:
    page = list_operations(world.api(world.ingest_key)).json()
    assert (page["count"], page["results"]) == (0, [])


def test_the_operations_list_pages_with_limit_and_offset(
    world: World, session: Session, commit: Any
) -> None:
    operator = world.api(world.operator_key)
    ids = []
    for strategy in ("baseagent-prune", "baseagent-middle-out", "nanobot-trim"):
        ids.append(commit(lambda s=strategy: apply(operator, "s1", s)).json()["id"])
    first = list_operations(operator, limit=2).json()
    assert first["count"] == 3
    assert [o["id"] for o in first["results"]] == ids[:0:-1]
    assert first["previous"] is None
    assert first["next"].endswith("/api/v1/sessions/s1/operations?limit=2&offset=2")
    rest = operator.get(first["next"]).json()
    assert [o["id"] for o in rest["results"]] == ids[:1]
    assert rest["next"] is None
    assert rest["previous"] is not None
    bad = list_operations(operator, limit=0)
    assert bad.status_code == 400
    assert "limit" in bad.json()["error"]["fields"]
    assert list_operations(operator, offset="-1").status_code == 400


def test_every_member_and_key_reads_the_list_and_outsiders_get_404(
    world: World, session: Session, commit: Any
) -> None:
    created = commit(lambda: apply(world.api(world.operator_key), "s1", "baseagent-prune"))
    operation_id = created.json()["id"]
    for reader in (
        world.api(world.ingest_key),
        world.login(world.teammate),
        world.login(world.owner),
    ):
        response = list_operations(reader)
        assert response.status_code == 200, response.content
        assert [o["id"] for o in response.json()["results"]] == [operation_id]
    for outsider in (world.api(world.outsider_key), world.login(world.outsider)):
        response = list_operations(outsider)
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "not_found"
    assert list_operations(world.api(world.ingest_key), "no-such-session").status_code == 404


def test_the_other_projects_session_of_the_same_name_lists_only_its_own(
    world: World, session: Session, commit: Any
) -> None:
    theirs = world.api(world.outsider_key)
    response = commit(lambda: post_turn(theirs, "s1", body(history())))
    assert response.status_code == 201, response.content
    ours = commit(lambda: apply(world.api(world.operator_key), "s1", "baseagent-prune"))
    mine = commit(lambda: apply(theirs, "s1", "baseagent-middle-out"))
    assert [o["id"] for o in list_operations(theirs).json()["results"]] == [mine.json()["id"]]
    listed = list_operations(world.api(world.ingest_key)).json()["results"]
    assert [o["id"] for o in listed] == [ours.json()["id"]]


@pytest.mark.usefixtures("clear_of_a_minutes_end")
def test_reading_the_list_does_not_spend_the_costly_budget(
    world: World, session: Session, commit: Any, settings: Any
) -> None:
    settings.CTXWEB_RATE_LIMIT_COSTLY = "1/min"
    operator = world.api(world.operator_key)
    for _ in range(3):
        assert list_operations(operator).status_code == 200
    assert commit(lambda: apply(operator, "s1", "baseagent-prune")).status_code == 202
    assert apply(operator, "s1", "baseagent-prune").status_code == 429
    assert list_operations(operator).status_code == 200
