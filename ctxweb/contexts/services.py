"""Writes for sessions, turns, messages, artifacts and operations.

Ingestion costs a turn its new content: every message is hashed once, the known ones are found in
one query, only new ones are counted (through the process-wide token cache) and inserted in bulk,
and the turn stores its message ids as a delta on the previous turn.

A late turn of a session this process ingested before costs few statements: the messages its
previous turn lacks are counted and inserted with the session's lock and the read of its previous
turn (one round trip on PostgreSQL), then the turn is inserted with the session's update (one
more). The hot statements are written in SQL: the ORM took longer to build them than the
database to run them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import operator
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, is_dataclass
from functools import cache
from typing import Any, TypeVar

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, IntegrityError, connection, connections, transaction
from django.db.models import Model
from django.utils import timezone

from compaction.errors import FormatError
from compaction.messages import Context, TextPart, ToolCallPart, ToolResultPart, message_to_dict
from compaction.messages import Message as LibMessage
from compaction.messages.incremental import ParseMemo, parse_incremental
from compaction.regions import message_regions, sum_regions, system_regions
from compaction.tokens import REQUEST_OVERHEAD
from compaction.usage import normalize_usage
from compaction.windows import DEFAULT_CONTEXT_WINDOW, context_window_for_model
from ctxweb.accounts.models import Project
from ctxweb.contexts import events as live_events
from ctxweb.contexts import selectors
from ctxweb.contexts.counting import counter_for, encoding_for
from ctxweb.contexts.models import KEYFRAME_EVERY, ManagedContext, Session, ToolSet, Turn
from ctxweb.contexts.models import Message as MessageRow

_M = TypeVar("_M", bound=Model)

#: A turn whose total drops by more than this share from the previous turn is a compaction event.
COMPACTION_DROP = 0.30


class TurnConflict(Exception):
    """A ``turn_id`` was reused with a different body."""


@dataclass(frozen=True)
class IngestResult:
    turn: Turn
    created: bool


def _canonical_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _check_text(value: Any, path: str) -> None:
    """Reject what databases cannot store: NUL characters and lone surrogates in any string."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                raise FormatError(where, "contains a NUL character")
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raise FormatError(where, "is not valid UTF-8 (lone surrogate)") from None
        elif isinstance(item, Mapping):
            stack.extend((v, f"{where}.{k}") for k, v in item.items())
        elif isinstance(item, list | tuple):
            stack.extend((v, f"{where}.{i}") for i, v in enumerate(item))


def session_get_or_create(
    *,
    project: Project,
    external_id: str,
    format: str,
    model: str | None,
    context_window: int | None = None,
    output_reserve: int | None = None,
    source: str = "api",
) -> Session:
    """The project's session ``external_id``, created on first use (locked for this transaction).

    A new session's window is the request's, else the model table's, else the default.
    """
    session = (
        Session.objects.select_for_update().filter(project=project, external_id=external_id).first()
    )
    if session is not None:
        return session
    encoding, approximate = encoding_for(model)
    try:
        with transaction.atomic():
            return Session.objects.create(
                project=project,
                external_id=external_id,
                format=format,
                model=model or "",
                context_window=context_window
                or context_window_for_model(model)
                or DEFAULT_CONTEXT_WINDOW,
                output_reserve=output_reserve or 0,
                encoding=encoding,
                approximate=approximate,
                source=source,
            )
    except IntegrityError:  # created meanwhile by a concurrent request
        return Session.objects.select_for_update().get(project=project, external_id=external_id)


@dataclass(frozen=True)
class _Previous:
    """What a turn needs of the session's previous turn."""

    #: (primary key, creation time): what :class:`_Recent` is looked up by.
    key: tuple[int, Any]
    total_tokens: int
    #: Whether an operation made a context from it: only then may the new turn continue from it
    #: (operations.turn_operation_event), saving that function's queries.
    operated: bool


@dataclass(frozen=True)
class _Locked:
    """A session locked for a new turn, with its previous turn and the turn a retry repeats."""

    session: Session
    previous: _Previous | None
    retry_id: int | None
    #: What the statement sent with the lock returned (None when none was, or not run).
    returned: list[Any] | None = None


