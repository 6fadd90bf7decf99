"""The hand-written SQL of ingestion, for SQLite and PostgreSQL: the queries that lock a
session and read its previous turn, whether the driver batches statements, rows loaded as
model instances, and the inserts and updates of messages, turns and sessions.

In SQL because the ORM took longer to build these statements than the database to run
them.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import re
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connection, connections, models
from django.db.models import Field, JSONField, Model

from ctxweb.contexts.fields import KeyOrderJSONField, json_as_sent
from ctxweb.contexts.models import ManagedContext, Session, Turn
from ctxweb.contexts.models import Message as MessageRow

if TYPE_CHECKING:
    from psycopg.abc import Transformer

_M = TypeVar("_M", bound=Model)


@dataclass(frozen=True)
class _LockedSql:
    #: The session, locked (parameters: project id, external id). Its columns are named: a
    #: column added by a migration does not change what a prepared statement returns.
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
    columns = ", ".join(quote(str(f.column)) for f in Session._meta.concrete_fields)
    return _LockedSql(
        session=(
            f"SELECT {columns} FROM {session} WHERE project_id = %s AND external_id = %s{lock}"
        ),
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


def _batches_statements() -> bool:
    """Whether one ``execute`` may carry several statements and return each one's rows: with
    psycopg 3 binding parameters on the client, Django's default for PostgreSQL (read from the
    connection's settings each time: a few dictionary lookups)."""
    if connection.vendor != "postgresql":
        return False
    from django.db.backends.postgresql.psycopg_any import is_psycopg3

    return is_psycopg3 and not connection.settings_dict["OPTIONS"].get("server_side_binding")


def _prepares() -> bool:
    """Whether this connection keeps the fixed statements of a turn prepared
    (:func:`_execute_at_once`): on PostgreSQL with parameters bound on the client
    (:func:`_batches_statements`; the driver then prepares nothing itself) and connections kept
    across requests (``CONN_MAX_AGE`` not 0). Behind PgBouncer in transaction pooling it is 0
    (docs/deploy.md): each transaction may run on another server connection, where a statement
    prepared by the previous one is missing, or held by a client before."""
    return _batches_statements() and connection.settings_dict.get("CONN_MAX_AGE") != 0


@dataclass
class _PreparedHere:
    """The statements one database connection holds prepared, as far as this process knows."""

    names: set[str] = dataclasses.field(default_factory=set)
    #: A batch that prepared some failed: which of its statements ran is unknown, and the next
    #: batch drops every prepared statement first (DEALLOCATE ALL).
    unknown: bool = False


#: By driver connection (a reconnection starts afresh). Each connection is used by one thread at
#: a time; the lock guards the dictionary, which every thread shares.
_PREPARED: weakref.WeakKeyDictionary[Any, _PreparedHere] = weakref.WeakKeyDictionary()
_PREPARED_LOCK = threading.Lock()


@dataclass(frozen=True)
class Fixed:
    """A statement whose text never changes (its parameters do): PostgreSQL may keep it
    prepared on a connection, parsed and planned once (:func:`_execute_at_once`)."""

    sql: str

    @property
    def name(self) -> str:
        return _statement_name(self.sql)


@cache
def _statement_name(sql: str) -> str:
    """The name a statement is prepared under: its text's digest, so two texts never share one."""
    return "ctxweb_" + hashlib.sha256(sql.encode()).hexdigest()[:24]


def _as_prepared(sql: str, name: str) -> str:
    """``PREPARE`` of ``sql``: its ``%s`` placeholders numbered as PostgreSQL's ``$n``, whose
    types PostgreSQL infers from where they stand (a column, a comparison)."""
    numbers = iter(range(1, sql.count("%s") + 1))
    return f"PREPARE {name} AS " + re.sub("%s", lambda _: f"${next(numbers)}", sql)


def _opens_transaction(driver: Any) -> bool:
    """Whether the driver connection ``driver`` would send ``BEGIN`` in a round trip of its own
    before the next statement (psycopg out of autocommit, as Django's ``atomic`` sets it, and no
    transaction open yet), with the default characteristics (plain ``BEGIN``)."""
    from psycopg.pq import TransactionStatus

    return (
        not driver.autocommit
        and driver.info.transaction_status == TransactionStatus.IDLE
        and driver.isolation_level is None
        and driver.read_only is None
        and driver.deferrable is None
    )


