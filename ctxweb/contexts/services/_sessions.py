"""Sessions as ingestion finds them: created on first use, locked for a new turn with what
the turn needs of the session's previous turn and of the turn a retry repeats.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.db.models import Model

from compaction.windows import context_window_for_call
from ctxweb.accounts.models import Project
from ctxweb.contexts.models import Session, Turn
from ctxweb.contexts.services._sql import (
    _ASYNCHRONOUS_COMMIT,
    Fixed,
    _batches_statements,
    _execute_at_once,
    _loaded,
    _locked_sql,
    _synchronous_commit,
)
from ctxweb.contexts.services.counting import encoding_for


def session_get_or_create(
    *,
    project: Project,
    external_id: str,
    format: str,
    model: str | None,
    context_window: int | None = None,
    output_reserve: int | None = None,
    source: str = "api",
    context_window_source: str | None = None,
) -> Session:
    """The project's session ``external_id``, created on first use (locked for this transaction).

    A new session's window is the request's, else the model table's, else the default; its
    ``context_window_source`` says which (``context_window_source``, when the caller guessed
    ``context_window`` itself; else a given window counts as stated: "request"). It starts with
    the project's default policy (``Project.default_policy``, validated when it was set).
    """
    session = (
        Session.objects.select_for_update().filter(project=project, external_id=external_id).first()
    )
    if session is not None:
        return session
    encoding, approximate = encoding_for(model)
    if context_window:
        window, window_source = context_window, context_window_source or "request"
    else:
        guess = context_window_for_call(model)
        window, window_source = guess.tokens, guess.source
    try:
        with transaction.atomic():
            return Session.objects.create(
                project=project,
                external_id=external_id,
                format=format,
                model=model or "",
                context_window=window,
                context_window_source=window_source,
                output_reserve=output_reserve or 0,
                encoding=encoding,
                approximate=approximate,
                source=source,
                policy=dict(project.default_policy or {}),
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
    #: (selectors.turn_operation_event), saving that function's queries.
    operated: bool


@dataclass(frozen=True)
class _Locked:
    """A session locked for a new turn, with its previous turn and the turn a retry repeats."""

    session: Session
    previous: _Previous | None
    retry_id: int | None
    #: What each statement sent with the lock returned, in order (None when none was, or they
    #: did not run).
    returned: list[list[Any]] | None = None


@dataclass(frozen=True)
class Then:
    """A statement sent with a session's lock (:func:`_session_locked`): its rows are returned
    as they are, or as ``rows`` instances (:func:`_loaded`). A ``fixed`` one's text recurs turn
    after turn: it is kept prepared (:class:`Fixed`)."""

    sql: str
    params: list[Any]
    rows: type[Model] | None = None
    fixed: bool = False


def _session_locked(
    *,
    project: Project,
    external_id: str,
    turn_id: str | None,
    then: Sequence[Then] = (),
) -> _Locked | None:
    """Lock the project's session ``external_id`` and read what a new turn needs of it: its
    previous turn and the turn ``turn_id`` names; then run the statements ``then``, if any and if
    the session exists (when sent at once, whether it exists or not), each one's rows returned.
    First, on
    PostgreSQL, stop this transaction's commit waiting for the disk unless
    :func:`_synchronous_commit`.

    In SQL: the ORM spends longer building these queries than the database running them. Two
    statements, the turns read once the session is locked (a read in the locking statement
    would see the turns as they were before it waited), sent at once with ``then`` where the
    driver allows: one round trip, the two kept prepared on a kept connection
    (:func:`_execute_at_once`).
    """
    sql = _locked_sql()
    key: list[Any] = [project.pk, external_id]
    returned = None
    asynchronous = connection.vendor == "postgresql" and not _synchronous_commit()
    with connection.cursor() as cursor:
        if _batches_statements():
            statements: list[tuple[str | Fixed, Sequence[Any]]] = [
                (Fixed(sql.session), key),
                (Fixed(sql.turns), [*key, turn_id]),
            ]
            if asynchronous:
                statements.insert(0, (_ASYNCHRONOUS_COMMIT, []))
            statements += [
                (Fixed(statement.sql) if statement.fixed else statement.sql, statement.params)
                for statement in then
            ]
            _execute_at_once(cursor, statements)
            if asynchronous:
                cursor.nextset()
            sessions = _loaded(Session, cursor)
            cursor.nextset()
            turns = _loaded(Turn, cursor)
            returned = []
            for statement in then:
                cursor.nextset()
                returned.append(_rows_of(statement, cursor))
        else:
            if asynchronous:
                cursor.execute(_ASYNCHRONOUS_COMMIT)
            cursor.execute(sql.session, key)
            sessions = _loaded(Session, cursor)
            if not sessions:
                return None
            cursor.execute(sql.turns, [*key, turn_id])
            turns = _loaded(Turn, cursor)
            returned = []
            for statement in then:
                cursor.execute(statement.sql, statement.params)
                returned.append(_rows_of(statement, cursor))
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
    return _Locked(session, previous, retried, returned if then else None)


def _rows_of(statement: Then, cursor: Any) -> list[Any]:
    return _loaded(statement.rows, cursor) if statement.rows else cursor.fetchall()


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
    then: Sequence[Then] = (),
    context_window_source: str | None = None,
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
        context_window_source=context_window_source,
    )
    # Read again: a concurrent request may have created it and stored turns since.
    found = _session_locked(project=project, external_id=external_id, turn_id=turn_id)
    assert found is not None
    return found