def _session_locked(
    *,
    project: Project,
    external_id: str,
    turn_id: str | None,
    then: tuple[str, list[Any]] | None = None,
) -> _Locked | None:
    """Lock the project's session ``external_id`` and read what a new turn needs of it: its
    previous turn and the turn ``turn_id`` names; then run the statement ``then`` (sql, params),
    if any and if the session exists (when sent at once, whether it exists or not). First, on
    PostgreSQL, stop this transaction's commit waiting for the disk unless
    :func:`_synchronous_commit`.

    In SQL: the ORM spends longer building these queries than the database running them. Two
    statements, the turns read once the session is locked (a read in the locking statement
    would see the turns as they were before it waited), sent at once with ``then`` where the
    driver allows: one round trip.
    """
    sql = _locked_sql()
    key: list[Any] = [project.pk, external_id]
    returned = None
    asynchronous = connection.vendor == "postgresql" and not _synchronous_commit()
    with connection.cursor() as cursor:
        if _batches_statements():
            statements, params = f"{sql.session}; {sql.turns}", [*key, *key, turn_id]
            if asynchronous:
                statements = f"{_ASYNCHRONOUS_COMMIT}; {statements}"
            if then is not None:
                statements, params = f"{statements}; {then[0]}", [*params, *then[1]]
            cursor.execute(statements, params)
            if asynchronous:
                cursor.nextset()
            sessions = _loaded(Session, cursor)
            cursor.nextset()
            turns = _loaded(Turn, cursor)
            if then is not None:
                cursor.nextset()
                returned = cursor.fetchall()
        else:
            if asynchronous:
                cursor.execute(_ASYNCHRONOUS_COMMIT)
            cursor.execute(sql.session, key)
            sessions = _loaded(Session, cursor)
            if not sessions:
                return None
            cursor.execute(sql.turns, [*key, turn_id])
            turns = _loaded(Turn, cursor)
            if then is not None:
                cursor.execute(*then)
                returned = cursor.fetchall()
    if not sessions:
        return None
    session = sessions[0]
    index = session.turn_count
    retried = next((t.pk for t in turns if turn_id is not None and t.turn_id == turn_id), None)
    found: Any = next((t for t in turns if t.index == index - 1), None)
    previous = None
    if found is not None:
        previous = _Previous(
            key=(found.pk, found.created_at),
            total_tokens=found.total_tokens,
            operated=bool(found.operated),
        )
    return _Locked(session, previous, retried, returned)


@dataclass(frozen=True)
class _LockedSql:
    #: The session, locked (parameters: project id, external id).
    session: str
    #: The session's last turn, with whether an operation made a context from it, and its turn
    #: with a turn id (parameters: project id, external id, turn id).
    turns: str


@cache
def _locked_sql() -> _LockedSql:
    """The queries of :func:`_session_locked`, for this database."""
    quote = connection.ops.quote_name
    session, turn = quote(Session._meta.db_table), quote(Turn._meta.db_table)
    managed = quote(ManagedContext._meta.db_table)
    index = quote("index")
    lock = " FOR UPDATE" if connection.features.has_select_for_update else ""  # SQLite: none
    return _LockedSql(
        session=f"SELECT * FROM {session} WHERE project_id = %s AND external_id = %s{lock}",
        # One indexed lookup a turn (an OR of the two would scan the session's turns).
        turns=(
            f"WITH s AS (SELECT id, turn_count FROM {session}"
            " WHERE project_id = %s AND external_id = %s)"
            f" SELECT t.id, t.{index}, t.turn_id, t.created_at, t.total_tokens,"
            f" EXISTS (SELECT 1 FROM {managed} m WHERE m.session_id = t.session_id"
            f" AND m.turn_index = t.{index} AND m.operation_id IS NOT NULL) AS operated"
            f" FROM {turn} t JOIN s ON t.session_id = s.id AND t.{index} = s.turn_count - 1"
            f" UNION ALL SELECT t.id, t.{index}, t.turn_id, t.created_at, t.total_tokens,"
            f" NULL FROM {turn} t JOIN s ON t.session_id = s.id AND t.turn_id = %s"
        ),
    )


#: Turns off waiting for the disk at this transaction's commit (PostgreSQL).
_ASYNCHRONOUS_COMMIT = "SET LOCAL synchronous_commit TO OFF"


def _synchronous_commit() -> bool:
    """Whether a turn's commit waits for the disk: ``settings.CTXWEB_INGEST_SYNCHRONOUS_COMMIT``,
    True unless set.

    False spares a turn PostgreSQL's wait for its WAL to reach the disk (from a fraction of a
    millisecond to several on a busy disk): a crash of the database server or of its machine may
    then lose the turns acknowledged in the last fraction of a second, whole (never part of one),
    as SQLite in WAL mode with ``synchronous=NORMAL`` (the embedded default) may after a power
    loss. Nothing else changes: the database stays consistent.
    """
    return bool(getattr(settings, "CTXWEB_INGEST_SYNCHRONOUS_COMMIT", True))


@cache
def _batches_statements() -> bool:
    """Whether one ``execute`` may carry several statements and return each one's rows: with
    psycopg 3 binding parameters on the client, Django's default for PostgreSQL."""
    if connection.vendor != "postgresql":
        return False
    from django.db.backends.postgresql.psycopg_any import is_psycopg3

    return is_psycopg3 and not connection.settings_dict["OPTIONS"].get("server_side_binding")


