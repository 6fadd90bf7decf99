"""A turn's round trips to PostgreSQL on a connection kept across requests: the first batch of
the turn's transaction opens it (``BEGIN`` in its text, not a round trip of its own), and the
request's health check of the kept connection sends nothing (``ctxweb.postgresql``), and the
turn's last batch ends with its ``COMMIT`` where the turn's transaction is its own, so a late turn
costs two: the session's lock with the new messages, the turn with its rollups and the
``COMMIT``. What the driver sends is read from libpq's own trace of the protocol."""

from __future__ import annotations

import datetime
import json
import select
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import psycopg
import pytest
from django.db import DatabaseError, IntegrityError, connection, transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxweb.accounts.models import Project
from ctxweb.contexts.models import Turn
from ctxweb.contexts.services import _sql
from ctxweb.contexts.services import ingest as ingest_module
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


def stored_elsewhere(external_id: str = "s") -> list[int]:
    """The indexes of the session's turns, as another connection sees them (what is committed)."""
    with psycopg.connect(connection.connection.info.dsn, autocommit=True) as other:
        rows = other.execute(
            "SELECT t.index FROM contexts_turn t JOIN contexts_session s ON s.id = t.session_id"
            " WHERE s.external_id = %s ORDER BY t.index",
            [external_id],
        ).fetchall()
    return [index for (index,) in rows]


