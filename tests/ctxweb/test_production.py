"""The production shape, end to end: PostgreSQL, the channels-redis layer and a real Celery worker.

Each test starts ``celery -A ctxweb worker`` as a subprocess on the test database and the same
Redis, applies an operation over HTTP (``transactional_db``: the worker sees committed rows) and
follows it over a real WebSocket through the channels-redis layer. The worker-death tests kill
the worker's child (or the whole worker) in the middle of a slow summary and show the operation
retried, or failed by the reaper, within bounded time, saying why.

Runs when ``REDIS_URL`` is set and the database is PostgreSQL; skipped otherwise, with the reason.
Under ``CI=true`` with ``REDIS_URL`` set it must run: a non-PostgreSQL database then fails.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test import Client

from ctxweb.asgi import application
from ctxweb.contexts.models import Operation, PendingCall, Session
from ctxweb.contexts.services import operations
from tests.support.builders import body, history
from tests.support.providers import provider_stand_in
from tests.support.servers import database_server_env, database_url, live_server
from tests.support.world import World

ROOT = Path(__file__).resolve().parents[2]
ORIGIN = (b"origin", b"http://testserver")
READY_SECONDS = 90
RUN_SECONDS = 90

pytestmark = [pytest.mark.production, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def production_shape() -> None:
    if not settings.REDIS_URL:
        pytest.skip("production shape: REDIS_URL is not set (make test sets it when Redis answers)")
    if connection.vendor != "postgresql":
        reason = f"production shape needs PostgreSQL, the database is {connection.vendor}"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason} (CI=true with REDIS_URL set: this must run)")
        pytest.skip(reason)


#: Starts the real Celery CLI after slowing the summarizer and the heartbeat down to test speed
#: (the patch is inherited by the prefork child that runs the task).
SLOW_BOOT = """
import os, sys, time
import django
django.setup()
from compaction.summarizers import FactSummarizer
from ctxweb.contexts.services.operations import _running

class SlowLLM:
    def summarize(self, messages, *, previous, prompt):
        time.sleep(float(os.environ["CTXWEB_TEST_SUMMARY_DELAY"]))
        return FactSummarizer().summarize(messages, previous=previous, prompt=prompt)