def _execute_at_once(cursor: Any, statements: Sequence[tuple[str | Fixed, Sequence[Any]]]) -> None:
    """Send ``statements`` (with their parameters) in one ``execute`` (:func:`_batches_statements`),
    ``cursor`` left on the first one's result (:meth:`nextset` walks to the next).

    The first batch of a transaction opens it itself (:func:`_opens_transaction`): ``BEGIN``
    goes first in its text, and the driver, told it is in autocommit (while no transaction is
    open, as psycopg allows), sends no ``BEGIN`` of its own in a round trip before it. The
    server's transaction then runs to the ``COMMIT`` or ``ROLLBACK`` that Django's ``atomic``
    sends as always (psycopg sends either whenever a transaction is open, in autocommit or
    not); if the batch fails before its ``BEGIN`` ran, the driver is set back.

    Where :func:`_prepares`, each :class:`Fixed` statement runs as ``EXECUTE`` of a statement
    prepared on this connection (prepared in the same round trip the first time): PostgreSQL
    then neither parses nor plans it again, which took longer than running it (reading the
    session's previous turn: a third of a millisecond on a 2-core machine). ``PREPARE``
    outlives a rolled back transaction: after a failed batch, what the connection holds is
    unknown, and the next batch starts with ``DEALLOCATE ALL`` (the driver prepares nothing of
    its own when it binds parameters on the client).
    """
    driver = cursor.connection
    opening = ["BEGIN"] if _opens_transaction(driver) else []
    here = None
    if _prepares():
        with _PREPARED_LOCK:
            here = _PREPARED.setdefault(cursor.connection, _PreparedHere())
    first = ["DEALLOCATE ALL"] if here is not None and here.unknown else []
    known = set() if here is None or here.unknown else here.names
    named: set[str] = set()
    texts: list[str] = []
    params: list[Any] = []
    for statement, values in statements:
        if isinstance(statement, Fixed) and here is not None:
            name = statement.name
            if name not in known and name not in named:
                first.append(_as_prepared(statement.sql, name))
            named.add(name)
            arguments = ", ".join(["%s"] * len(values))
            texts.append(f"EXECUTE {name}({arguments})" if values else f"EXECUTE {name}")
        else:
            texts.append(statement.sql if isinstance(statement, Fixed) else statement)
        params += values
    if opening:
        driver.autocommit = True
    try:
        # Bound here, sent with no parameters: psycopg then parses nothing of it. A value it
        # cannot adapt fails as it would in ``execute``.
        with cursor.db.wrap_database_errors:
            query = _bound(driver, "; ".join([*opening, *first, *texts]), params)
        cursor.execute(query)
    except BaseException:
        if opening and not _in_transaction(driver):
            driver.autocommit = False
        if here is not None and named:  # a statement may be missing, or prepared by this batch
            here.unknown = True
        raise
    if here is not None and first:
        if here.unknown:
            here.names.clear()
            here.unknown = False
        here.names |= named
    for _ in [*opening, *first]:  # BEGIN's, each PREPARE's (and DEALLOCATE's) empty result
        cursor.nextset()


#: A text's ``%s`` placeholders, and ``%%`` (a ``%``), as psycopg reads them in a query sent with
#: parameters; any other ``%`` escape is refused.
_PLACEHOLDER = re.compile(r"%(.)", re.DOTALL)


@functools.lru_cache(maxsize=256)
def _pieces(text: str, encoding: str) -> tuple[bytes, ...]:
    """``text`` split at its ``%s`` placeholders, each piece encoded, ``%%`` read as ``%``.
    Kept for the texts seen last: a batch's text changes only with its statements' rows."""
    pieces: list[str] = []
    current: list[str] = []
    start = 0
    for found in _PLACEHOLDER.finditer(text):
        current.append(text[start : found.start()])
        start = found.end()
        if found.group(1) == "%":
            current.append("%")
        elif found.group(1) == "s":
            pieces.append("".join(current))
            current = []
        else:
            raise ValueError(f"only %s and %% are read in a batch's SQL: {found.group(0)!r}")
    current.append(text[start:])
    pieces.append("".join(current))
    return tuple(piece.encode(encoding) for piece in pieces)


