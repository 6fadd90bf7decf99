"""The hand-written SQL of the proxy's conversation memory
(:class:`~ctxweb.contexts.models.ProxyConversation` and
:class:`~ctxweb.contexts.models.ProxyMainCalls`), for SQLite and PostgreSQL.

A recorded call reads the memory once or twice and writes it once or twice: through the ORM,
building those four statements cost a recorder more than a millisecond a call on top of their
run (a sixth of what recording a small call costs), for queries whose text never changes but for
how many digests they ask about.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from functools import cache
from typing import Any

from django.db import connection

from ctxweb.contexts.models import ProxyConversation, ProxyMainCalls


@cache
def _tables() -> tuple[str, str]:
    quote = connection.ops.quote_name
    return (
        quote(ProxyConversation._meta.db_table),
        quote(ProxyMainCalls._meta.db_table),
    )


def _moment(value: datetime) -> Any:
    """``value`` as the database's driver takes a ``DateTimeField``'s (SQLite: UTC text)."""
    return connection.ops.adapt_datetimefield_value(value)


def conversations_remembered(
    key_id: int,
    since: datetime,
    *,
    external_id: str | None = None,
    among: Sequence[str] | None = None,
    limit: int | None = None,
) -> dict[str, str]:
    """The key's conversations remembered at ``since`` or later (of the session ``external_id``
    only, when named; of the digests ``among`` only, when given; at most ``limit`` of them), by
    digest: their session."""
    if among is not None and not among:
        return {}
    table = _tables()[0]
    sql = f"SELECT digest, external_id FROM {table} WHERE key_id = %s AND remembered_at >= %s"
    params: list[Any] = [key_id, _moment(since)]
    if external_id is not None:
        sql += " AND external_id = %s"
        params.append(external_id)
    if among is not None:
        sql += f" AND digest IN ({', '.join(['%s'] * len(among))})"
        params.extend(among)
    if limit is not None:
        sql += " LIMIT %s"
        params.append(limit)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return {str(digest): str(session) for digest, session in cursor.fetchall()}


def conversation_remember_sql(
    key_id: int, digest: str, external_id: str, at: datetime
) -> tuple[str, list[Any]]:
    """The upsert (statement and parameters, to send with others) that makes ``digest``
    ``external_id``'s conversation as of ``at``."""
    table = _tables()[0]
    return (
        f"INSERT INTO {table} (key_id, digest, external_id, remembered_at)"
        " VALUES (%s, %s, %s, %s) ON CONFLICT (key_id, digest) DO UPDATE SET"
        " external_id = excluded.external_id, remembered_at = excluded.remembered_at",
        [key_id, digest, external_id, _moment(at)],
    )


def main_calls_remembered(
    key_id: int, external_id: str, since: datetime
) -> tuple[bool, str] | None:
    """What the session's main calls look like (whether they send tools, their system prompt's
    identity), when remembered at ``since`` or later."""
    table = _tables()[1]
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT tools, system FROM {table}"
            " WHERE key_id = %s AND external_id = %s AND remembered_at >= %s LIMIT 1",
            [key_id, external_id, _moment(since)],
        )
        row = cursor.fetchone()
    return (bool(row[0]), str(row[1])) if row else None


def main_calls_remember(
    key_id: int, external_id: str, tools: bool, system: str, at: datetime
) -> None:
    """The session's main calls look like this as of ``at`` (one upsert)."""
    table = _tables()[1]
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (key_id, external_id, tools, system, remembered_at)"
            " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (key_id, external_id) DO UPDATE SET"
            " tools = excluded.tools, system = excluded.system,"
            " remembered_at = excluded.remembered_at",
            [key_id, external_id, tools, system, _moment(at)],
        )
