"""Faults in the production shape, against a real server (uvicorn) and real services.

- **The database drops its connections while clients post** (``pg_terminate_backend`` on every
  server connection to the test database, repeatedly: what clients see when PostgreSQL restarts
  or a proxy cuts them): posts in flight fail with a 5xx, a retry with the same ``turn_id``
  succeeds (``201``, or ``200`` when the lost answer's turn had committed), and nothing is half
  written: every turn's message ids resolve to rows, its regions add up to its total, the indexes
  have no gap, and every message row belongs to some turn.
- **Redis goes away** (this test's own ``redis-server``, killed while clients post): ingestion
  carries on with bounded latency (publishing a live event is given a short deadline and logged
  when it fails), and once Redis is back on the same port a WebSocket client that reconnects
  hears ``turn.created`` again.
- **A worker dies mid-operation**: ``tests/ctxweb/test_production.py`` (a pool child killed:
  redelivered and retried; the whole worker killed: failed by the reaper).

Runs when the database is PostgreSQL, like :mod:`tests.ctxweb.test_concurrency`; the Redis test
also needs ``redis-server`` on the ``PATH`` (it never touches the shared Redis).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from django.conf import settings
from django.db import connection
from django.test import Client

from ctxweb.contexts import selectors
from ctxweb.contexts.models import Message, Session, Turn
from tests.support.builders import assert_turn_holds, turn_body
from tests.support.servers import LiveServer, Reply, free_port, post, require_postgresql
from tests.support.world import World

CLIENTS = 6
TURNS_PER_CLIENT = 8
ATTEMPTS = 30
#: A post must answer within this while Redis is down (connect refused, or a publish timed out).
BOUNDED_SECONDS = 5.0
#: Live updates must be back within this once Redis is.
RECOVERY_SECONDS = 30.0

# Alone: the database fault kills connections every 150 ms, and a request must finish between two
# kills; the production pass runs these in a pytest process of their own (Makefile).
pytestmark = [
    pytest.mark.production,
    pytest.mark.alone,
    pytest.mark.django_db(transaction=True),
]


@pytest.fixture(autouse=True)
def postgresql_only() -> None:
    require_postgresql("the production shape's faults")


def post_until_stored(url: str, key: str, payload: dict[str, Any]) -> list[Reply]:
    """Post, retrying with the same body (and turn_id) until a 2xx; every reply, in order."""
    replies: list[Reply] = []
    for _ in range(ATTEMPTS):
        reply = post(url, key, payload, timeout=30)
        replies.append(reply)
        if reply.status in (200, 201):
            return replies
        assert reply.status == 0 or reply.status >= 500, (reply.status, reply.body)
        time.sleep(0.05)
    pytest.fail(f"not stored after {ATTEMPTS} attempts: {[r.status for r in replies]}")


def terminate_server_connections() -> int:
    """What clients see when PostgreSQL restarts: their connections to the database die."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        row = cursor.fetchone()
    return int(row[0]) if row else 0


def assert_nothing_half_written(world: World) -> None:
    """Every stored turn is complete, and every stored message belongs to a turn."""
    referenced: set[int] = set()
    for session in Session.objects.filter(project=world.project):
        turns = list(Turn.objects.filter(session=session).order_by("index"))
        assert [t.index for t in turns] == list(range(len(turns)))
        assert session.turn_count == len(turns)
        for turn in turns:
            ids = selectors.turn_message_ids(session=session, index=turn.index)
            referenced.update(ids)
            if turn.system_id is not None:
                referenced.add(turn.system_id)
    stored = set(Message.objects.filter(project=world.project).values_list("id", flat=True))
    assert stored == referenced, f"{len(stored - referenced)} message rows belong to no turn"


