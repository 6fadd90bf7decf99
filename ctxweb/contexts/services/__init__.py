"""Writes, as public modules stacked one way: :mod:`storage` (messages, system prompts and tool
sets stored once per project) < :mod:`ingest` (a turn stored whole or not at all) <
:mod:`planning` (what a strategy would do; previews within a time budget) < :mod:`operations`
(applying a plan in the background) < :mod:`policy` (the automatic operation a turn starts),
with :mod:`imports` (transcripts) on :mod:`ingest`. A module imports only those below it;
ingestion reaches the policy through one hook, :data:`ingest.turn_stored`.

Ingestion costs a turn its new content: every message is hashed once, the known ones are found in
one query, only new ones are counted (through the process-wide token cache) and inserted in bulk,
and the turn stores its message ids as a delta on the previous turn. A late turn of a session this
process ingested before costs few statements (see :mod:`ingest`); :func:`as_another_process`
runs a block as a process that did not. The private helpers (``_canonical``, ``_parsing``,
``_recent``, ``_sessions``, ``_sql``) serve storage and ingest; nothing outside reads them.

This package re-exports ingestion's API, which every interface uses.
"""

from __future__ import annotations

from ctxweb.contexts.services._parsing import (
    FORMATS,
    MESSAGE_KEYS,
    TurnBody,
    turn_body_decode,
    turn_orphans,
    turn_request_parse,
)
from ctxweb.contexts.services._recent import as_another_process
from ctxweb.contexts.services._sessions import session_get_or_create
from ctxweb.contexts.services.ingest import (
    COMPACTION_DROP,
    IngestResult,
    SessionFormatConflict,
    TurnConflict,
    session_id_problem,
    turn_ingest,
)

__all__ = [
    "COMPACTION_DROP",
    "FORMATS",
    "MESSAGE_KEYS",
    "IngestResult",
    "SessionFormatConflict",
    "TurnBody",
    "TurnConflict",
    "as_another_process",
    "session_get_or_create",
    "session_id_problem",
    "turn_body_decode",
    "turn_ingest",
    "turn_orphans",
    "turn_request_parse",
]
