"""One writer at a time to SQLite from this process's background threads.

SQLite takes one writer at a time. On a file database a second writer waits (the busy timeout);
on the test suite's in-memory database (shared cache) it fails at once with "database table is
locked", and a failed commit there leaves its connection inside the transaction for good (Django
never closes an in-memory database's connection), which locks every later test out. The
background writers of a process (the recorders, the record of an API key's use) take turns
here. Nothing on PostgreSQL.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from django.db import connection

_SQLITE_WRITES = threading.RLock()


@contextlib.contextmanager
def sqlite_writing() -> Iterator[None]:
    """Hold this process's SQLite write turn while the block runs (nothing on other databases)."""
    if connection.vendor != "sqlite":
        yield
        return
    with _SQLITE_WRITES:
        yield
