"""Django's PostgreSQL backend with a health check that costs no round trip.

With ``CONN_HEALTH_CHECKS`` (ctxweb's settings turn them on: a connection kept across requests
that died is replaced, not failed on), Django checks a kept connection at its first use in each
request with a ``SELECT 1``: a round trip to the server before every request's first query, as
long as a turn's whole ingest takes at most three on a kept connection. Here the check first
looks at the connection's socket without waiting: a connection that the server (or anything
between) closed or ended has something to read there (the server's FATAL message, the end of
the stream) or an error, and an idle connection that is still up has nothing. Only when
something is there, or the connection is not idle, does Django's ``SELECT 1`` run, and closes the
connection if it fails. What neither check sees (a peer gone without a word: a cable pulled) is
found by the first query, as before.
"""

from __future__ import annotations

import select
from typing import Any

from django.db.backends.postgresql.base import DatabaseWrapper as PostgreSQLDatabaseWrapper


def quiet(driver: Any) -> bool:
    """Whether the driver connection ``driver`` (psycopg) is open, idle, and has nothing to read
    and no error on its socket, looked at without waiting."""
    from psycopg.pq import TransactionStatus

    if driver.closed or driver.broken:
        return False
    if driver.info.transaction_status != TransactionStatus.IDLE:
        return False
    poller = select.poll()
    poller.register(driver.fileno(), select.POLLIN | select.POLLPRI)
    return not poller.poll(0)  # POLLERR, POLLHUP and POLLNVAL are reported whatever is asked


class DatabaseWrapper(PostgreSQLDatabaseWrapper):
    def close_if_health_check_failed(self) -> None:
        # Attributes of Django's that its type stubs do not declare.
        enabled = getattr(self, "health_check_enabled", False)
        done = getattr(self, "health_check_done", True)
        if (
            self.connection is not None
            and enabled
            and not done
            and not self.pool
            and quiet(self.connection)
        ):
            self.health_check_done = True
            return
        super().close_if_health_check_failed()