#: By driver connection: the adapters that render its parameters as SQL literals, with the
#: dumpers they picked for each type (a connection is used by one thread at a time; the
#: dictionary is guarded by ``_PREPARED_LOCK``).
_LITERALS: weakref.WeakKeyDictionary[Any, Transformer] = weakref.WeakKeyDictionary()


def _bound(driver: Any, text: str, params: Sequence[Any]) -> bytes:
    """``text`` with each ``%s`` replaced by its parameter as an SQL literal, rendered as
    psycopg renders it when it binds parameters on the client (the same bytes: its
    :class:`~psycopg.adapt.Transformer` with the connection's adapters, ``as_literal``).
    psycopg's own binding parses the text on every call where it holds more than 50
    parameters, as a turn's batch does (a third of a millisecond); here its pieces are kept."""
    import psycopg
    from psycopg import adapt

    encoding = driver.info.encoding
    pieces = _pieces(text, encoding)
    if len(pieces) != len(params) + 1:
        raise psycopg.ProgrammingError(
            f"the query has {len(pieces) - 1} placeholders but {len(params)} parameters were passed"
        )
    with _PREPARED_LOCK:  # the dictionary is every thread's
        literals = _LITERALS.get(driver)
        if literals is None:
            literals = _LITERALS[driver] = adapt.Transformer.from_context(driver)
    literal = literals.as_literal
    out = [pieces[0]]
    for value, piece in zip(params, pieces[1:], strict=True):
        out.append(literal(value))
        out.append(piece)
    return b"".join(out)


def _in_transaction(driver: Any) -> bool:
    """Whether the server holds a transaction open on ``driver`` (one in error included)."""
    from psycopg.pq import TransactionStatus

    return bool(driver.info.transaction_status != TransactionStatus.IDLE)


@dataclass(frozen=True)
class _LoadPlan:
    #: The attribute names of the fields read, in the order of ``steps``.
    names: tuple[str, ...]
    #: Per field: its column's place in a row, its converters and the expression they take.
    steps: tuple[tuple[int, tuple[Any, ...], Any], ...]
    #: Columns that are no field of the model: (attribute name, place in a row).
    extra: tuple[tuple[str, int], ...]


@cache
def _load_plan(model: type[Model], columns: tuple[str, ...], alias: str) -> _LoadPlan:
    """How to turn rows of ``columns`` into ``model`` instances on database ``alias`` (worked out
    once per query shape: the converters' lookup cost more than converting a turn's rows).

    Shared by every thread: the backend's converters are bound to the operations of the
    connection of the thread that first asked, and read only its time zone there (the same
    setting in every thread); each call gets the caller's own connection."""
    db = connections[alias]
    fields = [field for field in model._meta.concrete_fields if field.column in columns]
    steps = []
    for field in fields:
        expression = field.get_col(model._meta.db_table)
        found = db.ops.get_db_converters(expression) + expression.get_db_converters(db)
        steps.append((columns.index(field.column), tuple(found), expression))
    names = tuple(field.attname for field in fields)
    extra = tuple((name, at) for at, name in enumerate(columns) if name not in names)
    return _LoadPlan(names=names, steps=tuple(steps), extra=extra)


def _loaded(model: type[_M], cursor: Any) -> list[_M]:
    """The rows of ``cursor``'s current result as ``model`` instances, their values converted
    as the ORM converts them; a column that is no field of ``model`` becomes an attribute."""
    db = connections[DEFAULT_DB_ALIAS]
    plan = _load_plan(model, tuple(column[0] for column in cursor.description), db.alias)
    loaded = []
    for row in cursor.fetchall():
        values = []
        for at, found, expression in plan.steps:
            value = row[at]
            for convert in found:
                value = convert(value, expression, db)
            values.append(value)
        obj = model.from_db(db.alias, plan.names, values)
        for name, at in plan.extra:
            setattr(obj, name, row[at])
        loaded.append(obj)
    return loaded


_JSON = msgspec.json.Encoder()
_JSON_READ = msgspec.json.Decoder()