def _loaded(model: type[_M], cursor: Any) -> list[_M]:
    """The rows of ``cursor``'s current result as ``model`` instances, their values converted
    as the ORM converts them; a column that is no field of ``model`` becomes an attribute."""
    db = connections[DEFAULT_DB_ALIAS]
    columns = [column[0] for column in cursor.description]
    fields = [field for field in model._meta.concrete_fields if field.column in columns]
    positions = [columns.index(field.column) for field in fields]
    names = [field.attname for field in fields]
    converters = []
    for field in fields:
        expression = field.get_col(model._meta.db_table)
        found = db.ops.get_db_converters(expression) + expression.get_db_converters(db)
        converters.append((found, expression))
    extra = [(name, at) for at, name in enumerate(columns) if name not in names]
    loaded = []
    for row in cursor.fetchall():
        values = []
        for at, (found, expression) in zip(positions, converters, strict=True):
            value = row[at]
            for convert in found:
                value = convert(value, expression, db)
            values.append(value)
        obj = model.from_db(db.alias, names, values)
        for name, at in extra:
            setattr(obj, name, row[at])
        loaded.append(obj)
    return loaded


def _session_for_turn(
    *,
    project: Project,
    external_id: str,
    turn_id: str | None,
    format: str,
    model: str | None,
    context_window: int | None,
    output_reserve: int | None,
    source: str,
    then: tuple[str, list[Any]] | None = None,
) -> _Locked:
    """:func:`_session_locked`, creating the session on first use (``then`` may have run)."""
    found = _session_locked(project=project, external_id=external_id, turn_id=turn_id, then=then)
    if found is not None:
        return found
    session_get_or_create(
        project=project,
        external_id=external_id,
        format=format,
        model=model,
        context_window=context_window,
        output_reserve=output_reserve,
        source=source,
    )
    # Read again: a concurrent request may have created it and stored turns since.
    found = _session_locked(project=project, external_id=external_id, turn_id=turn_id)
    assert found is not None
    return found


#: Sessions' latest request bodies as this process parsed them (a bounded LRU), by project id and
#: external id: a turn parses only the messages its body does not share with the previous one.
_PARSED: OrderedDict[tuple[int, str], ParseMemo] = OrderedDict()
_PARSED_MAX = 256
#: The messages the memos may hold in all (each holds its messages' parsed and raw forms).
_PARSED_MAX_MESSAGES = 200_000
_PARSED_LOCK = threading.Lock()


def turn_request_parse(
    *, project: Project, external_id: str, format: str, request: Mapping[str, Any]
) -> Context:
    """Parse the request body of a turn of session ``external_id``, exactly as
    :func:`compaction.messages.parse` does, reusing this process's parse of the session's
    previous body for the messages this one repeats.

    Safe whatever the memo holds (another process's turns, a retry, a failed request, another
    format): messages are compared with the previous body's, never assumed. The reused messages
    are the very objects of the previous parse, so :func:`turn_ingest` recognizes them at once.

    Raises:
        FormatError: as ``parse`` (the memo is left as it was).
    """
    key = (project.pk, external_id)
    with _PARSED_LOCK:
        previous = _PARSED.get(key)
    context, memo = parse_incremental(format, request, previous)
    with _PARSED_LOCK:
        _PARSED[key] = memo
        _PARSED.move_to_end(key)
        held = sum(len(m.raw) for m in _PARSED.values())
        while len(_PARSED) > 1 and (len(_PARSED) > _PARSED_MAX or held > _PARSED_MAX_MESSAGES):
            _, dropped = _PARSED.popitem(last=False)
            held -= len(dropped.raw)
    return context


@dataclass
class _Recent:
    """What this process stored for a session's latest turn, to ingest the next one cheaply.

    Valid only while that turn is the session's previous turn: it is checked against the
    session's primary key and the previous turn's primary key *and* creation time, so a turn
    rolled back (whose key SQLite may reuse) or written by another process never matches and the
    slow path runs instead. Until then it is a guess (:func:`_recent_guess`).
    """

    session_id: int
    #: The session's encoding (it never changes).
    encoding: str
    turn_key: tuple[int, Any]
    messages: tuple[LibMessage, ...]
    hashes: list[str]
    ids: list[int]
    regions: list[Mapping[str, int]]
    #: cumulative[i]: the regions of messages[:i] added up.
    cumulative: list[dict[str, int]]
    system: tuple[Any, ...]
    system_row: MessageRow | None
    tools: tuple[Any, ...]
    toolset: ToolSet | None


#: How many messages the previous turn lacks that are inserted before they are looked up.
_OPTIMISTIC_MAX = 8
#: The fields of a session that a new turn changes.
_SESSION_UPDATED = (
    "turn_count",
    "last_total_tokens",
    "last_fill",
    "last_activity_at",
    "compaction_count",
    "output_reserve",
)
#: Rows a statement inserts at most (PostgreSQL takes at most 65,535 parameters).
_INSERT_BATCH = 1_000

#: Sessions' latest turns as this process stored them (a bounded LRU), by project id and external
#: id: known before the session is read.
_RECENT: OrderedDict[tuple[int, str], _Recent] = OrderedDict()
_RECENT_MAX = 64
_RECENT_LOCK = threading.Lock()


def _recent_guess(key: tuple[int, str]) -> _Recent | None:
    """What this process stored for session ``key``'s latest turn, unchecked."""
    with _RECENT_LOCK:
        recent = _RECENT.get(key)
        if recent is not None:
            _RECENT.move_to_end(key)
        return recent