@pytest.mark.parametrize("conn_max_age", ["0", "60"], ids=["fresh-connections", "persistent"])
def test_dropped_database_connections_fail_posts_that_a_retry_stores_whole(
    world: World, start_server: Callable[..., LiveServer], conn_max_age: str
) -> None:
    server = start_server(CONN_MAX_AGE=conn_max_age)
    stop = threading.Event()
    killed: list[int] = []

    def killer() -> None:
        try:
            while not stop.is_set():
                killed.append(terminate_server_connections())
                stop.wait(0.15)
        finally:
            connection.close()

    def client(c: int) -> list[list[Reply]]:
        url = f"{server.url}/api/v1/sessions/fault-{c}/turns"
        return [
            post_until_stored(url, world.ingest_key, turn_body(c, step))
            for step in range(TURNS_PER_CLIENT)
        ]

    chaos = threading.Thread(target=killer, daemon=True)
    chaos.start()
    try:
        with ThreadPoolExecutor(CLIENTS) as pool:
            results = list(pool.map(client, range(CLIENTS), timeout=120))
    finally:
        stop.set()
        chaos.join(timeout=10)
        connection.close()  # ours may have been a victim of another test's killer: reconnect

    statuses = [r.status for turns in results for replies in turns for r in replies]
    failed = [s for s in statuses if s not in (200, 201)]
    print(
        f"\n{conn_max_age=}: {sum(killed)} connections terminated; replies {Counter(statuses)};"
        f" {len(statuses) - CLIENTS * TURNS_PER_CLIENT} retries"
    )
    assert sum(killed) > 0, "the killer never found a server connection"
    assert failed, "no post was hit by a dropped connection: the fault did not happen"
    for c, turns in enumerate(results):
        session = Session.objects.get(project=world.project, external_id=f"fault-{c}")
        stored = list(Turn.objects.filter(session=session).order_by("index"))
        assert [t.turn_id for t in stored] == [f"c{c}-s{s}" for s in range(TURNS_PER_CLIENT)]
        for step, (turn, replies) in enumerate(zip(stored, turns, strict=True)):
            assert replies[-1].body["index"] == turn.index == step
            assert_turn_holds(turn, turn_body(c, step))
    assert_nothing_half_written(world)


# --- Redis ---------------------------------------------------------------------------------------


