"""Writes for sessions, turns, messages, artifacts and operations.

Ingestion costs a turn its new content: every message is hashed once, the known ones are found in
one query, only new ones are counted (through the process-wide token cache) and inserted in bulk,
and the turn stores its message ids as a delta on the previous turn.

A late turn of a session this process ingested before costs few statements: the messages its
previous turn lacks are counted and inserted with the session's lock and the read of its previous
turn (one round trip on PostgreSQL), then the turn is inserted with the session's update (one
more). The hot statements are written in SQL: the ORM took longer to build them than the
database to run them.

The parts: turn ingest (``_ingest``), request parsing and its memo (``_parsing``), the memory of
each session's latest turn (``_recent``), message storage (``_messages``), sessions found and
locked for a turn (``_sessions``), the hand-written SQL (``_sql``) and canonical JSON, digests
and equality (``_canonical``). The private names re-exported here are the ones operations and
the tests reach.
"""

from __future__ import annotations

from compaction.messages import message_to_dict
from ctxweb.contexts.services._canonical import _body_digest, _canonical_json, _digest
from ctxweb.contexts.services._ingest import (
    COMPACTION_DROP,
    IngestResult,
    TurnConflict,
    turn_ingest,
)
from ctxweb.contexts.services._messages import _message_rows, _system_row, _toolset_row
from ctxweb.contexts.services._parsing import turn_request_parse
from ctxweb.contexts.services._recent import _RECENT
from ctxweb.contexts.services._sessions import session_get_or_create
from ctxweb.contexts.services._sql import _batches_statements

__all__ = [
    "COMPACTION_DROP",
    "_RECENT",
    "IngestResult",
    "TurnConflict",
    "_batches_statements",
    "_body_digest",
    "_canonical_json",
    "_digest",
    "_message_rows",
    "_system_row",
    "_toolset_row",
    "message_to_dict",
    "session_get_or_create",
    "turn_ingest",
    "turn_request_parse",
]