def _recent_valid(recent: _Recent, session: Session, previous: _Previous | None) -> bool:
    """Whether ``recent`` holds ``session``'s previous turn (as stored now)."""
    return (
        previous is not None and recent.session_id == session.pk and recent.turn_key == previous.key
    )


def _recent_put(key: tuple[int, str], recent: _Recent) -> None:
    with _RECENT_LOCK:
        _RECENT[key] = recent
        _RECENT.move_to_end(key)
        while len(_RECENT) > _RECENT_MAX:
            _RECENT.popitem(last=False)


def _typed_equal(a: Any, b: Any) -> bool:
    """``a == b`` that also tells ``1``, ``1.0`` and ``True`` apart, as canonical JSON does."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, Mapping):
        return a.keys() == b.keys() and all(_typed_equal(v, b[k]) for k, v in a.items())
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_typed_equal(x, y) for x, y in zip(a, b, strict=True))
    if is_dataclass(a):
        return all(_typed_equal(getattr(a, f.name), getattr(b, f.name)) for f in fields(a))
    return bool(a == b)


def _same_part(a: Any, b: Any) -> bool:
    if isinstance(a, ToolResultPart):
        return (
            _typed_equal(a.extra, b.extra)
            and type(a.is_error) is type(b.is_error)
            and all(_same_part(x, y) for x, y in zip(a.content, b.content, strict=True))
        )
    if isinstance(a, TextPart | ToolCallPart):
        return not (a.extra or b.extra) or _typed_equal(a.extra, b.extra)
    return _typed_equal(a, b)


def _same_message(a: LibMessage, b: LibMessage) -> bool:
    """Whether two messages have the same canonical form: equal, with the same value types."""
    if a is b:
        return True
    if a != b:
        return False
    if (a.extra or b.extra) and not _typed_equal(a.extra, b.extra):
        return False
    return all(_same_part(x, y) for x, y in zip(a.parts, b.parts, strict=True))


def _identical_prefix(a: Sequence[Any], b: Sequence[Any]) -> int:
    """How many leading items ``a`` and ``b`` share (the very objects), compared in C."""
    limit = min(len(a), len(b))
    same = list(map(operator.is_, a[:limit], b[:limit]))
    return same.index(False) if False in same else limit


@dataclass
class _Messages:
    hashes: list[str]
    ids: list[int]
    regions: list[Mapping[str, int]]
    cumulative: list[dict[str, int]]


@dataclass
class _MessagePlan:
    """A turn's messages before the database is asked: the leading ones the previous turn holds
    (taken from it), the others hashed, and the rows to insert for those that are new."""

    project: Project
    encoding: str
    path: str
    #: How many leading messages come from the previous turn; ``prefix`` holds them.
    start: int
    prefix: _Messages
    rest: Sequence[LibMessage]
    dicts: list[dict[str, Any]]
    texts: list[str]
    digests: list[str]
    #: Ids and regions of the messages of ``rest`` that the previous turn holds, by hash.
    cached: dict[str, tuple[int, Mapping[str, int]]]
    #: The hashes of the other messages.
    wanted: set[str]
    #: Whether the messages of ``wanted`` are counted before they are looked up (they are new as
    #: a rule after the previous turn): then ``new`` holds their rows from the start.
    optimistic: bool
    new: dict[str, MessageRow] = dataclasses.field(default_factory=dict)
    stale: list[MessageRow] = dataclasses.field(default_factory=list)

    def count(self, known: Mapping[str, MessageRow]) -> None:
        """Count the messages of ``wanted`` not ``known`` with the encoding: a row each to
        insert (``new``), or to update (``stale``: known, but never counted with it)."""
        counter = counter_for(self.encoding)
        for offset, (message, data, text, digest) in enumerate(
            zip(self.rest, self.dicts, self.texts, self.digests, strict=True)
        ):
            if digest in self.cached:
                continue
            row = known.get(digest) or self.new.get(digest)
            if row is not None and self.encoding in row.counts:
                continue
            counted = message_regions(message, counter)
            counts = {"total": sum(counted.values()), "regions": counted}
            if row is None:
                _check_text(data, f"{self.path}.{self.start + offset}")
                self.new[digest] = MessageRow(
                    project=self.project,
                    hash=digest,
                    role=message.role,
                    data=data,
                    size=len(text.encode("utf-8")),
                    counts={self.encoding: counts},
                )
            else:
                row.counts = {**row.counts, self.encoding: counts}
                self.stale.append(row)

    def rows(self) -> list[MessageRow]:
        """The rows to insert, in one global order (by hash): concurrent turns inserting the
        same new rows wait for each other instead of deadlocking (each holding a row the other
        needs)."""
        return sorted(self.new.values(), key=lambda row: row.hash)


def _message_rows(
    *,
    project: Project,
    messages: Sequence[LibMessage],
    encoding: str,
    recent: _Recent | None = None,
    path: str = "messages",
) -> _Messages:
    """The ids and regions of ``messages``, in order, inserting and counting only the new ones.

    The messages that ``recent`` (the previous turn) starts with are taken from it without
    serializing them; the others are hashed, and those the previous turn does not hold are looked
    up in one query.
    """
    plan = _messages_plan(
        project=project, messages=messages, encoding=encoding, recent=recent, path=path
    )
    return _messages_store(plan)


def _messages_plan(
    *,
    project: Project,
    messages: Sequence[LibMessage],
    encoding: str,
    recent: _Recent | None,
    path: str = "messages",
) -> _MessagePlan:
    """What :func:`_message_rows` does before it asks the database."""
    start = 0
    prefix = _Messages([], [], [], [_zero_regions()])
    if recent is not None:
        limit = min(len(messages), len(recent.messages))
        # Messages parsed incrementally (turn_request_parse) are the previous turn's own objects.
        start = _identical_prefix(messages, recent.messages)
        while start < limit and _same_message(messages[start], recent.messages[start]):
            start += 1
        prefix = _Messages(
            recent.hashes[:start],
            recent.ids[:start],
            recent.regions[:start],
            recent.cumulative[: start + 1],
        )
    rest = messages[start:]
    dicts = [message_to_dict(m) for m in rest]
    texts = [_canonical_json(d) for d in dicts]
    digests = [_digest(t) for t in texts]
    cached = _recent_rows(recent, digests) if recent is not None else {}
    wanted = {h for h in digests if h not in cached}
    plan = _MessagePlan(
        project=project,
        encoding=encoding,
        path=path,
        start=start,
        prefix=prefix,
        rest=rest,
        dicts=dicts,
        texts=texts,
        digests=digests,
        cached=cached,
        wanted=wanted,
        # Otherwise (no previous turn, or many new messages) they are looked up first, not to
        # count a whole context that is stored already.
        optimistic=recent is not None and len(wanted) <= _OPTIMISTIC_MAX,
    )
    if plan.optimistic:
        plan.count({})
    return plan


def _messages_store(plan: _MessagePlan, inserted: list[tuple[int, str]] | None = None) -> _Messages:
    """Carry out ``plan``: look up and count the messages it could not, insert the new ones
    (unless ``inserted`` says already what inserting ``plan.rows()`` inserted), and return the
    ids and regions of all.
    """
    encoding = plan.encoding
    known: dict[str, MessageRow] = {}
    if not plan.optimistic:
        known = _rows_by_hash(plan.project, plan.wanted)
        plan.count(known)
    rows = plan.rows()
    if rows:
        if inserted is None:
            inserted = _insert_rows(rows)
        for pk, digest in inserted:
            row = plan.new[digest]
            _saved(row, pk)
            known[digest] = row
        if len(inserted) < len(rows):  # stored already, or meanwhile by a concurrent turn
            found = _rows_by_hash(plan.project, {row.hash for row in rows if row.pk is None})
            known.update(found)
            for digest, row in found.items():
                if encoding not in row.counts:
                    row.counts = {**row.counts, encoding: plan.new[digest].counts[encoding]}
                    plan.stale.append(row)
    if plan.stale:
        MessageRow.objects.bulk_update(sorted(plan.stale, key=lambda row: row.pk), ["counts"])
    hashes, ids = plan.prefix.hashes, plan.prefix.ids
    regions, cumulative = plan.prefix.regions, plan.prefix.cumulative
    for digest in plan.digests:
        if digest in plan.cached:
            row_id, row_regions = plan.cached[digest]
        else:
            row = known[digest]
            row_id, row_regions = row.id, row.counts[encoding]["regions"]
        hashes.append(digest)
        ids.append(row_id)
        regions.append(row_regions)
        total = dict(cumulative[-1])
        for name, tokens in row_regions.items():
            total[name] = total.get(name, 0) + tokens
        cumulative.append(total)
    return _Messages(hashes, ids, regions, cumulative)


def _recent_rows(recent: _Recent, digests: list[str]) -> dict[str, tuple[int, Mapping[str, int]]]:
    """The ids and regions of the messages of ``digests`` that the previous turn holds."""
    if len(digests) > 16:  # a large tail (after a compaction): index the previous turn
        return {
            h: (i, r) for h, i, r in zip(recent.hashes, recent.ids, recent.regions, strict=True)
        }
    found: dict[str, tuple[int, Mapping[str, int]]] = {}
    for digest in digests:  # a few new messages: a scan each, in C
        try:
            at = recent.hashes.index(digest)
        except ValueError:
            continue
        found[digest] = (recent.ids[at], recent.regions[at])
    return found


def _insert_rows(rows: list[MessageRow]) -> list[tuple[int, str]]:
    """Insert ``rows`` in their order, skipping those whose hash the project holds already; the
    id and hash of each row inserted.

    In SQL: ``bulk_create(ignore_conflicts=True)`` returns no ids, which cost another query.
    """
    if not connection.features.can_return_rows_from_bulk_insert:  # SQLite before 3.35
        MessageRow.objects.bulk_create(rows, ignore_conflicts=True)
        return []
    inserted: list[tuple[int, str]] = []
    with connection.cursor() as cursor:
        for start in range(0, len(rows), _INSERT_BATCH):
            cursor.execute(*_insert_rows_sql(rows[start : start + _INSERT_BATCH]))
            inserted += cursor.fetchall()
    return inserted


def _insert_rows_sql(rows: list[MessageRow]) -> tuple[str, list[Any]]:
    """The statement of :func:`_insert_rows` for at most :data:`_INSERT_BATCH` rows."""
    sql, params = _insert_sql(rows)
    column = _sql_of(MessageRow).column
    return (
        f"{sql} ON CONFLICT ({column['project']}, {column['hash']}) DO NOTHING"
        f" RETURNING {column['id']}, {column['hash']}",
        params,
    )


@dataclass(frozen=True)
class _ModelSql:
    """A model's SQL text, as statements written here use it."""

    table: str
    #: The fields written by an insert (all but the primary key), and their columns.
    inserted: list[Any]
    columns: str
    #: One row's placeholders.
    values: str
    #: Every column, by field name.
    column: dict[str, str]


