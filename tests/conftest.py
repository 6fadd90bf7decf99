"""Fixtures shared by every test: where the real agent transcripts are."""

from __future__ import annotations

import os
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from tests.support.transcripts import MISSING, find_transcripts

# Property tests draw new examples on every local run (how today's rare counterexamples are found),
# and a failure prints the blob that replays it (@reproduce_failure). Under CI=true they draw the
# same examples every run, derived from each test: a clean clone's check is reproducible and does
# not turn red on a draw no one can replay.
settings.register_profile("dev", print_blob=True)
settings.register_profile("ci", derandomize=True, print_blob=True)
settings.load_profile("ci" if os.environ.get("CI") == "true" else "dev")


#: What a test uses when it touches the pass's database (pytest-django's fixtures).
DATABASE_FIXTURES = {
    "db",
    "transactional_db",
    "django_db_reset_sequences",
    "django_db_serialized_rollback",
    "live_server",
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test marked ``embedded_server`` is left out of the production pass (the Makefile), which
    runs the rest of ``tests/ctxweb`` again on PostgreSQL, Redis and Celery: one that touches the
    pass's database would lose that run unnoticed, so it is an error."""
    wrong = [
        item.nodeid
        for item in items
        if item.get_closest_marker("embedded_server")
        and (
            item.get_closest_marker("django_db")
            or DATABASE_FIXTURES & set(getattr(item, "fixturenames", ()))
        )
    ]
    if wrong:
        raise pytest.UsageError(
            "marked embedded_server but using the pass's database (the production pass would"
            " not run them): " + ", ".join(wrong)
        )


@pytest.fixture
def transcripts() -> Path:
    """The real transcripts folder; skips with a reason when it is absent (a user's clone).

    Under ``CI=true`` a missing folder is a failure, never a skip.
    """
    found = find_transcripts()
    if found is None or not found.is_dir():
        if os.environ.get("CI") == "true":
            pytest.fail(MISSING)
        pytest.skip(MISSING)
    return found


def _write_lock_held(name: str) -> str | None:
    """Why another connection holds the write lock of SQLite database ``name`` (a file, or an
    in-memory database shared between threads), or None."""
    import sqlite3
    from urllib.parse import quote

    uri = name if name.startswith("file:") else f"file:{quote(name)}?mode=rw"
    try:
        probe = sqlite3.connect(uri, uri=True, timeout=0, isolation_level=None)
    except sqlite3.OperationalError:
        return None  # gone (the run's end)
    try:
        probe.execute("BEGIN IMMEDIATE")
        probe.execute("ROLLBACK")
    except sqlite3.OperationalError as error:
        return str(error) if "locked" in str(error) else None
    finally:
        probe.close()
    return None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """A test must not end with a connection of this process left inside a transaction of the
    embedded pass's SQLite test database: every later test of the worker would fail on "database
    is locked". Checked once the test's fixtures are torn down (its own transaction rolled back);
    the error names the test, the connections inside a transaction and what each thread does."""
    try:
        return (yield)
    finally:
        _no_write_lock_held(item)


#: Whether this process has reported a write lock left held (reported once: the tests after it
#: fail on the lock all the same, and each would wait for it again).
_LOCK_REPORTED: list[str] = []


def _no_write_lock_held(item: pytest.Item) -> None:
    if _LOCK_REPORTED:
        return
    from django.conf import settings as django_settings

    if not django_settings.configured:
        return
    from django.db import connections

    database = connections["default"].settings_dict
    name = str(database.get("NAME") or "")
    test_name = (database.get("TEST") or {}).get("NAME")
    if connections["default"].vendor != "sqlite" or not (
        name.startswith("file:memorydb") or (test_name and name == test_name)
    ):
        return  # not a test database of SQLite's, or not created yet
    deadline = time.monotonic() + 5  # a recording thread finishing its last write
    while (held := _write_lock_held(name)) is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    if held is None:
        return
    _LOCK_REPORTED.append(item.nodeid)
    frames = sys._current_frames()
    stacks = [
        f"--- {thread.name} ---\n" + "".join(traceback.format_stack(frames[thread.ident]))
        for thread in threading.enumerate()
        if thread.ident is not None and thread.ident in frames
    ]
    raise AssertionError(
        f"{item.nodeid} left the database's write lock held ({held}); the connections inside a"
        f" transaction:\n{_open_transactions()}\nits threads:\n" + "\n".join(stacks)
    )


def _open_transactions() -> str:
    """This process's SQLite connections inside a transaction: their Django wrapper's state and
    thread (alive or not)."""
    import gc
    import sqlite3

    alive = {thread.ident: thread.name for thread in threading.enumerate()}
    lines = []
    for raw in gc.get_objects():
        if not isinstance(raw, sqlite3.Connection) or not raw.in_transaction:
            continue
        wrappers = [
            holder
            for holder in gc.get_referrers(raw)
            if isinstance(holder, dict) and "_thread_ident" in holder
        ]
        if not wrappers:
            lines.append(f"{raw!r}: no Django wrapper")
        for state in wrappers:
            ident = state.get("_thread_ident")
            lines.append(
                f"{raw!r}: thread {ident} ({alive.get(ident, 'ended')}), in_atomic_block="
                f"{state.get('in_atomic_block')}, autocommit={state.get('autocommit')},"
                f" needs_rollback={state.get('needs_rollback')},"
                f" thread sharing={state.get('_thread_sharing_count')}"
            )
    return "\n".join(lines) or "(none found)"


@pytest.fixture
def clear_of_a_minutes_end() -> None:
    """Wait out a minute's last 10 seconds: a test counting a few requests against an ``N/min``
    rate limit (fixed windows aligned on the clock, ``ctxweb.ratelimit``) must send them all in
    one window (one that straddled two ended its first window at 10:21:59.9 in CI: 200, not
    429)."""
    left = 60 - time.time() % 60
    if left < 10:
        time.sleep(left + 0.05)