def _json_text(value: Any) -> str:
    """``value`` as JSON text: msgspec's encoding (a message's text several times faster than
    :func:`json.dumps`), the same values read back; :func:`json.dumps` for what msgspec
    refuses (a key that is no string or number, a lone surrogate), and for a text holding
    ``null`` that does not read back as ``value``: msgspec writes a NaN or an infinity so (an
    import read with Python's JSON may hold one), where :func:`json.dumps` writes what reads
    back as it was. A real ``null`` (a message's empty content, a usage's missing count) keeps
    msgspec's text."""
    try:
        encoded = _JSON.encode(value)
    except (TypeError, ValueError):  # UnicodeEncodeError is a ValueError
        return json.dumps(value)
    if b"null" in encoded and _JSON_READ.decode(encoded) != value:
        return json.dumps(value)
    return encoded.decode()


#: The JSON fields whose values :func:`_db_value` encodes itself (not a subclass it does not know).
_JSON_FIELDS = (JSONField, KeyOrderJSONField)


def _db_value(field: Field[Any, Any], value: Any, db: Any) -> Any:
    """``value`` of ``field`` as ``save()`` sends it to database ``db``; a JSON field's (with
    Django's own encoder) encoded by :func:`_json_text`, a :class:`KeyOrderJSONField`'s as a
    ``json`` parameter on PostgreSQL (a ``jsonb`` one would reach its column with its keys
    reordered)."""
    kind = type(field)
    if kind not in _JSON_FIELDS or value is None or getattr(field, "encoder", None) is not None:
        return field.get_db_prep_save(value, db)
    if db.vendor == "postgresql":
        if kind is KeyOrderJSONField:
            return json_as_sent(value, _json_text)
        from django.db.backends.postgresql.psycopg_any import Jsonb

        return Jsonb(value, dumps=_json_text)
    return _json_text(value)


#: The fields of a session that a new turn changes.
_SESSION_UPDATED = (
    "turn_count",
    "last_total_tokens",
    "last_fill",
    "last_activity_at",
    "compaction_count",
    "secret_count",
    "output_reserve",
    "attributed_turns",
)
#: Rows a statement inserts at most (PostgreSQL takes at most 65,535 parameters).
_INSERT_BATCH = 1_000
#: Inserts of at most this many messages are kept prepared (:class:`Fixed`): a late turn brings
#: one to three, and each count is a statement of its own on every connection.
_PREPARED_ROWS = 4


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


#: The columns of a message row that a turn needs of one stored already (not its content).
_ROW_LOOKED_UP = ("id", "hash", "counts", "secrets")


def _rows_by_hash_sql(project_id: int, hashes: Sequence[str]) -> tuple[str, list[Any]]:
    """The statement selecting the project's message rows of ``hashes`` (without their
    content), to be loaded with :func:`_loaded`."""
    sql = _sql_of(MessageRow)
    columns = ", ".join(sql.column[name] for name in _ROW_LOOKED_UP)
    where = ", ".join(["%s"] * len(hashes))
    return (
        f"SELECT {columns} FROM {sql.table}"
        f" WHERE {sql.column['project']} = %s AND {sql.column['hash']} IN ({where})",
        [project_id, *hashes],
    )


def _turns_since_sql(session_id: int, since: int) -> tuple[str, list[Any]]:
    """The statement selecting session ``session_id``'s turns from index ``since`` on, in order,
    with what rebuilding their message ids takes, to be loaded with :func:`_loaded`."""
    turn = _sql_of(Turn)
    names = ("id", "index", "created_at", "shared", "tail")
    columns = ", ".join(turn.column[name] for name in names)
    return (
        f"SELECT {columns} FROM {turn.table} WHERE {turn.column['session']} = %s"
        f" AND {turn.column['index']} >= %s ORDER BY {turn.column['index']}",
        [session_id, since],
    )


#: Field classes whose values of these exact types ``get_db_prep_save`` gives back as they are,
#: on SQLite and PostgreSQL (the databases ctxweb runs on): such a value is sent without it.
_SENT_AS_IS: dict[type[Field[Any, Any]], tuple[type, ...]] = {
    models.CharField: (str,),
    models.TextField: (str,),
    models.BooleanField: (bool,),
    models.FloatField: (float,),
    **dict.fromkeys(
        (
            models.IntegerField,
            models.PositiveIntegerField,
            models.BigIntegerField,
            models.PositiveBigIntegerField,
            models.SmallIntegerField,
            models.PositiveSmallIntegerField,
        ),
        (int,),
    ),
}