_running.operation_summarizer = SlowLLM
_running.HEARTBEAT_SECONDS = 0.5
from celery.bin.celery import main
sys.argv = ["celery", *sys.argv[1:]]
sys.exit(main())
"""


class Worker:
    """A ``celery -A ctxweb worker`` subprocess in its own process group, with its output."""

    def __init__(
        self, *, slow_summary: float | None = None, extra_env: dict[str, str] | None = None
    ) -> None:
        self.name = f"ctxweb-test-{uuid.uuid4().hex[:8]}@%h"
        args = [
            "-A",
            "ctxweb",
            "worker",
            "--pool=prefork",
            "--concurrency=1",
            "--loglevel=INFO",
            "--purge",
            "--without-gossip",
            "--without-mingle",
            "-n",
            self.name,
        ]
        env = {
            **os.environ,
            "DATABASE_URL": database_url(),
            "REDIS_URL": settings.REDIS_URL,
            "DJANGO_SETTINGS_MODULE": "ctxweb.settings",
            "PYTHONUNBUFFERED": "1",
            **(extra_env or {}),
        }
        if slow_summary is None:
            command = [str(Path(sys.executable).with_name("celery")), *args]
        else:
            env["CTXWEB_TEST_SUMMARY_DELAY"] = str(slow_summary)
            command = [sys.executable, "-c", SLOW_BOOT, *args]
        self.process = subprocess.Popen(
            command,
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)

    @property
    def output(self) -> str:
        return "".join(self.lines[-80:])

    def wait_ready(self) -> None:
        deadline = time.monotonic() + READY_SECONDS
        while time.monotonic() < deadline:
            if any(" ready." in line for line in self.lines):
                return
            if self.process.poll() is not None:
                pytest.fail(f"the Celery worker exited ({self.process.returncode}):\n{self.output}")
            time.sleep(0.2)
        pytest.fail(f"the Celery worker was not ready in {READY_SECONDS}s:\n{self.output}")

    def children(self) -> set[int]:
        """The worker's pool processes (Linux)."""
        found: set[int] = set()
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == self.process.pid:
                found.add(int(stat.parent.name))
        return found

    def kill_all(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill_all()
        self.reader.join(timeout=5)


@pytest.fixture
def start_worker(transactional_db: None) -> Iterator[Callable[..., Worker]]:
    started: list[Worker] = []

    def start(**kwargs: Any) -> Worker:
        worker = Worker(**kwargs)
        started.append(worker)
        worker.wait_ready()
        return worker

    yield start
    for worker in started:
        worker.stop()


def post_turn(world: World, payload: dict[str, Any]) -> None:
    response = world.api(world.ingest_key).post(
        "/api/v1/sessions/prod/turns", data=json.dumps(payload), content_type="application/json"
    )
    assert response.status_code == 201, response.content


def apply(world: World, strategy: str) -> int:
    response = world.api(world.operator_key).post(
        "/api/v1/sessions/prod/operations", data={"strategy": strategy}, format="json"
    )
    assert response.status_code == 202, response.content
    return int(response.json()["id"])


def wait_for(check: Callable[[], Any], seconds: float, what: str, worker: Worker) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    pytest.fail(f"{what}: not within {seconds}s\n--- worker output ---\n{worker.output}")


def test_a_real_worker_applies_an_operation_with_live_progress_over_redis(
    world: World, start_worker: Callable[..., Worker]
) -> None:
    worker = start_worker()
    post_turn(world, body(history(3)))
    client = Client()
    client.force_login(world.owner)
    cookie = (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())

    async def scenario() -> dict[str, Any]:
        communicator = WebsocketCommunicator(
            application, "/ws/sessions/prod/", headers=[ORIGIN, cookie]
        )
        connected, _ = await communicator.connect(timeout=10)
        assert connected
        assert (await communicator.receive_json_from(timeout=10))["type"] == "hello"
        operation_id = await sync_to_async(apply)(world, "baseagent-middle-out")
        seen: list[dict[str, Any]] = []
        while not seen or seen[-1]["type"] != "operation.finished":
            seen.append(await communicator.receive_json_from(timeout=RUN_SECONDS))
        await communicator.disconnect()
        stages = [m["stage"] for m in seen if m["type"] == "operation.progress"]
        assert stages[:4] == ["starting", "loading context", "planning", "storing"], stages
        assert seen[-1]["operation"]["id"] == operation_id
        return dict(seen[-1]["operation"])

    finished = async_to_sync(scenario)()
    assert finished["status"] == "succeeded", (finished, worker.output)
    operation = Operation.objects.get(pk=finished["id"])
    assert operation.status == "succeeded"
    assert operation.result is not None
    assert operation.result["tokens_saved"] > 0
    assert operation.result_version == 1
    host_pid = operation.worker.rsplit(":", 1)[1]
    assert int(host_pid) in worker.children()  # it really ran in the worker's pool
    assert "ctxweb.contexts.tasks.operation_run" in worker.output


def test_a_real_worker_imports_a_transcript_in_the_background(
    world: World, start_worker: Callable[..., Worker]
) -> None:
    worker = start_worker()
    transcript = [
        {"id": f"bg-{n}", "messages": [*history(4)[1:], {"role": "assistant", "content": "ok"}]}
        for n in range(3)
    ]
    upload = SimpleUploadedFile("runs.json", json.dumps(transcript).encode())
    client = world.api(world.ingest_key)
    response = client.post("/api/v1/import", {"file": upload, "background": "true"})
    assert response.status_code == 202, response.content
    url = response.json()["url"]
    job = wait_for(
        lambda: (lambda j: j if j["status"] in ("succeeded", "failed") else None)(
            client.get(url).json()
        ),
        RUN_SECONDS,
        "the import finished",
        worker,
    )
    assert job["status"] == "succeeded", job
    assert [s["external_id"] for s in job["sessions"]] == ["bg-0", "bg-1", "bg-2"]
    assert job["progress"]["percent"] == 100
    assert Session.objects.filter(project=world.project, external_id__startswith="bg-").count() == 3
    assert "ctxweb.tasks.import_run" in worker.output


def running_in_summary(operation_id: int) -> Operation | None:
    operation = Operation.objects.get(pk=operation_id)
    if operation.status == "running" and "summarizing" in operation.progress.get("stage", ""):
        return operation
    return None


def test_a_worker_child_killed_mid_operation_is_redelivered_and_retried(
    world: World, start_worker: Callable[..., Worker]
) -> None:
    worker = start_worker(slow_summary=3)
    post_turn(world, body(history(3)))
    operation_id = apply(world, "codex-compact")
    running = wait_for(
        lambda: running_in_summary(operation_id), 60, "the operation reached its summary", worker
    )
    assert running.progress["stage"] == "summarizing: request in flight"
    child = int(running.worker.rsplit(":", 1)[1])
    assert child in worker.children()
    os.kill(child, signal.SIGKILL)  # the pool process dies in the middle of the LLM call

    def finished() -> Operation | None:
        operation = Operation.objects.get(pk=operation_id)
        return operation if operation.status in ("succeeded", "failed") else None

    done = wait_for(finished, RUN_SECONDS, "the killed operation finished", worker)
    assert done.status == "succeeded", (done.error, worker.output)
    assert done.attempts == 2
    assert "retried after its worker was lost" in done.progress["retry"]
    assert str(child) in done.progress["retry"]
    assert done.result is not None
    assert done.result["attempts"] == 2


def test_a_whole_worker_killed_mid_operation_is_reaped_as_failed(
    world: World, start_worker: Callable[..., Worker]
) -> None:
    worker = start_worker(slow_summary=30)
    post_turn(world, body(history(3)))
    operation_id = apply(world, "codex-compact")
    running = wait_for(
        lambda: running_in_summary(operation_id), 60, "the operation reached its summary", worker
    )
    worker.kill_all()  # the machine went away: nobody is left to requeue the task
    time.sleep(2)
    assert Operation.objects.get(pk=operation_id).status == "running"
    reaped = operations.operation_reap_stale(older_than=1.5)
    assert reaped == [operation_id]
    failed = Operation.objects.get(pk=operation_id)
    assert failed.status == "failed"
    assert failed.error.startswith("worker lost: no heartbeat from")
    assert running.worker in failed.error
    assert failed.finished_at is not None


def test_proxied_calls_are_recorded_by_a_real_worker_from_the_durable_queue(
    world: World, start_worker: Callable[..., Worker], tmp_path: Path
) -> None:
    """The production shape's recorder: the web process writes each relayed call to the queue
    (rows in PostgreSQL, files in the shared data folder) and a Celery worker records it, in
    order, over the Redis broker; the proxy's memory of the conversation is shared by both."""
    from openai import OpenAI

    worker = start_worker(
        extra_env={"CTXWEB_DATA_DIR": str(tmp_path), "CTXWEB_BACKGROUND_NICE": "10"}
    )
    with provider_stand_in() as upstream:
        env = database_server_env(
            tmp_path, CTXWEB_UPSTREAM_OPENAI=f"{upstream.url}/v1", CTXWEB_RATE_LIMIT=""
        )
        with live_server(env) as server:
            client = OpenAI(
                api_key="sk-provider",
                base_url=f"{server.url}/proxy/openai/v1",
                default_headers={"X-Ctxweb-Key": world.operator_key},
            )
            messages: list[dict[str, Any]] = [{"role": "user", "content": "Build it."}]
            for n in range(3):
                answer = client.chat.completions.create(model="gpt-4o", messages=messages)  # type: ignore[arg-type]
                messages += [
                    {"role": "assistant", "content": answer.choices[0].message.content},
                    {"role": "user", "content": f"Step {n}."},
                ]

            def recorded() -> Any:
                sessions = list(Session.objects.filter(project=world.project, source="proxy"))
                return sessions if sessions and sessions[0].turns.count() == 3 else None

            sessions = wait_for(recorded, RUN_SECONDS, "3 calls recorded by the worker", worker)
    # one conversation (joined through the memory in the database, no session header)
    assert len(sessions) == 1
    assert not PendingCall.objects.exists()
    assert "ctxweb.tasks.recordings_drain" in "".join(worker.lines), worker.output
    assert not list((tmp_path / "recordings").iterdir())
    # recording is background work: the worker's pool runs at a lower CPU priority
    # (CTXWEB_BACKGROUND_NICE) than the processes that serve callers

    def nice(pid: int) -> int:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[16])

    children = worker.children()
    assert children
    assert {nice(pid) for pid in children} == {min(19, nice(worker.process.pid) + 10)}