@cache
def _sql_of(model: type[Model]) -> _ModelSql:
    """``model``'s SQL text for this database (built once)."""
    quote = connections[DEFAULT_DB_ALIAS].ops.quote_name
    meta = model._meta
    column = {field.name: quote(str(field.column)) for field in meta.concrete_fields}
    inserted = [field for field in meta.concrete_fields if not field.primary_key]
    return _ModelSql(
        table=quote(meta.db_table),
        inserted=inserted,
        columns=", ".join(column[field.name] for field in inserted),
        values="(" + ", ".join(["%s"] * len(inserted)) + ")",
        column=column,
    )


def _insert_sql(objs: Sequence[Model]) -> tuple[str, list[Any]]:
    """The ``INSERT`` of ``objs`` (of one model): every column but the primary key, each value
    prepared as ``save()`` prepares it (``auto_now_add`` times set)."""
    db = connections[DEFAULT_DB_ALIAS]
    sql = _sql_of(type(objs[0]))
    params = [
        field.get_db_prep_save(field.pre_save(obj, True), db)
        for obj in objs
        for field in sql.inserted
    ]
    values = ", ".join([sql.values] * len(objs))
    return f"INSERT INTO {sql.table} ({sql.columns}) VALUES {values}", params


def _update_sql(obj: Model, names: Sequence[str]) -> tuple[str, list[Any]]:
    """The ``UPDATE`` of ``obj``'s fields ``names``, as ``save(update_fields=names)`` writes it."""
    db = connections[DEFAULT_DB_ALIAS]
    sql = _sql_of(type(obj))
    fields = [field for field in obj._meta.concrete_fields if field.name in names]
    params = [field.get_db_prep_save(getattr(obj, field.attname), db) for field in fields]
    assignments = ", ".join(f"{sql.column[field.name]} = %s" for field in fields)
    return (
        f"UPDATE {sql.table} SET {assignments} WHERE {sql.column['id']} = %s",
        [*params, obj.pk],
    )


