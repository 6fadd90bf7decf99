"""One writer at a time to SQLite from this process's background threads.

SQLite takes one writer at a time; a second writer waits out the busy timeout, polling. A write
transaction takes its process's turn and the writers' ``flock`` (:mod:`ctxweb.sqlite.base`); the
background writers of a process (the recorders, the record of an API key's use) also take turns
here for their writes outside a transaction, each woken as the one before is done. (The test
suite ran on an in-memory database in shared-cache mode, where a second writer fails at once
with "database table is locked" and a connection left inside a transaction is never closed: it
now runs on a file, as served.)
Nothing on PostgreSQL.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from django.db import connection

_SQLITE_WRITES = threading.RLock()


@contextlib.contextmanager
def sqlite_writing() -> Iterator[None]:
    """Hold this process's SQLite write turn while the block runs (nothing on other databases).

    A thread already inside a transaction goes on without it: it may hold the database's write
    lock already, and waiting here for a thread that waits for that lock would hold both until
    the busy timeout (a request's transaction recording its key's use inline)."""
    if connection.vendor != "sqlite" or connection.in_atomic_block:
        yield
        return
    with _SQLITE_WRITES:
        yield