class RedisServer:
    """This test's own ``redis-server`` (never the shared one), stoppable and restartable."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                *("redis-server", "--port", str(self.port), "--bind", "127.0.0.1"),
                *("--save", "", "--appendonly", "no", "--daemonize", "no"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                time.sleep(0.05)
        pytest.fail(f"redis-server did not answer on port {self.port}")

    def freeze(self) -> None:
        """A hung Redis: the port still accepts connections, nothing answers (SIGSTOP)."""
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not on the PATH")
    redis = RedisServer(free_port())
    redis.start()
    yield redis
    redis.kill()


#: The origin of the pages whose WebSockets the servers here accept (CTXWEB_ALLOWED_ORIGINS).
PAGE_ORIGIN = "https://ctxweb.example.com"


class WebSocket:
    """A minimal RFC 6455 client over a plain socket: enough to hear a session's events."""

    def __init__(self, server: LiveServer, path: str, cookie: str) -> None:
        self.sock = socket.create_connection(("127.0.0.1", server.port or 0), timeout=10)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(
            (
                f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
                "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
                f"Origin: {PAGE_ORIGIN}\r\nCookie: sessionid={cookie}\r\n\r\n"
            ).encode()
        )
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(1)
            if not chunk:
                raise ConnectionError(f"closed during the handshake: {head!r}")
            head += chunk
        if not head.startswith(b"HTTP/1.1 101"):
            raise ConnectionError(f"handshake refused: {head!r}")

    def _exact(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("the server closed the socket")
            data += chunk
        return data

    def receive(self, timeout: float) -> dict[str, Any]:
        """The next JSON text message (pings are answered, a close raises ConnectionError)."""
        self.sock.settimeout(timeout)
        while True:
            first, second = self._exact(2)
            opcode, length = first & 0x0F, second & 0x7F
            if length == 126:
                (length,) = struct.unpack("!H", self._exact(2))
            elif length == 127:
                (length,) = struct.unpack("!Q", self._exact(8))
            payload = self._exact(length)
            if opcode == 0x1:
                return dict(json.loads(payload))
            if opcode == 0x8:
                raise ConnectionError(f"closed by the server: {payload!r}")
            if opcode == 0x9:
                self._send(0xA, payload)

    def receive_type(self, kind: str, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            message = self.receive(max(0.1, deadline - time.monotonic()))
            if message.get("type") == kind:
                return message

    def _send(self, opcode: int, payload: bytes) -> None:
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        assert len(payload) < 126
        self.sock.sendall(bytes([0x80 | opcode, 0x80 | len(payload)]) + mask + masked)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._send(0x8, struct.pack("!H", 1000))
        self.sock.close()


def live_again(
    server: LiveServer, cookie: str, url: str, key: str, *, first_step: int
) -> tuple[dict[str, Any], int]:
    """What the dashboard does once Redis is back: (re)connect, closed or not, until a new turn
    is heard. A turn is posted on each try (events are dropped for a moment after a timeout).
    Returns the ``turn.created`` heard and the number of turns posted by then."""
    deadline = time.monotonic() + RECOVERY_SECONDS
    step = first_step
    while time.monotonic() < deadline:
        try:
            live = WebSocket(server, "/ws/sessions/live/", cookie)
        except OSError:
            time.sleep(0.5)
            continue
        try:
            assert live.receive(10)["type"] == "hello"
            while time.monotonic() < deadline:
                reply = post(url, key, turn_body(0, step))
                assert reply.status == 201, (reply.status, reply.body, server.output)
                step += 1
                try:
                    return live.receive_type("turn.created", 2), step
                except TimeoutError:
                    continue  # dropped: try with the next turn
        except ConnectionError:  # closed by the server while its layer recovered: reconnect
            time.sleep(0.5)
        finally:
            live.close()
    pytest.fail(f"no live update within {RECOVERY_SECONDS}s of Redis returning\n{server.output}")


@pytest.mark.parametrize("outage", ["killed", "frozen"])
def test_ingestion_outlives_redis_and_live_updates_resume_when_it_returns(
    world: World, start_server: Callable[..., LiveServer], own_redis: RedisServer, outage: str
) -> None:
    server = start_server(REDIS_URL=own_redis.url, CTXWEB_ALLOWED_ORIGINS=PAGE_ORIGIN)
    url = f"{server.url}/api/v1/sessions/live/turns"
    first = post(url, world.ingest_key, turn_body(0, 0))
    assert first.status == 201, first.body
    browser = Client()
    browser.force_login(world.owner)
    cookie = browser.cookies["sessionid"].value

    socket_before = WebSocket(server, "/ws/sessions/live/", cookie)
    assert socket_before.receive(10)["type"] == "hello"
    assert post(url, world.ingest_key, turn_body(0, 1)).status == 201
    heard = socket_before.receive_type("turn.created", 10)
    assert heard["turn"]["index"] == 1

    if outage == "killed":  # Redis goes away with the socket's subscription in it
        own_redis.kill()
    else:
        own_redis.freeze()
    down: list[Reply] = []
    for step in range(2, 8):
        reply = post(url, world.ingest_key, turn_body(0, step), timeout=30)
        down.append(reply)
        assert reply.status == 201, (reply.status, reply.body, server.output)
        assert reply.seconds < BOUNDED_SECONDS, (reply.seconds, server.output)
    print("\n".join(f"{r.seconds * 1000:.0f} ms" for r in down))
    assert "could not publish turn.created" in server.log
    socket_before.close()

    if outage == "killed":
        own_redis.start()  # back, empty, on the same port
    else:
        own_redis.thaw()
    heard, posted = live_again(server, cookie, url, world.ingest_key, first_step=8)
    assert heard["turn"]["index"] >= 8  # a turn posted after Redis returned

    session = Session.objects.get(project=world.project, external_id="live")
    assert session.turn_count == posted
    request = urllib.request.Request(
        f"{url}?after=7&limit=500", headers={"Authorization": f"Bearer {world.ingest_key}"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:  # the browser's catch-up
        items = json.loads(response.read())
        assert response.headers.get("Link") is None  # one page holds them
    assert [t["index"] for t in items] == list(range(8, posted))
    latencies = sorted(r.seconds for r in down)
    print(f"ingest with Redis down: max {latencies[-1] * 1000:.0f} ms over {len(down)} posts")
    assert_nothing_half_written(world)
    assert own_redis.url != settings.REDIS_URL  # the shared Redis was never touched