def test_a_real_worker_replays_a_session_one_task_a_column_with_live_progress(
    world: World, start_worker: Callable[..., Worker]
) -> None:
    """A replay in the production shape: the replay's task sends one task a column (so columns
    run in parallel on as many workers as there are), the last column to land finishes it, and
    its progress and end reach the session's socket through channels-redis."""
    worker = start_worker()
    for step in range(4):
        post_turn(world, body(history(step + 1)))
    client = Client()
    client.force_login(world.owner)
    cookie = (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())
    policies = [
        {"label": "outputs cut", "strategy": "baseagent-middle-out", "trigger": {"tokens": 1000}},
        {"strategy": "ctxweb-auto", "params": {"target_fraction": 0.3}},
    ]

    def start_replay() -> int:
        response = world.api(world.operator_key).post(
            "/api/v1/sessions/prod/replays", data={"policies": policies}, format="json"
        )
        assert response.status_code == 202, response.content
        return int(response.json()["id"])

    async def scenario() -> tuple[int, list[dict[str, Any]]]:
        communicator = WebsocketCommunicator(
            application, "/ws/sessions/prod/", headers=[ORIGIN, cookie]
        )
        connected, _ = await communicator.connect(timeout=10)
        assert connected
        assert (await communicator.receive_json_from(timeout=10))["type"] == "hello"
        replay_id = await sync_to_async(start_replay)()
        seen: list[dict[str, Any]] = []
        while not seen or seen[-1]["type"] != "replay.finished":
            seen.append(await communicator.receive_json_from(timeout=RUN_SECONDS))
        await communicator.disconnect()
        return replay_id, seen

    replay_id, seen = async_to_sync(scenario)()
    assert seen[-1]["status"] == "succeeded", (seen[-1], worker.output)
    assert seen[-1]["replay"] == replay_id
    done = [m["done"] for m in seen if m["type"] == "replay.progress"]
    assert done == sorted(done)
    assert done[-1] == 4 * 3
    detail = world.api(world.ingest_key).get(f"/api/v1/sessions/prod/replays/{replay_id}").json()
    assert detail["done"] == detail["total"] == 4 * 3
    totals = list(
        Session.objects.get(external_id="prod")
        .turns.order_by("index")
        .values_list("total_tokens", flat=True)
    )
    recorded, cut, auto = detail["results"]
    assert [t["total"] for t in recorded["turns"]] == totals
    assert cut["compactions"][0]["turn"] == 0
    assert len(auto["turns"]) == 4
    received = [
        line
        for line in worker.lines
        if "ctxweb.tasks.replay_run_column[" in line and "received" in line
    ]
    assert len(received) == 3, worker.output  # one task a column
