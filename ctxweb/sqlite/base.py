"""Django's SQLite backend, its writers taking turns through locks that hand on at once.

SQLite lets one connection write at a time. A connection that finds the database locked sleeps
and tries again (its busy handler: 1, 2, 5, 10... up to 100 ms between tries, until the
timeout): under steady writing a waiter sleeps through the moments the lock is free and a
newcomer takes it first, and a process with more threads writing takes more turns. Measured
under the hostile load (``bench/hostile.py``, embedded), the capturer's four threads ingesting an
OTLP flood held the write lock 8.6 s of every 10 while the two recorders, each waiting its turn
5 to 6 s of every 10, fell behind the proxied calls.

Here a write transaction (``BEGIN IMMEDIATE``: every ``transaction.atomic`` with ctxweb's
settings) first takes its process's turn (a lock its threads queue on), then an exclusive
``flock`` on a file beside the database (``<name>-writer``), which the processes queue on; both
are held until the transaction ends (commit, rollback, or the connection's close). A waiter
sleeps until the holder lets go and is woken then, and each process, however many threads it
writes from, takes one turn at a time. Waiting longer than the connection's ``timeout`` (20 s
with ctxweb's settings) fails the transaction as SQLite would: "database is locked". A process
that dies holding the lock loses it with its descriptors. Writes outside a transaction (a
single ``UPDATE`` in autocommit) take neither and wait on SQLite's own lock as before.
``CTXWEB_SQLITE_WRITER_LOCK=0`` turns the locks off (SQLite's busy handler alone).

A process may write at a lower priority (:func:`writes_yield`: the capturer, whose telemetry
floods take turns back to back): its writers let the others go first, waiting while a writer of
another process waits for its turn or holds it (a shared ``flock`` on ``<name>-writer-wanted``
that those hold), up to ``CTXWEB_SQLITE_YIELD_MS`` a transaction, then queue as usual. They
write in the others' pauses, and at least one transaction in each such wait however busy the
others are. Off by default (0): under the hostile load it brought recording about 2 s sooner at
the median and 3 s at the p99, and cut the capturer's exports answered by two thirds; under a
steady recording backlog each of the capturer's transactions would wait the whole bound.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time

from django.conf import settings
from django.db import OperationalError
from django.db.backends.sqlite3.base import DatabaseWrapper as SQLiteDatabaseWrapper


class _Writer:
    """A process's turn at writing one database file: a lock its threads queue on, then the
    file's ``flock``, which a thread of its own waits for (so that a waiter can give up at its
    timeout: a ``flock`` cannot), handing it to the thread whose turn it is."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.turn = threading.Lock()
        self._state = threading.Condition()
        self._wanted = False  # a thread with the turn asks for the file's lock
        self._granted = False  # the waiter holds it for that thread
        self._abandoned = False  # that thread gave up: the waiter lets go once it has it
        self._fd: int | None = None
        self._wanted_fd: int | None = None  # <path>-wanted: shared while a writer here waits
        self._announced = False  # the turn's holder holds <path>-wanted shared
        self._waiter: threading.Thread | None = None
        self._pid = os.getpid()

    def _wanted_file(self) -> int:
        if self._wanted_fd is None:
            self._wanted_fd = os.open(
                self.path + "-wanted", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600
            )
        return self._wanted_fd

    def _yielded(self, seconds: float) -> None:
        """Wait (a lower priority's writer) while another process's writer waits for the
        writers' lock or holds it, at most ``seconds``."""
        fd = self._wanted_file()
        deadline = time.monotonic() + seconds
        pause = 0.0005
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    return
                time.sleep(pause)
                pause = min(pause * 2, 0.004)
                continue
            fcntl.flock(fd, fcntl.LOCK_UN)
            return

    def _forked(self) -> None:
        """In a child process: nothing of the parent's (its descriptor's lock is shared)."""
        self.turn = threading.Lock()
        self._state = threading.Condition()
        self._wanted = self._granted = self._abandoned = self._announced = False
        for fd in (self._fd, self._wanted_fd):
            if fd is not None:
                os.close(fd)
        self._fd = self._wanted_fd = None
        self._waiter = None
        self._pid = os.getpid()

    def _wait_loop(self) -> None:
        while True:
            with self._state:
                while not self._wanted:
                    self._state.wait()
                fd = self._fd
            assert fd is not None
            fcntl.flock(fd, fcntl.LOCK_EX)  # the interpreter lock is let go while it waits
            with self._state:
                self._wanted = False
                if self._abandoned:
                    self._abandoned = False
                    fcntl.flock(fd, fcntl.LOCK_UN)
                else:
                    self._granted = True
                self._state.notify_all()

    def acquire(self, timeout: float) -> None:
        """This thread's turn, then the file's lock; ``OperationalError`` after ``timeout``."""
        if self._pid != os.getpid():
            self._forked()
        if not self.turn.acquire(timeout=timeout):
            raise OperationalError("database is locked (this process's writers: no turn)")
        self._announced = False
        try:
            seconds = _yield_seconds()
            if seconds and _YIELDING[0]:
                self._yielded(seconds)
            elif seconds:  # the writers of a lower priority wait while this one does
                fcntl.flock(self._wanted_file(), fcntl.LOCK_SH)
                self._announced = True
            self._file_lock(timeout)
        except BaseException:
            self._unannounce()
            self.turn.release()
            raise

    def _unannounce(self) -> None:
        if self._announced and self._wanted_fd is not None:
            self._announced = False
            fcntl.flock(self._wanted_fd, fcntl.LOCK_UN)

    def _file_lock(self, timeout: float) -> None:
        """The file's lock, for the thread that has this process's turn."""
        with self._state:
            if self._fd is None:
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            if not self._abandoned:  # else the waiter is asking already: this is ours
                try:  # free: taken at once, without the waiter
                    fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    return
                except BlockingIOError:
                    pass
            if self._waiter is None or not self._waiter.is_alive():
                self._waiter = threading.Thread(
                    target=self._wait_loop, name="ctxweb-sqlite-writer", daemon=True
                )
                self._waiter.start()
            self._abandoned = False
            self._wanted = True
            self._state.notify_all()
            if not self._state.wait_for(lambda: self._granted, timeout=timeout):
                self._abandoned = self._wanted  # the waiter lets go when it gets it
                self._wanted = False
                raise OperationalError("database is locked (another process's writer)")
            self._granted = False

    def release(self) -> None:
        try:
            if self._fd is not None:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            self._unannounce()
        finally:
            self.turn.release()


