"""A turn's round trips to PostgreSQL on a connection kept across requests: the first batch of
the turn's transaction opens it (``BEGIN`` in its text, not a round trip of its own), and the
request's health check of the kept connection sends nothing (``ctxweb.postgresql``), so a late
turn costs three: the session's lock with the new messages, the turn with its rollups, the
``COMMIT``. What the driver sends is read from libpq's own trace of the protocol."""

from __future__ import annotations

import select
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.db import DatabaseError, connection, transaction

from ctxweb.accounts.models import Project
from ctxweb.contexts.models import Turn
from ctxweb.contexts.services import _sql
from tests.support.builders import ingest_chat
from tests.support.world import World

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def kept(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A connection kept across requests and health-checked, as served (the tests' settings
    close it with each request)."""
    if connection.vendor != "postgresql":
        pytest.skip("round trips to PostgreSQL")
    monkeypatch.setitem(connection.settings_dict, "CONN_MAX_AGE", 300)
    monkeypatch.setitem(connection.settings_dict, "CONN_HEALTH_CHECKS", True)
    connection.close()
    connection.ensure_connection()
    assert connection.health_check_enabled
    yield
    connection.close()


def request_starts() -> None:
    """What Django does as a request starts (``close_old_connections``): a kept connection is
    checked again at its first use."""
    connection.close_if_unusable_or_obsolete()
    assert connection.connection is not None
    assert not connection.health_check_done


def ingest(world: World, turns: int, external_id: str = "s") -> Turn:
    return ingest_chat(world.project, external_id, turns)


def queries_sent(trace: Path) -> list[str]:
    """The text of each Query message the client sent, from libpq's trace (a line a message:
    time, direction, length, type, contents)."""
    sent = []
    for line in trace.read_text().splitlines():
        fields = line.split("\t")
        if len(fields) > 4 and fields[1] == "F" and fields[3] == "Query":
            sent.append(fields[4].strip().removeprefix('"').removesuffix('"'))
    return sent


def ended_by_the_server(driver: Any) -> None:
    """End ``driver``'s connection from another one, and wait until its socket shows it."""
    with psycopg.connect(driver.info.dsn, autocommit=True) as other:
        other.execute("SELECT pg_terminate_backend(%s)", [driver.info.backend_pid])
    poller = select.poll()
    poller.register(driver.fileno(), select.POLLIN)
    assert poller.poll(30_000), "the ended connection's socket stayed quiet for 30 s"


def traced(action: Any) -> list[str]:
    """The queries the driver sends while ``action()`` runs."""
    driver = connection.connection
    with tempfile.NamedTemporaryFile("w+", suffix=".trace") as out:
        driver.pgconn.trace(out.fileno())
        try:
            action()
        finally:
            driver.pgconn.untrace()
        return queries_sent(Path(out.name))


def test_a_late_turn_on_a_kept_connection_costs_three_round_trips(world: World, kept: None) -> None:
    for n in range(1, 4):
        request_starts()
        ingest(world, n)
    request_starts()
    sent = traced(lambda: ingest(world, 4))
    assert len(sent) == 3, sent
    assert sent[0].startswith("BEGIN; ")
    assert sent[1].startswith("EXECUTE ctxweb_")
    assert sent[2].startswith("COMMIT")
    assert not any(s == "BEGIN" or s.startswith("SELECT 1") for s in sent)
    turn = Turn.objects.get(session__external_id="s", index=3)
    assert turn.message_count == 2 + 2 * 4


class Stop(Exception):
    """Raised to roll a transaction back."""


def test_a_turn_whose_transaction_fails_leaves_nothing_and_the_next_is_stored(
    world: World, kept: None
) -> None:
    ingest(world, 1)

    def turn_then_failure() -> None:
        with transaction.atomic():
            ingest(world, 2)  # its first batch opens this atomic's transaction
            raise Stop

    with pytest.raises(Stop):
        turn_then_failure()
    assert not Turn.objects.filter(index=1).exists()
    assert connection.connection.autocommit == connection.get_autocommit()
    assert ingest(world, 2).index == 1


def test_a_batch_that_fails_before_its_begin_ran_leaves_the_driver_out_of_autocommit(
    world: World, kept: None
) -> None:
    def unsendable_batch_then_a_row_then_failure() -> None:
        with transaction.atomic():
            with pytest.raises(DatabaseError), connection.cursor() as cursor:
                _sql._execute_at_once(cursor, [("SELECT %s", [object()])])  # cannot be sent
            # Still inside the transaction: this row goes with it.
            Project.objects.create(name="inside")
            raise Stop

    with pytest.raises(Stop):
        unsendable_batch_then_a_row_then_failure()
    assert not Project.objects.filter(name="inside").exists()


def test_the_health_check_replaces_a_connection_the_server_ended(world: World, kept: None) -> None:
    ingest(world, 1)
    pid = connection.connection.info.backend_pid
    ended_by_the_server(connection.connection)
    request_starts()
    assert ingest(world, 2).index == 1  # on a new connection
    assert connection.connection.info.backend_pid != pid


def test_without_a_health_check_the_ended_connection_fails_the_turn(
    world: World, kept: None
) -> None:
    """The other side of the test above: the ended connection cannot serve the turn, so the
    turn stored there was the check's doing."""
    ingest(world, 1)
    connection.health_check_enabled = False
    ended_by_the_server(connection.connection)
    request_starts()
    with pytest.raises(DatabaseError):
        ingest(world, 2)