def _saved(obj: Model, pk: int) -> None:
    """Mark ``obj``, inserted in SQL, as ``save()`` would."""
    obj.pk = pk
    obj._state.adding = False
    obj._state.db = DEFAULT_DB_ALIAS


def _turn_insert(turn: Turn, session: Session) -> None:
    """Insert ``turn`` and save the fields of ``session`` that a turn changes, in one statement
    on PostgreSQL (two elsewhere)."""
    insert, params = _insert_sql([turn])
    update, update_params = _update_sql(session, _SESSION_UPDATED)
    db = connections[DEFAULT_DB_ALIAS]
    with db.cursor() as cursor:
        if db.vendor == "postgresql":
            cursor.execute(
                f"WITH updated AS ({update}) {insert} RETURNING {_sql_of(Turn).column['id']}",
                [*update_params, *params],
            )
            _saved(turn, cursor.fetchone()[0])
        else:
            cursor.execute(update, update_params)
            cursor.execute(insert, params)
            _saved(turn, cursor.lastrowid)


def _rows_by_hash(project: Project, hashes: set[str]) -> dict[str, MessageRow]:
    """The project's rows of ``hashes``, without their content."""
    if not hashes:
        return {}
    rows = MessageRow.objects.filter(project=project, hash__in=hashes).only("id", "hash", "counts")
    return {row.hash: row for row in rows}


def _zero_regions() -> dict[str, int]:
    return sum_regions([])


def _system_row(*, project: Project, context: Context, encoding: str) -> MessageRow | None:
    if not context.system:
        return None
    parts = tuple(context.system)
    # A top-level system prompt is stored like a message, marked so it is never taken for one.
    data = message_to_dict(LibMessage("system", parts, extra={"ctxweb_top_level_system": True}))
    text = _canonical_json(data)
    digest = _digest(text)
    row = MessageRow.objects.filter(project=project, hash=digest).first()
    if row is not None and encoding in row.counts:
        return row
    regions = system_regions(parts, counter_for(encoding))
    counts = {"total": sum(regions.values()), "regions": regions}
    if row is None:
        _check_text(data, "system")
        row, _ = MessageRow.objects.get_or_create(
            project=project,
            hash=digest,
            defaults={
                "role": "system",
                "data": data,
                "size": len(text.encode()),
                "counts": {encoding: counts},
            },
        )
    if encoding not in row.counts:
        row.counts = {**row.counts, encoding: counts}
        row.save(update_fields=["counts"])
    return row


