"""Concurrent ingestion against a real server: ``daphne ctxweb.asgi:application`` in a subprocess.

Eight client threads post turns at once over loopback HTTP to a daphne process serving the test
database (``transactional_db``: the server sees the committed keys, the test sees its turns).
Every post is sent twice at the same moment with the same ``turn_id``, as a client retrying a
request whose answer it never saw would. Checked afterwards, in the database:

- one session shared by all clients: every turn stored exactly once, indexes ``0..N-1`` with no
  gap, each turn's messages exactly what its client sent, each client's turns in its own order;
- one session per client: no turn lands in another client's session.

The contexts share messages in different orders (a few-shot preamble rotated per client), so
concurrent transactions insert the same message rows: the deadlock-prone case.

Runs when the database is PostgreSQL (SQLite serializes every writer: nothing to race); skipped
otherwise with the reason, except under ``CI=true`` with ``REDIS_URL`` set (the PostgreSQL pass of
``make test``), where a skip would hide a missing pass and fails instead.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from django.conf import settings
from django.db import connection

from compaction.messages import parse
from ctxweb.contexts import selectors
from ctxweb.contexts.models import Message, Session, Turn
from tests.ctxweb.conftest import World

ROOT = Path(__file__).resolve().parents[2]
CLIENTS = 8
TURNS_PER_CLIENT = 6
READY_SECONDS = 60
#: A bound on the whole burst: a deadlock (or a lock wait with no end) fails the test here.
BURST_SECONDS = 120
REQUEST_SECONDS = 60

pytestmark = [pytest.mark.production, pytest.mark.django_db(transaction=True)]


def require_postgresql(why: str = "concurrent writers") -> None:
    """Skip unless the database is PostgreSQL; fail instead in CI's PostgreSQL pass."""
    if connection.vendor == "postgresql":
        return
    reason = f"needs PostgreSQL ({why}), the database is {connection.vendor}"
    if os.environ.get("CI") == "true" and os.environ.get("REDIS_URL"):
        pytest.fail(f"{reason} (CI=true with REDIS_URL set: the PostgreSQL pass must run this)")
    pytest.skip(reason)


@pytest.fixture(autouse=True)
def postgresql_only() -> None:
    require_postgresql()


def database_url() -> str:
    """The URL of the *test* database (what pytest-django created), for a server subprocess."""
    db = settings.DATABASES["default"]
    auth = quote(db.get("USER") or "", safe="")
    if db.get("PASSWORD"):
        auth += ":" + quote(db["PASSWORD"], safe="")
    host = db.get("HOST") or "127.0.0.1"
    port = db.get("PORT") or 5432
    return f"postgres://{auth}@{host}:{port}/{db['NAME']}"


class Server:
    """``daphne ctxweb.asgi:application`` on a free loopback port, in its own process group."""

    def __init__(self, data_dir: Path, **env: str) -> None:
        environment = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "ctxweb.settings",
            "DATABASE_URL": database_url(),
            "REDIS_URL": settings.REDIS_URL,
            # The test process signs the dashboard login's session: the server must read it.
            "SECRET_KEY": settings.SECRET_KEY,
            "CTXWEB_DATA_DIR": str(data_dir),
            "DEBUG": "0",
            "PYTHONUNBUFFERED": "1",
            **env,
        }
        self.process = subprocess.Popen(
            [
                str(Path(sys.executable).with_name("daphne")),
                "-e",
                "tcp:port=0:interface=127.0.0.1",
                "ctxweb.asgi:application",
            ],
            cwd=ROOT,
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.lines: list[str] = []
        self.port: int | None = None
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)
            found = re.search(r"Listening on TCP address [\d.]+:(\d+)", line)
            if found and self.port is None:
                self.port = int(found.group(1))

    @property
    def output(self) -> str:
        """The last lines the server wrote (for failure messages)."""
        return "".join(self.lines[-60:])

    @property
    def log(self) -> str:
        """Everything the server wrote."""
        return "".join(self.lines)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def wait_ready(self) -> None:
        deadline = time.monotonic() + READY_SECONDS
        while time.monotonic() < deadline:
            if self.port is not None:
                try:
                    with urllib.request.urlopen(f"{self.url}/api/v1/health", timeout=5) as r:
                        if r.status == 200:
                            return
                except OSError:
                    pass
            if self.process.poll() is not None:
                pytest.fail(f"daphne exited ({self.process.returncode}):\n{self.output}")
            time.sleep(0.1)
        pytest.fail(f"daphne was not ready in {READY_SECONDS}s:\n{self.output}")

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=15)
        self.reader.join(timeout=5)