def _as_is(field: Field[Any, Any]) -> tuple[type, ...]:
    """The exact types of ``field``'s values that go to the database as they are: its class's
    (:data:`_SENT_AS_IS`; a foreign key's, its integer key's), and ``None`` if it is nullable."""
    kind = type(field)
    types: tuple[type, ...] = _SENT_AS_IS.get(kind, ())
    if kind is models.ForeignKey:
        target = type(getattr(field, "target_field", None))
        types = (int,) if target in (models.AutoField, models.BigAutoField) else ()
    return (*types, type(None)) if types and field.null else types


@dataclass(frozen=True)
class _Written:
    """How a model's fields are written by the statements here: each field, the types of its
    values sent as they are (:func:`_as_is`), and whether its ``pre_save`` is the plain read of
    the attribute (not ``auto_now``'s)."""

    fields: tuple[Any, ...]
    as_is: tuple[tuple[type, ...], ...]
    read: tuple[bool, ...]

    @classmethod
    def of(cls, fields: Sequence[Field[Any, Any]]) -> _Written:
        return cls(
            tuple(fields),
            tuple(_as_is(field) for field in fields),
            tuple(type(field).pre_save is Field.pre_save for field in fields),
        )

    def values(self, obj: Model, db: Any, *, adding: bool) -> list[Any]:
        """``obj``'s values of these fields as ``save()`` sends them (with ``adding``, as an
        insert does: ``auto_now_add`` times set)."""
        values = []
        for field, as_is, read in zip(self.fields, self.as_is, self.read, strict=True):
            plain = read or not adding
            value = getattr(obj, field.attname) if plain else field.pre_save(obj, True)
            values.append(value if type(value) in as_is else _db_value(field, value, db))
        return values


@dataclass(frozen=True)
class _ModelSql:
    """A model's SQL text, as statements written here use it."""

    table: str
    #: The fields written by an insert (all but the primary key), and their columns.
    inserted: _Written
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
        inserted=_Written.of(inserted),
        columns=", ".join(column[field.name] for field in inserted),
        values="(" + ", ".join(["%s"] * len(inserted)) + ")",
        column=column,
    )


@cache
def _updated(model: type[Model], names: tuple[str, ...]) -> tuple[_Written, str]:
    """The fields ``names`` of ``model`` as :func:`_update_sql` writes them, and its ``SET``."""
    sql = _sql_of(model)
    fields = [field for field in model._meta.concrete_fields if field.name in names]
    return _Written.of(fields), ", ".join(f"{sql.column[field.name]} = %s" for field in fields)


def _insert_sql(objs: Sequence[Model]) -> tuple[str, list[Any]]:
    """The ``INSERT`` of ``objs`` (of one model): every column but the primary key, each value
    prepared as ``save()`` prepares it (``auto_now_add`` times set)."""
    db = connections[DEFAULT_DB_ALIAS]
    sql = _sql_of(type(objs[0]))
    params = [value for obj in objs for value in sql.inserted.values(obj, db, adding=True)]
    values = ", ".join([sql.values] * len(objs))
    return f"INSERT INTO {sql.table} ({sql.columns}) VALUES {values}", params


def _update_sql(obj: Model, names: Sequence[str]) -> tuple[str, list[Any]]:
    """The ``UPDATE`` of ``obj``'s fields ``names``, as ``save(update_fields=names)`` writes it."""
    db = connections[DEFAULT_DB_ALIAS]
    sql = _sql_of(type(obj))
    written, assignments = _updated(type(obj), tuple(names))
    return (
        f"UPDATE {sql.table} SET {assignments} WHERE {sql.column['id']} = %s",
        [*written.values(obj, db, adding=False), obj.pk],
    )


def _saved(obj: Model, pk: int) -> None:
    """Mark ``obj``, inserted in SQL, as ``save()`` would."""
    obj.pk = pk
    obj._state.adding = False
    obj._state.db = DEFAULT_DB_ALIAS