def _toolset_row(*, project: Project, context: Context, encoding: str) -> ToolSet | None:
    if not context.tools:
        return None
    data = [
        {
            "name": t.name,
            "description": t.description,
            "parameters": dict(t.parameters),
            "extra": dict(t.extra),
        }
        for t in context.tools
    ]
    text = _canonical_json(data)
    digest = _digest(text)
    row = ToolSet.objects.filter(project=project, hash=digest).first()
    if row is None:
        _check_text(data, "tools")
        row, _ = ToolSet.objects.get_or_create(
            project=project, hash=digest, defaults={"data": data, "counts": {}}
        )
    if encoding not in row.counts:
        row.counts = {**row.counts, encoding: counter_for(encoding).count_tools(context.tools)}
        row.save(update_fields=["counts"])
    return row


def _body_digest(
    body: Any, context: Context, hashes: Sequence[str], *, listed: bool = False
) -> str:
    """The idempotency hash of a posted body: the SHA-256 of its canonical JSON, with the request's
    messages replaced by the SHA-256 of their hashes (``hashes``, which ingestion computes anyway),
    so hashing costs the body's small parts only. Bodies are equal exactly when their hashes are:
    a request renders back from its parsed messages exactly, so their hashes stand for them.

    ``listed``: with the hashes themselves in place of the messages, as turns stored before
    were hashed.
    """
    key = "input" if context.format == "openai-responses" else "messages"
    request = body.get("request") if isinstance(body, Mapping) else None
    items = request.get(key) if isinstance(request, Mapping) else None
    if not isinstance(items, list) or len(items) != len(hashes):  # not a parsed request's body
        return _digest(_canonical_json(body))
    assert isinstance(request, Mapping)
    messages: dict[str, Any]
    if listed:
        messages = {"ctxweb:message_hashes": list(hashes)}
    else:  # the hashes have one length: joined, they stand for the list
        messages = {"ctxweb:messages_sha256": _digest("".join(hashes))}
    return _digest(_canonical_json({**body, "request": {**request, key: messages}}))


def _same_body(stored: str, body: Any, context: Context) -> bool:
    """Whether ``body`` is the body hashed as ``stored`` (a retry; the slow path is fine)."""
    hashes = [_digest(_canonical_json(message_to_dict(m))) for m in context.messages]
    return stored in (
        _body_digest(body, context, hashes),
        _body_digest(body, context, hashes, listed=True),  # turns stored before
        _digest(_canonical_json(body)),  # turns stored before bodies were hashed by parts
    )


def _guessed_plan(project: Project, context: Context, guess: _Recent) -> _MessagePlan | None:
    """The plan of ``context``'s messages if ``guess`` holds the previous turn, or None when it
    cannot be made before the session is read (it is then made again, as it must be)."""
    if not connection.features.can_return_rows_from_bulk_insert:  # SQLite before 3.35
        return None
    try:
        return _messages_plan(
            project=project, messages=context.messages, encoding=guess.encoding, recent=guess
        )
    except FormatError:  # raised again in order, after a retried turn_id is recognized
        return None


def _delta(previous: list[int], ids: list[int], index: int) -> tuple[int, list[int], bool]:
    """How turn ``index`` stores ``ids``: (shared prefix with the previous turn, tail, keyframe)."""
    if index % KEYFRAME_EVERY == 0 or not previous:
        return 0, ids, True
    shared = min(len(previous), len(ids))
    if previous[:shared] != ids[:shared]:  # compared in C; walked only when they differ
        shared = 0
        for a, b in zip(previous, ids, strict=False):
            if a != b:
                break
            shared += 1
    if shared == 0:
        return 0, ids, True
    return shared, ids[shared:], False


