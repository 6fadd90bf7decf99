"""SQLite's writers take turns through locks that hand on at once (:mod:`ctxweb.sqlite.base`): a
write transaction holds its process's turn and the ``flock`` of ``<database>-writer`` from its
``BEGIN`` to its end, another process's transaction waits for it and goes on as soon as it ends,
and a wait past the connection's timeout fails as SQLite's would."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.db import OperationalError, connection, transaction

from ctxweb.accounts.models import Project

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _sqlite_only() -> None:
    if connection.vendor != "sqlite":
        pytest.skip("the writers' lock is the SQLite backend's (PostgreSQL locks rows)")


def lock_path() -> str:
    return str(connection.settings_dict["NAME"]) + "-writer"


def held() -> bool:
    """Whether anything holds the writers' lock (asked on a descriptor of its own)."""
    fd = os.open(lock_path(), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # lets go of it, if it was taken
    return False


@contextmanager
def held_by_another_process(
    path: str | None = None, kind: str = "LOCK_EX"
) -> Iterator[subprocess.Popen[str]]:
    """Another process holding a ``flock`` on ``path`` (the writers' lock; ``LOCK_SH`` on its
    "wanted" file: as another process's writer waiting its turn) until the block ends, or until
    it is sent a line."""
    script = (
        "import fcntl, os, sys\n"
        f"fd = os.open({path or lock_path()!r}, os.O_RDWR | os.O_CREAT, 0o600)\n"
        f"fcntl.flock(fd, fcntl.{kind})\n"
        "print('held', flush=True)\n"
        "sys.stdin.readline()\n"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "held"
        yield process
    finally:
        if process.poll() is None:
            let_go(process)
        process.wait(10)


def let_go(process: subprocess.Popen[str]) -> None:
    """Tell the process of :func:`held_by_another_process` to let go (and end)."""
    assert process.stdin is not None
    process.stdin.write("\n")
    process.stdin.flush()


def in_thread(write: Any) -> tuple[threading.Thread, threading.Event, list[BaseException]]:
    """``write`` run in a thread (its own connection, closed after): (thread, done, errors)."""
    done = threading.Event()
    errors: list[BaseException] = []

    def run() -> None:
        try:
            write()
        except BaseException as error:
            errors.append(error)
        finally:
            connection.close()
            done.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, done, errors


def test_a_write_transaction_holds_the_lock_until_it_ends() -> None:
    assert not held()
    with transaction.atomic():
        Project.objects.create(name="one")
        assert held()
    assert not held()  # committed
    seen: list[bool] = []

    def rolled_back() -> None:
        with transaction.atomic():
            Project.objects.create(name="two")
            seen.append(held())
            raise RuntimeError("rolled back")

    with pytest.raises(RuntimeError):
        rolled_back()
    assert seen == [True]
    assert not held()
    assert list(Project.objects.values_list("name", flat=True)) == ["one"]


def test_another_process_s_transaction_is_waited_for_then_gone_on_at_once() -> None:
    with held_by_another_process() as holder:

        def write() -> None:
            with transaction.atomic():
                Project.objects.create(name="after")

        thread, done, errors = in_thread(write)
        assert not done.wait(0.5)  # behind the other process's transaction
        let_go(holder)
        assert done.wait(10)
    thread.join(10)
    assert errors == []
    assert Project.objects.filter(name="after").exists()
    assert not held()


def test_a_wait_past_the_timeout_fails_as_sqlite_s_own_and_leaves_nothing_held(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(connection.settings_dict["OPTIONS"], "timeout", 0.3)
    with held_by_another_process():
        with pytest.raises(OperationalError, match="database is locked"), transaction.atomic():
            Project.objects.create(name="never")
        assert held()  # by the other process still
    # The waiter that gave up let go of what it got after; the next transaction goes through.
    with transaction.atomic():
        Project.objects.create(name="later")
    assert not held()
    assert list(Project.objects.values_list("name", flat=True)) == ["later"]


def test_this_process_s_threads_take_one_turn_at_a_time() -> None:
    inside, let_go = threading.Event(), threading.Event()

    def first() -> None:
        with transaction.atomic():
            Project.objects.create(name="first")
            inside.set()
            let_go.wait(30)

    def second() -> None:
        with transaction.atomic():
            Project.objects.create(name="second")

    one, one_done, one_errors = in_thread(first)
    assert inside.wait(10)
    two, two_done, two_errors = in_thread(second)
    assert not two_done.wait(0.5)  # its BEGIN waits for the first's turn
    let_go.set()
    assert one_done.wait(10)
    assert two_done.wait(10)
    one.join(10)
    two.join(10)
    assert one_errors == two_errors == []
    assert list(Project.objects.order_by("pk").values_list("name", flat=True)) == [
        "first",
        "second",
    ]


def test_the_setting_turns_the_lock_off(settings: Any) -> None:
    settings.CTXWEB_SQLITE_WRITER_LOCK = False
    with transaction.atomic():
        Project.objects.create(name="unlocked")
        assert not held()


def wanted_by_someone() -> bool:
    """Whether a writer (of any process) waits for the writers' lock or holds it."""
    fd = os.open(lock_path() + "-wanted", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def test_a_writer_says_it_waits_for_its_turn_and_holds_it(settings: Any) -> None:
    settings.CTXWEB_SQLITE_YIELD_MS = 100  # off (0), nothing is said: nobody yields
    with held_by_another_process() as holder:

        def write() -> None:
            with transaction.atomic():
                Project.objects.create(name="waited")

        thread, done, errors = in_thread(write)
        assert not done.wait(0.3)
        assert wanted_by_someone()  # this process's writer, waiting behind the other one
        let_go(holder)
        assert done.wait(10)
    thread.join(10)
    assert errors == []
    assert not wanted_by_someone()


@pytest.fixture
def yielding(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process's writers yield, as a capturer's do."""
    from ctxweb.sqlite import base

    monkeypatch.setattr(base, "_YIELDING", [False])
    base.writes_yield()


@pytest.mark.usefixtures("yielding")
def test_a_yielding_writer_lets_another_process_s_waiting_writer_go_first(settings: Any) -> None:
    settings.CTXWEB_SQLITE_YIELD_MS = 30_000
    with held_by_another_process(lock_path() + "-wanted", "LOCK_SH") as other:

        def write() -> None:
            with transaction.atomic():
                Project.objects.create(name="yielded")

        thread, done, errors = in_thread(write)
        assert not done.wait(0.5)  # while the other process's writer waits or writes
        assert not held()  # not even queued for the writers' lock
        let_go(other)
        assert done.wait(10)  # at once when it is done
    thread.join(10)
    assert errors == []
    assert Project.objects.filter(name="yielded").exists()


@pytest.mark.usefixtures("yielding")
def test_a_yielding_writer_waits_at_most_its_bound_however_busy_the_others(
    settings: Any,
) -> None:
    settings.CTXWEB_SQLITE_YIELD_MS = 200
    with held_by_another_process(lock_path() + "-wanted", "LOCK_SH"):
        with transaction.atomic():  # the others never pause: it goes after its 200 ms
            Project.objects.create(name="bounded")
        assert wanted_by_someone()  # the other process's writer still waiting
    assert Project.objects.filter(name="bounded").exists()
    assert not held()


def test_a_capturer_yields(monkeypatch: pytest.MonkeyPatch) -> None:
    from ctxweb.contexts.management.commands import receive_telemetry
    from ctxweb.sqlite import base

    monkeypatch.setattr(base, "_YIELDING", [False])
    served: list[tuple[int, int]] = []
    monkeypatch.setattr(
        receive_telemetry, "capturer_loop", lambda *, parent, fd: served.append((parent, fd))
    )
    receive_telemetry.Command().serve(parent=1, fd=3)
    assert served == [(1, 3)]
    assert base._YIELDING == [True]


def test_without_a_yield_nothing_is_said(settings: Any) -> None:
    settings.CTXWEB_SQLITE_YIELD_MS = 0
    with transaction.atomic():
        Project.objects.create(name="quiet")
        assert held()
        assert not wanted_by_someone()