#: The end of a transaction, sent as the last statement of its last batch (:func:`_committing`).
_COMMIT: tuple[str, Sequence[Any]] = ("COMMIT", ())


def _committing(db: Any, block: Any) -> bool:
    """Whether a batch on ``db`` may end with ``COMMIT``: the writer's own ``atomic`` ``block``
    (the object it entered) is the only one open, the outermost (no caller's transaction around
    it, no test's), and its transaction is still sound. The batch holds that transaction's last
    writes. The server then holds no transaction, which psycopg reads from the connection's
    status: the ``commit()`` that Django's ``atomic`` sends on leaving the block sends nothing,
    and its on-commit callbacks run as always. A batch that fails before its ``COMMIT`` leaves
    the transaction aborted, for the block to roll back; a ``COMMIT`` that fails has rolled it
    back, and its error goes up through the block the same way."""
    return (
        block is not None
        and db.in_atomic_block
        and len(db.atomic_blocks) == 1
        and db.atomic_blocks[0] is block
        and not db.needs_rollback
    )


def _execute_in_order(
    cursor: Any,
    statements: Sequence[tuple[str | Fixed, Sequence[Any]]],
    *,
    returning: bool,
    commit: Any = None,
) -> list[int]:
    """Run ``statements`` in order, in one round trip where the driver batches them
    (:func:`_execute_at_once`), else one ``execute`` each; the ids the first one returns when
    ``returning``. ``commit``: the caller's ``atomic`` block whose transaction these writes
    end; its ``COMMIT`` then ends the same round trip where it may (:func:`_committing`)."""
    if _batches_statements():
        ending = [_COMMIT] if statements and _committing(cursor.db, commit) else []
        _execute_at_once(cursor, [*statements, *ending])
        return [row[0] for row in cursor.fetchall()] if returning and statements else []
    ids: list[int] = []
    for number, (sql, values) in enumerate(statements):
        cursor.execute(sql.sql if isinstance(sql, Fixed) else sql, values)
        if number == 0 and returning:
            ids = [row[0] for row in cursor.fetchall()]
    return ids


def _turn_insert(
    turn: Turn,
    session: Session,
    after: Sequence[tuple[str | Fixed, Sequence[Any]]] = (),
    *,
    insert: tuple[str, list[Any]] | None = None,
    returning: bool = False,
    commit: Any = None,
) -> list[int]:
    """Insert ``turn`` and save the fields of ``session`` that a turn changes, in one statement
    on PostgreSQL (kept prepared, :func:`_execute_at_once`; two statements elsewhere), then run
    ``after`` (statements that need the turn's row written before them, such as its rollups')
    in the same round trip where the driver allows it; the ids the first of ``after`` returns
    when ``returning``. ``insert``: the turn's ``INSERT`` built already (:func:`_insert_sql`,
    which sets its ``created_at``: ``after`` may have read its day).

    ``commit``: the caller's ``atomic`` block whose transaction these writes end; where it is
    the outermost and the driver batches statements, ``COMMIT`` ends the same round trip
    (:func:`_committing`), one fewer a turn."""
    inserting, params = insert or _insert_sql([turn])
    update, update_params = _update_sql(session, _SESSION_UPDATED)
    db = connections[DEFAULT_DB_ALIAS]
    postgresql = db.vendor == "postgresql"
    written: list[tuple[str | Fixed, Sequence[Any]]]
    if postgresql:
        id_column = _sql_of(Turn).column["id"]
        written = [
            (
                Fixed(f"WITH updated AS ({update}) {inserting} RETURNING {id_column}"),
                [*update_params, *params],
            )
        ]
    else:
        written = [(update, update_params), (inserting, params)]
    with db.cursor() as cursor:
        if _batches_statements():
            ending = [_COMMIT] if _committing(db, commit) else []
            _execute_at_once(cursor, [*written, *after, *ending])
            _saved(turn, cursor.fetchone()[0])
            if not (returning and after):
                return []
            cursor.nextset()
            return [row[0] for row in cursor.fetchall()]
        _execute_in_order(cursor, written, returning=False)
        _saved(turn, cursor.fetchone()[0] if postgresql else cursor.lastrowid)
        return _execute_in_order(cursor, after, returning=returning)