#: Whether this process's writers let the others' go first (:func:`writes_yield`).
_YIELDING = [False]


def writes_yield() -> None:
    """From now on, this process's write transactions let those of the other processes go first
    (at most ``CTXWEB_SQLITE_YIELD_MS`` each): the capturer's."""
    _YIELDING[0] = True


def _yield_seconds() -> float:
    return max(0, int(getattr(settings, "CTXWEB_SQLITE_YIELD_MS", 0))) / 1000


_WRITERS: dict[str, _Writer] = {}
_WRITERS_LOCK = threading.Lock()


def _writer(path: str) -> _Writer:
    with _WRITERS_LOCK:
        found = _WRITERS.get(path)
        if found is None:
            found = _WRITERS[path] = _Writer(path)
        return found


class DatabaseWrapper(SQLiteDatabaseWrapper):
    #: The turn this connection holds while it is inside a write transaction.
    _holding: _Writer | None = None

    def _writer_acquire(self) -> None:
        name = str(self.settings_dict["NAME"] or "")
        if (
            self._holding is not None
            or not name
            or self.is_in_memory_db()
            or not getattr(settings, "CTXWEB_SQLITE_WRITER_LOCK", True)
        ):
            return
        writer = _writer(name + "-writer")
        writer.acquire(float(self.settings_dict.get("OPTIONS", {}).get("timeout", 5)))
        self._holding = writer

    def _writer_release(self) -> None:
        writer, self._holding = self._holding, None
        if writer is not None:
            writer.release()

    def _start_transaction_under_autocommit(self) -> None:
        self._writer_acquire()
        try:
            super()._start_transaction_under_autocommit()  # type: ignore[misc]  # Django's, not in its stubs
        except BaseException:
            self._writer_release()
            raise

    def _ended(self) -> None:
        if self.connection is None or not self.connection.in_transaction:
            self._writer_release()

    def _commit(self) -> None:
        try:
            super()._commit()  # type: ignore[misc]  # Django's, not in its stubs
        finally:
            self._ended()

    def _rollback(self) -> None:
        try:
            super()._rollback()  # type: ignore[misc]  # Django's, not in its stubs
        finally:
            self._ended()

    def _close(self) -> None:
        try:
            super()._close()  # type: ignore[misc]  # Django's, not in its stubs
        finally:
            self._writer_release()
