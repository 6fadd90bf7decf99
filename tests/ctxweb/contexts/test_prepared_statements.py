"""A turn's fixed statements kept prepared on a PostgreSQL connection that outlives requests
(``services._sql._execute_at_once``): the same rows stored, each statement prepared once per
connection, and a connection whose prepared statements vanished serving again after one
failed turn."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import DatabaseError, connection
from django.test.utils import CaptureQueriesContext

from ctxweb.contexts import selectors
from ctxweb.contexts.models import Message, Turn
from ctxweb.contexts.services import _sql
from tests.support.builders import ingest_chat
from tests.support.world import World

pytestmark = pytest.mark.django_db


def ingest(world: World, external_id: str, turns: int) -> Turn:
    return ingest_chat(world.project, external_id, turns)


def stored(external_id: str) -> list[tuple[Any, ...]]:
    """What a session's turns hold, without keys and times: comparable between sessions."""
    hashes = dict(Message.objects.values_list("id", "hash"))
    rows = []
    for turn in Turn.objects.filter(session__external_id=external_id).order_by("index"):
        ids = selectors.turn_message_ids(session=turn.session, index=turn.index)
        rows.append(
            (
                turn.index,
                turn.turn_id,
                turn.body_hash,
                [hashes[i] for i in ids],
                turn.shared,
                turn.keyframe,
                turn.total_tokens,
                turn.regions,
                turn.max_output_tokens,
                turn.session.turn_count,
                turn.session.output_reserve,
            )
        )
    return rows


@pytest.fixture
def kept_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    """Connections kept across requests, as served (the tests' settings close them)."""
    if connection.vendor != "postgresql":
        pytest.skip("prepared statements are PostgreSQL's")
    monkeypatch.setitem(connection.settings_dict, "CONN_MAX_AGE", 300)


def sent(queries: CaptureQueriesContext) -> str:
    """The statements run, less transaction control (the test's savepoints)."""
    control = ("BEGIN", "SAVEPOINT", "RELEASE SAVEPOINT", "ROLLBACK", "COMMIT")
    return "; ".join(q["sql"] for q in queries.captured_queries if not q["sql"].startswith(control))


def test_a_kept_connection_prepares_a_turns_statements_once_and_stores_the_same_rows(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("prepared statements are PostgreSQL's")
    for n in range(1, 6):
        ingest(world, "plain", n)
    monkeypatch.setitem(connection.settings_dict, "CONN_MAX_AGE", 300)
    with connection.cursor() as cursor:
        cursor.execute("DEALLOCATE ALL")  # what another test of this connection prepared
    _sql._PREPARED.clear()
    texts = []
    for n in range(1, 6):
        with CaptureQueriesContext(connection) as queries:
            ingest(world, "prepared", n)
        texts.append(sent(queries))
    # The session's lock and previous turn, and the turn's insert, prepared on the first turn (a
    # first turn creates its session, and locks it again), with its five attribution writes (tool
    # uses, entries, items, labels, the day's row); on the second, the insert of a turn's two new
    # messages (the first turn's are not sent with the lock) and the entries and items upserts
    # of a turn that adds two messages (the first wrote other row counts). EXECUTE after.
    assert texts[0].count("PREPARE ") == 3 + 5
    assert texts[1].count("PREPARE ") == 1 + 2
    for text in texts[1:]:
        assert text.count("EXECUTE ctxweb_") == 4 + 5
    for text in texts[2:]:
        assert "PREPARE " not in text
    assert stored("prepared") == stored("plain")
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_prepared_statements WHERE name LIKE 'ctxweb_%%'")
        assert cursor.fetchone()[0] == 4 + 7


def test_a_connection_whose_prepared_statements_vanished_serves_again_after_one_failed_turn(
    world: World, kept_connection: None
) -> None:
    for n in range(1, 4):
        ingest(world, "s1", n)
    with connection.cursor() as cursor:
        cursor.execute("DEALLOCATE ALL")  # a pooler's reset, behind ctxweb's back
    with pytest.raises(DatabaseError):
        ingest(world, "s1", 4)
    with CaptureQueriesContext(connection) as queries:
        turn = ingest(world, "s1", 4)
    assert sent(queries).startswith("DEALLOCATE ALL; PREPARE ")
    assert turn.index == 3
    with CaptureQueriesContext(connection) as queries:
        ingest(world, "s1", 5)
    assert "PREPARE " not in sent(queries)
    assert "DEALLOCATE" not in sent(queries)
    for n in range(1, 6):
        ingest(world, "again", n)
    assert stored("s1") == stored("again")


def test_a_connection_closed_by_each_request_prepares_nothing(world: World) -> None:
    assert connection.settings_dict["CONN_MAX_AGE"] == 0  # the tests' settings
    for n in range(1, 4):
        with CaptureQueriesContext(connection) as queries:
            ingest(world, "s1", n)
        assert "PREPARE" not in sent(queries)
        assert "EXECUTE" not in sent(queries)


def test_a_kept_connection_committing_without_waiting_for_the_disk_reads_the_right_results(
    world: World, kept_connection: None, settings: Any
) -> None:
    # The SET LOCAL goes first in the batch, behind any PREPARE: each result is read where it is.
    settings.CTXWEB_INGEST_SYNCHRONOUS_COMMIT = False
    with connection.cursor() as cursor:
        cursor.execute("DEALLOCATE ALL")
    _sql._PREPARED.clear()
    for n in range(1, 5):
        with CaptureQueriesContext(connection) as queries:
            ingest(world, "async", n)
        assert "SET LOCAL synchronous_commit TO OFF" in sent(queries)
    settings.CTXWEB_INGEST_SYNCHRONOUS_COMMIT = True
    for n in range(1, 5):
        ingest(world, "sync", n)
    assert stored("async") == stored("sync")