def turn_ingest(
    *,
    project: Project,
    external_id: str,
    context: Context,
    model: str | None = None,
    response: Any = None,
    usage: Mapping[str, Any] | None = None,
    turn_id: str | None = None,
    body: Any = None,
    context_window: int | None = None,
    unknown: Sequence[str] = (),
    events: Sequence[Mapping[str, Any]] = (),
    source: str = "api",
) -> IngestResult:
    """Store one model call of session ``external_id`` (created on first use), whole or not at all.

    A retry with the same ``turn_id`` and body returns the stored turn (``created`` False); the
    same ``turn_id`` with another body raises :class:`TurnConflict`. ``body`` is the posted body
    (``{"request": ..., ...}``) that ``context`` was parsed from.
    """
    # Only a turn with a turn_id can be retried: hash the body only then.
    hashed = body is not None and turn_id is not None
    normalized = normalize_usage(usage) if usage else None
    key = (project.pk, external_id)
    with transaction.atomic():
        # What this process stored for the previous turn, if it still is the previous turn: the
        # new messages are inserted with the session's lock, in the same round trip.
        guess = _recent_guess(key)
        plan = _guessed_plan(project, context, guess) if guess is not None else None
        then = None
        if plan is not None and plan.optimistic and plan.new:
            then = _insert_rows_sql(plan.rows())
        found = _session_for_turn(
            project=project,
            external_id=external_id,
            turn_id=turn_id,
            format=context.format,
            model=model or str(context.extra.get("model") or ""),
            context_window=context_window,
            output_reserve=context.max_output_tokens,
            source=source,
            then=then,
        )
        session, previous = found.session, found.previous
        encoding = session.encoding
        index = session.turn_count
        if found.retry_id is not None:
            existing = Turn.objects.get(pk=found.retry_id)
            if hashed and existing.body_hash and not _same_body(existing.body_hash, body, context):
                raise TurnConflict(turn_id)
            return IngestResult(existing, False)
        recent = None
        if guess is not None and _recent_valid(guess, session, previous):
            recent = guess
        if recent is not None and plan is not None:
            stored = _messages_store(plan, found.returned if then is not None else None)
        else:  # rows the guess inserted are found like any others
            stored = _message_rows(
                project=project, messages=context.messages, encoding=encoding, recent=recent
            )
        body_hash = _body_digest(body, context, stored.hashes) if hashed else ""
        system_parts, tools = tuple(context.system), tuple(context.tools)
        if recent is not None and _typed_equal(system_parts, recent.system):
            system = recent.system_row
        else:
            system = _system_row(project=project, context=context, encoding=encoding)
        if recent is not None and _typed_equal(tools, recent.tools):
            toolset = recent.toolset
        else:
            toolset = _toolset_row(project=project, context=context, encoding=encoding)
        regions = sum_regions(
            [
                {"system": REQUEST_OVERHEAD},
                system.counts[encoding]["regions"] if system else {},
                {"tools": toolset.counts[encoding]} if toolset else {},
                stored.cumulative[-1],
            ]
        )
        counted = sum(regions.values())
        reported = normalized["input_tokens"] if normalized else None
        if reported is not None and reported > counted:
            regions["unattributed"] = reported - counted
        total = sum(regions.values())
        ids = stored.ids
        if recent is not None:
            previous_ids = recent.ids
        elif previous is not None:
            previous_ids = selectors.turn_message_ids(session=session, index=index - 1)
        else:
            previous_ids = []
        shared, tail, keyframe = _delta(previous_ids, ids, index)
        turn_events = [dict(e) for e in events]
        from ctxweb.contexts import operations  # builds on this module's helpers

        applied, applied_event = (
            operations.turn_operation_event(
                session=session,
                index=index,
                message_ids=ids,
                system_id=system.id if system else None,
            )
            if previous is not None and previous.operated
            else (None, None)
        )
        if applied_event is not None:
            turn_events.append(applied_event)
        if (
            previous is not None
            and previous.total_tokens
            and (total < previous.total_tokens * (1 - COMPACTION_DROP))
            and not any(e.get("type") in ("compaction", "operation") for e in turn_events)
        ):
            turn_events.append(
                {
                    "type": "compaction",
                    "source": "detected",
                    "tokens_before": previous.total_tokens,
                    "tokens_after": total,
                }
            )
        window = context_window or session.context_window
        extra = dict(context.extra)
        _check_text(extra, "request")
        if response is not None:
            _check_text(response, "response")
        turn = Turn(
            session=session,
            index=index,
            turn_id=turn_id,
            body_hash=body_hash,
            shared=shared,
            tail=tail,
            keyframe=keyframe,
            message_count=len(ids),
            system=system,
            toolset=toolset,
            unknown=sorted(set(unknown)),
            request_extra=extra,
            max_output_tokens=context.max_output_tokens,
            context_window=window,
            total_tokens=total,
            counted_tokens=counted,
            regions=regions,
            reported_input_tokens=reported,
            usage=normalized,
            response=response,
            events=turn_events,
            operation=applied,
        )
        reserve = context.max_output_tokens or session.output_reserve
        usable = max(1, window - reserve)
        session.turn_count = index + 1
        session.last_total_tokens = total
        session.last_fill = total / usable
        session.last_activity_at = timezone.now()
        session.compaction_count += sum(1 for e in turn_events if e.get("type") == "compaction")
        if context.max_output_tokens:
            session.output_reserve = context.max_output_tokens
        _turn_insert(turn, session)
        _recent_put(
            key,
            _Recent(
                session_id=session.pk,
                encoding=encoding,
                turn_key=(turn.pk, turn.created_at),
                messages=tuple(context.messages),
                hashes=stored.hashes,
                ids=ids,
                regions=stored.regions,
                cumulative=stored.cumulative,
                system=system_parts,
                system_row=system,
                tools=tools,
                toolset=toolset,
            ),
        )
        transaction.on_commit(lambda: live_events.turn_created(turn))
        operations.operation_auto_after_turn(
            session=session,
            turn=turn,
            previous_total=previous.total_tokens if previous is not None else None,
        )
    return IngestResult(turn, True)


__all__ = [
    "IngestResult",
    "TurnConflict",
    "session_get_or_create",
    "turn_ingest",
    "turn_request_parse",
]