@pytest.fixture
def start_server(
    transactional_db: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[..., Server]]:
    """Start daphne processes on the test database (extra environment as keywords)."""
    started: list[Server] = []

    def start(**env: str) -> Server:
        server = Server(tmp_path_factory.mktemp("server-data"), **env)
        started.append(server)
        server.wait_ready()
        return server

    yield start
    for server in started:
        server.stop()


@dataclass
class Reply:
    status: int
    body: dict[str, Any]
    seconds: float


def post(url: str, key: str, payload: Mapping[str, Any], timeout: float = REQUEST_SECONDS) -> Reply:
    """POST JSON; a connection error or timeout is status 0 (what a client sees as "no answer")."""
    request = urllib.request.Request(
        url,
        data=json.dumps(payload).encode(),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
        method="POST",
    )
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return Reply(
                response.status, json.loads(response.read()), time.perf_counter() - started
            )
    except urllib.error.HTTPError as error:
        raw = error.read()
        try:
            body = json.loads(raw)
        except ValueError:
            body = {"raw": raw[:500].decode(errors="replace")}
        return Reply(error.code, body, time.perf_counter() - started)
    except OSError as error:
        return Reply(0, {"raw": repr(error)}, time.perf_counter() - started)


#: Short messages every agent sends, in its own order: concurrent first turns of different
#: sessions insert the same message rows in different orders.
COMMON = [f"Shared instruction {i}: keep going." for i in range(CLIENTS)]


