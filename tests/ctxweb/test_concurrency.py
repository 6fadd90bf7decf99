"""Concurrent ingestion against a real server: ``python -m ctxweb.server`` in a subprocess.

Eight client threads post turns at once over loopback HTTP to a uvicorn process serving the test
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

import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from compaction.messages import parse
from ctxweb.contexts.models import Message, Session, Turn
from tests.support.builders import AGENTS, COMMON, assert_turn_holds, turn_body
from tests.support.servers import LiveServer, Reply, post, require_postgresql
from tests.support.world import World

ROOT = Path(__file__).resolve().parents[2]
CLIENTS = AGENTS
TURNS_PER_CLIENT = 6
#: A bound on the whole burst: a deadlock (or a lock wait with no end) fails the test here.
BURST_SECONDS = 120
REQUEST_SECONDS = 60

pytestmark = [pytest.mark.production, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def postgresql_only() -> None:
    require_postgresql()


def post_twice(url: str, key: str, payload: Mapping[str, Any]) -> tuple[Reply, Reply]:
    """The same post twice at the same moment (a client retrying before the first answered)."""
    barrier = threading.Barrier(2)

    def send() -> Reply:
        barrier.wait(timeout=10)
        return post(url, key, payload)

    with ThreadPoolExecutor(2) as pool:
        first, second = pool.map(lambda _: send(), range(2))
    return first, second


def run_clients(work: Callable[[int], Any], server: LiveServer) -> list[Any]:
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


def test_clients_racing_on_one_session_store_each_turn_once_in_order(
    world: World, start_server: Callable[..., LiveServer]
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
    world: World, start_server: Callable[..., LiveServer]
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