def test_a_late_turn_on_a_kept_connection_costs_two_round_trips(
    world: World, kept: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    for n in range(1, 4):
        request_starts()
        ingest(world, n)
    request_starts()
    announced: list[int] = []
    monkeypatch.setattr(
        ingest_module.live_events, "turn_created", lambda turn: announced.append(turn.index)
    )
    sent = traced(lambda: ingest(world, 4))
    assert len(sent) == 2, sent
    assert sent[0].startswith("BEGIN; ")
    assert sent[1].startswith("EXECUTE ctxweb_")
    assert sent[1].endswith("; COMMIT")
    assert not any(s in ("BEGIN", "COMMIT") or s.startswith("SELECT 1") for s in sent)
    turn = Turn.objects.get(session__external_id="s", index=3)
    assert turn.message_count == 2 + 2 * 4
    assert stored_elsewhere() == [0, 1, 2, 3]
    assert announced == [3]  # its on-commit callback, the live event, ran
    assert not connection.in_atomic_block
    assert connection.connection.autocommit == connection.get_autocommit()


def test_a_turn_whose_commit_fails_leaves_nothing_and_the_next_is_stored(
    world: World, kept: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The turn's COMMIT, sent with its last batch, fails (a foreign key that PostgreSQL checks
    at the commit, as Django declares them): the error reaches the caller, nothing of the turn
    is kept, and the connection stores the next one."""
    ingest(world, 1)
    built = ingest_module._insert_sql

    def dangling_system(objs: Any) -> Any:
        for obj in objs:
            if isinstance(obj, Turn):
                obj.system_id = 10**12  # no such message: checked when the transaction commits
        return built(objs)

    monkeypatch.setattr(ingest_module, "_insert_sql", dangling_system)
    request_starts()
    with pytest.raises(IntegrityError, match="foreign key"):
        ingest(world, 2)
    assert not Turn.objects.filter(index=1).exists()
    assert stored_elsewhere() == [0]
    assert not connection.in_atomic_block
    assert connection.connection.autocommit == connection.get_autocommit()
    monkeypatch.setattr(ingest_module, "_insert_sql", built)
    request_starts()
    assert ingest(world, 2).index == 1
    assert stored_elsewhere() == [0, 1]


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
    assert stored_elsewhere() == [0]  # inside the caller's transaction: no COMMIT of its own
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


def mogrified(text: str, params: list[Any]) -> bytes:
    """``text`` with ``params`` as psycopg binds them on the client (its public ``mogrify``)."""
    with connection.cursor() as cursor:
        return cast(
            bytes, cursor.cursor.mogrify(text, params).encode(connection.connection.info.encoding)
        )


SQL_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")),
    st.datetimes(timezones=st.just(datetime.UTC)),
    st.dates(),
    st.decimals(allow_nan=False, allow_infinity=False),
    st.binary(max_size=64),
)


@given(values=st.lists(SQL_VALUES, max_size=80), percent=st.booleans())
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_a_batch_is_bound_to_the_bytes_psycopg_binds(
    world: World, kept: None, values: list[Any], percent: bool
) -> None:
    """A batch's parameters are rendered as SQL literals before it is sent (psycopg, given
    parameters, would parse its text again on every call): the same bytes as psycopg's own
    client-side binding, for every kind of value a turn sends, ``%%`` read as ``%``."""
    text = (
        "SELECT " + ", ".join(["%s"] * len(values)) + (" WHERE 'a%%' LIKE 'a%%'" if percent else "")
    )
    driver = connection.connection
    assert _sql._bound(driver, text, values) == mogrified(text, values)
    assert _sql._bound(driver, text, values) == mogrified(text, values)  # from the kept pieces


def test_a_batch_bound_with_json_and_as_sent_json_matches_psycopg(world: World, kept: None) -> None:
    from django.db.backends.postgresql.psycopg_any import Jsonb

    from ctxweb.contexts.fields import json_as_sent

    values = [Jsonb({"b": 1, "a": ["x'y", None]}), json_as_sent({"z": 1, "a": 2}, json.dumps)]
    text = "SELECT %s, %s"
    assert _sql._bound(connection.connection, text, values) == mogrified(text, values)


def test_a_batch_with_too_few_parameters_or_an_unknown_escape_is_refused(
    world: World, kept: None
) -> None:
    with pytest.raises(psycopg.ProgrammingError, match="2 placeholders but 1"):
        _sql._bound(connection.connection, "SELECT %s, %s", [1])
    with pytest.raises(ValueError, match="%d"):
        _sql._bound(connection.connection, "SELECT %d", [1])
    with pytest.raises(DatabaseError), connection.cursor() as cursor:  # as execute would fail
        _sql._execute_at_once(cursor, [("SELECT %s", [object()])])


def test_a_recorded_call_commits_with_its_last_batch(world: World, kept: None) -> None:
    """The proxy's recorder writes a small call in one transaction of its own: the queue row's
    deletion and the conversation's memory are its last writes, and its COMMIT goes with them
    (the turn's own batch does not end it: the recorder's transaction goes on after it)."""
    from ctxweb.contexts.services import proxying

    answer = json.dumps(
        {"choices": [{"index": 0, "message": {"role": "assistant", "content": "A typo."}}]}
    ).encode()
    messages: list[dict[str, str]] = []

    def record(n: int) -> str | None:
        messages.append({"role": "user", "content": f"And now? {n}"})
        return proxying.proxy_record(
            project=world.project,
            key_id=1,
            format="openai-chat",
            request_body=json.dumps({"model": "gpt-4o", "messages": messages}).encode(),
            response_body=answer,
            streamed=False,
            session="recorded",
            recorded=lambda: [("SELECT %s", [n])],
            one_transaction=True,
        )

    record(0)
    request_starts()
    sent = traced(lambda: record(1))
    assert sent[-1].endswith("; SELECT 1; COMMIT"), sent
    assert not any(s in ("BEGIN", "COMMIT") for s in sent), sent
    assert not any(s.endswith("; COMMIT") for s in sent[:-1]), sent
    assert stored_elsewhere("recorded") == [0, 1]
    assert not connection.in_atomic_block


def test_a_turns_attribution_after_its_answer_commits_with_its_last_batch(
    world: World, kept: None
) -> None:
    """The rollups a turn posted over HTTP adds after its answer: one transaction of their own,
    whose COMMIT goes with its last batch; they are committed (read from another connection)."""
    from ctxweb.afterwards import answers_pending, run_all

    ingest(world, 1)
    request_starts()
    with answers_pending() as later:
        ingest(world, 2)
    assert len(later) == 1
    sent = traced(lambda: run_all(list(later)))
    assert sent[-1].endswith("; COMMIT"), sent
    assert not any(s in ("BEGIN", "COMMIT") for s in sent), sent
    with psycopg.connect(connection.connection.info.dsn, autocommit=True) as other:
        attributed = other.execute(
            "SELECT attributed_turns FROM contexts_session WHERE external_id = 's'"
        ).fetchone()
    assert attributed == (2,)
    assert not connection.in_atomic_block


def test_writes_inside_a_callers_transaction_never_commit_it(world: World, kept: None) -> None:
    """A big call's recording (no transaction of its own: its memory's writes come after its
    turn's) inside a transaction of a caller's: no COMMIT of the recorder's ends the caller's
    transaction, which rolls all of it back (once, a test's own transaction was committed so)."""
    from ctxweb.contexts.services import proxying

    request = json.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "Hi."}]})
    answer = json.dumps(
        {"choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello."}}]}
    )

    def recorded_then_failure() -> None:
        with transaction.atomic():
            Project.objects.create(name="inside")
            stored = proxying.proxy_record(
                project=world.project,
                key_id=1,
                format="openai-chat",
                request_body=request.encode(),
                response_body=answer.encode(),
                streamed=False,
                session="inside",
                recorded=lambda: [("SELECT 1", [])],
                one_transaction=False,
            )
            assert stored == "inside"
            raise Stop

    with pytest.raises(Stop):
        recorded_then_failure()
    assert stored_elsewhere("inside") == []
    assert not Project.objects.filter(name="inside").exists()