def request_for(client: int, step: int, tag: str = "") -> dict[str, Any]:
    """Client ``client``'s context at its ``step``-th call: a rotated shared preamble, then its
    own growing history (each step adds a user message, a tool call and its result)."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}]
    rotated = COMMON[client:] + COMMON[:client]
    messages += [{"role": "user", "content": text} for text in rotated]
    for k in range(step + 1):
        call = f"call_{client}_{k}"
        messages += [
            {"role": "user", "content": f"{tag}client {client} step {k}: read file {k}."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call,
                        "type": "function",
                        "function": {"name": "read", "arguments": json.dumps({"path": f"f{k}"})},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": call, "content": f"file {k} of client {client}\n"},
        ]
    return {"model": "gpt-4o", "messages": messages}


def turn_body(client: int, step: int, tag: str = "") -> dict[str, Any]:
    return {
        "format": "openai-chat",
        "request": request_for(client, step, tag),
        "turn_id": f"{tag}c{client}-s{step}",
    }


def post_twice(url: str, key: str, payload: Mapping[str, Any]) -> tuple[Reply, Reply]:
    """The same post twice at the same moment (a client retrying before the first answered)."""
    barrier = threading.Barrier(2)

    def send() -> Reply:
        barrier.wait(timeout=10)
        return post(url, key, payload)

    with ThreadPoolExecutor(2) as pool:
        first, second = pool.map(lambda _: send(), range(2))
    return first, second


def run_clients(work: Callable[[int], Any], server: Server) -> list[Any]:
    """Run ``work(client)`` for every client at once; fail if the burst outlives its bound."""
    pool = ThreadPoolExecutor(CLIENTS)
    futures = [pool.submit(work, c) for c in range(CLIENTS)]
    deadline = time.monotonic() + BURST_SECONDS
    results = []
    try:
        for future in futures:
            remaining = max(0.1, deadline - time.monotonic())
            try:
                results.append(future.result(timeout=remaining))
            except TimeoutError:
                pytest.fail(f"the burst did not finish in {BURST_SECONDS}s\n{server.output}")
    finally:
        pool.shutdown(wait=False, cancel_futures=True)  # stuck requests end by their timeout
    return results


def assert_turn_holds(turn: Turn, payload: Mapping[str, Any]) -> None:
    """The stored turn is complete and is the context that was posted."""
    sent = parse(payload["format"], payload["request"])
    ids = selectors.turn_message_ids(session=turn.session, index=turn.index)
    assert len(ids) == turn.message_count == len(sent.messages)
    rows = Message.objects.in_bulk(set(ids))
    assert set(rows) == set(ids), "a turn refers to a message row that does not exist"
    stored = selectors.turn_context(turn=turn, rows=[rows[i] for i in ids])
    assert stored.messages == sent.messages, (
        f"turn {turn.index} ({turn.turn_id}) holds another body"
    )
    assert stored.system == sent.system
    assert sum(turn.regions.values()) == turn.total_tokens


def test_clients_racing_on_one_session_store_each_turn_once_in_order(
    world: World, start_server: Callable[..., Server]
) -> None:
    server = start_server()
    url = f"{server.url}/api/v1/sessions/shared/turns"

    def client(c: int) -> list[tuple[str, int]]:
        seen: list[tuple[str, int]] = []
        for step in range(TURNS_PER_CLIENT):
            payload = turn_body(c, step)
            first, second = post_twice(url, world.ingest_key, payload)
            replies = sorted([first.status, second.status])
            assert replies == [200, 201], (replies, first.body, second.body, server.output)
            assert first.body["index"] == second.body["index"]
            seen.append((payload["turn_id"], first.body["index"]))
        return seen

    started = time.monotonic()
    results = run_clients(client, server)
    elapsed = time.monotonic() - started

    expected = CLIENTS * TURNS_PER_CLIENT
    session = Session.objects.get(project=world.project, external_id="shared")
    turns = list(Turn.objects.filter(session=session).order_by("index"))
    assert [t.index for t in turns] == list(range(expected)), "gaps or duplicates in the indexes"
    assert session.turn_count == expected
    assert session.last_total_tokens == turns[-1].total_tokens
    by_turn_id = {t.turn_id: t for t in turns}
    assert len(by_turn_id) == expected
    for c, seen in enumerate(results):
        indexes = [index for _, index in seen]
        assert indexes == sorted(indexes), f"client {c}'s turns were stored out of its order"
        for step, (turn_id, index) in enumerate(seen):
            turn = by_turn_id[turn_id]
            assert turn.index == index
            assert_turn_holds(turn, turn_body(c, step))
    assert elapsed < BURST_SECONDS


def test_clients_on_their_own_sessions_never_see_each_others_turns(
    world: World, start_server: Callable[..., Server]
) -> None:
    server = start_server()

    def client(c: int) -> None:
        url = f"{server.url}/api/v1/sessions/own-{c}/turns"
        for step in range(TURNS_PER_CLIENT):
            first, second = post_twice(url, world.ingest_key, turn_body(c, step))
            assert sorted([first.status, second.status]) == [200, 201], (
                first.body,
                second.body,
                server.output,
            )
            assert first.body["index"] == second.body["index"] == step
            assert first.body["session"] == f"own-{c}"

    run_clients(client, server)

    sessions = Session.objects.filter(project=world.project).order_by("external_id")
    assert [s.external_id for s in sessions] == sorted(f"own-{c}" for c in range(CLIENTS))
    for c in range(CLIENTS):
        session = sessions.get(external_id=f"own-{c}")
        turns = list(Turn.objects.filter(session=session).order_by("index"))
        assert [t.index for t in turns] == list(range(TURNS_PER_CLIENT))
        assert session.turn_count == TURNS_PER_CLIENT
        for step, turn in enumerate(turns):
            assert turn.turn_id == f"c{c}-s{step}"
            assert_turn_holds(turn, turn_body(c, step))
    # The shared preamble is stored once for the project, however many sessions raced on it.
    shared = Message.objects.filter(project=world.project, data__parts__0__text__in=COMMON)
    assert shared.count() == len(COMMON)


def test_sessions_racing_to_store_the_same_messages_in_opposite_orders_do_not_deadlock(
    world: World,
) -> None:
    """Two first turns (two sessions) insert the same new message rows, in opposite orders, in
    overlapping statements: each holds rows the other waits for unless rows are inserted in one
    global order (PostgreSQL would abort one with "deadlock detected")."""
    texts = [f"common message {i}: " + "lorem ipsum " * 8 for i in range(3000)]
    orders = [texts, texts[::-1]]
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def ingest(n: int) -> None:
        from ctxweb.contexts import services

        context = parse(
            "openai-chat",
            {"model": "gpt-4o", "messages": [{"role": "user", "content": t} for t in orders[n]]},
        )
        try:
            barrier.wait(timeout=30)
            services.turn_ingest(project=world.project, external_id=f"race-{n}", context=context)
        except BaseException as error:  # reported below, in the test's thread
            errors.append(error)
        finally:
            connection.close()

    for _ in range(2):  # before the fix, the first round deadlocked nearly every time
        Message.objects.filter(project=world.project).delete()
        Turn.objects.filter(session__project=world.project).delete()
        Session.objects.filter(project=world.project).delete()
        threads = [threading.Thread(target=ingest, args=(n,)) for n in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert not errors, errors
        assert Message.objects.filter(project=world.project).count() == len(texts)
