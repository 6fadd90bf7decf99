"""Turn ingest: one model call of a session stored whole or not at all (:func:`turn_ingest`),
with its retries, its delta on the previous turn and the compaction events it shows.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from django.db import connection, transaction
from django.dispatch import Signal
from django.utils import timezone

from compaction.errors import FormatError
from compaction.messages import Context
from compaction.regions import sum_regions
from compaction.tokens import REQUEST_OVERHEAD
from compaction.usage import normalize_usage
from compaction.windows import HEADER_WINDOWS, context_window_for_call
from ctxweb.accounts.models import Project
from ctxweb.afterwards import after_answer, answer_deferred
from ctxweb.contexts import events as live_events
from ctxweb.contexts import selectors
from ctxweb.contexts.models import KEYFRAME_EVERY, Session, Turn
from ctxweb.contexts.models import Message as MessageRow
from ctxweb.contexts.services._canonical import (
    _body_digest,
    _check_text,
    _same_body,
    _same_content,
    _typed_equal,
)
from ctxweb.contexts.services._recent import (
    _Recent,
    _recent_earlier,
    _recent_guess,
    _recent_put,
    _recent_valid,
)
from ctxweb.contexts.services._secrets import value_scanned
from ctxweb.contexts.services._sessions import Then, _session_for_turn
from ctxweb.contexts.services._sql import (
    _PREPARED_ROWS,
    _insert_rows_sql,
    _insert_sql,
    _rows_by_hash_sql,
    _turn_insert,
    _turns_since_sql,
)
from ctxweb.contexts.services.attribution import PendingTurn, attribution_catch_up
from ctxweb.contexts.services.counting import counting_kept, counting_scope, encoding_for
from ctxweb.contexts.services.moments import occurred_at_parse
from ctxweb.contexts.services.storage import (
    _MessagePlan,
    _messages_plan,
    _messages_store,
    _rows_by_hash,
    message_rows,
    system_row,
    toolset_row,
)
from ctxweb.numbers import MAX_COUNT

#: A turn whose total drops by more than this share from the previous turn is a compaction event.
COMPACTION_DROP = 0.30

#: The one hook ingestion offers the layers above it: sent once the turn and its session are
#: written, with ``session``, ``turn`` and ``previous_total`` (the previous turn's total, None for
#: a first turn). Inside a transaction of the caller's (an import, the proxy's recorder) it is
#: sent in it, and a receiver that raises rolls the caller's back; else the turn is committed
#: already (its commit ends the turn's last round trip): receivers handle their own failures
#: and write in transactions of their own. The automatic policy
#: (:func:`ctxweb.contexts.services.policy.operation_auto_after_turn`) listens to it, connected
#: when the app loads (:mod:`ctxweb.contexts.apps`), so ingestion never imports what builds on it.
turn_stored = Signal()


#: The words that follow a session id in a route: an id ending with one would be unreachable.
ROUTE_WORDS = frozenset(
    {"turns", "preview", "operations", "context", "export", "delete", "attribution"}
)
#: The longest session id and model name: their columns' lengths.
EXTERNAL_ID_MAX = 200
MODEL_MAX = 200
#: What no session id or model name holds: control characters (PostgreSQL refuses NUL in text;
#: a newline makes an id unreachable by any route, others unreadable wherever it is shown) and
#: lone surrogates, which no database encodes (capture reads ids from JSON's ``\ud800``).
_UNSTORABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
#: Where each format puts its output reserve, for the error that names it.
_RESERVE_FIELD = {
    "openai-chat": "request.max_tokens",
    "anthropic-messages": "request.max_tokens",
    "openai-responses": "request.max_output_tokens",
}


#: The request headers that can select a model's window (lower case): a relay keeps these for
#: :func:`call_context_window`.
WINDOW_HEADERS = frozenset(window.header for window in HEADER_WINDOWS.values())


def call_context_window(
    *, model: str | None, headers: Sequence[tuple[str, str]] = ()
) -> tuple[int, str]:
    """The window of a model call relayed as is, and its source for :func:`turn_ingest`'s
    ``context_window_source``: "request" when the call selects it (a header of
    :data:`WINDOW_HEADERS`, a model name ending ``[1m]``), else "model" or "default" (guessed)."""
    guess = context_window_for_call(model, headers)
    return guess.tokens, guess.source


def session_id_problem(external_id: str) -> str | None:
    """Why ``external_id`` cannot name a session, or None: ids hold slashes (an import's
    prefix), so one must not read as a route (``x/turns``, ``q/turns/5``, ``w/preview``) nor
    hold an empty, ``.`` or ``..`` segment, which clients and proxies rewrite."""
    if not external_id:
        return "must not be empty"
    if len(external_id) > EXTERNAL_ID_MAX:
        return f"at most {EXTERNAL_ID_MAX} characters"
    if _UNSTORABLE.search(external_id):
        return "must not hold control characters (U+0000-U+001F, U+007F-U+009F) or lone surrogates"
    segments = external_id.split("/")
    if any(s in ("", ".", "..") for s in segments):
        return "no empty, '.' or '..' segment between slashes"
    last = segments[-1]
    if len(segments) > 1 and (
        last in ROUTE_WORDS or (last.isascii() and last.isdigit() and segments[-2] == "turns")
    ):
        return f"must not end like a route ('/{last}')"
    return None


def _check_storable(*, external_id: str, context: Context, model: str | None) -> None:
    """Refuse what the database cannot hold, before anything is written, naming the field.
    Usage is checked where it is normalized, the one check of every way in
    (:func:`compaction.usage.normalize_usage`)."""
    problem = session_id_problem(external_id)
    if problem is not None:
        raise FormatError("external_id", problem)
    reserve = context.max_output_tokens
    if reserve is not None and not 1 <= reserve <= MAX_COUNT:
        raise FormatError(
            _RESERVE_FIELD.get(context.format, "request.max_tokens"),
            f"must be between 1 and {MAX_COUNT}",
        )
    requested = context.extra.get("model")
    for path, name in (("model", model), ("request.model", requested)):
        if isinstance(name, str) and len(name) > MODEL_MAX:
            raise FormatError(path, f"at most {MODEL_MAX} characters")
        if isinstance(name, str) and _UNSTORABLE.search(name):
            raise FormatError(path, "must not hold control characters or lone surrogates")


class SessionFormatConflict(Exception):
    """The session's turns are in another format: a session's format is fixed by its first turn."""

    def __init__(self, external_id: str, session_format: str, posted: str) -> None:
        super().__init__(
            f"Session {external_id!r} holds {session_format} turns; this turn is {posted}."
            " Post it to another session."
        )
        self.session_format = session_format


class TurnConflict(Exception):
    """A ``turn_id`` was reused with a different body."""


@dataclass(frozen=True)
class IngestResult:
    turn: Turn
    created: bool


def _guessed_plan(project: Project, context: Context, guess: _Recent) -> _MessagePlan | None:
    """The plan of ``context``'s messages if ``guess`` holds the previous turn, or None when it
    cannot be made before the session is read (it is then made again, as it must be)."""
    if not connection.features.can_return_rows_from_bulk_insert:  # SQLite before 3.35
        return None
    try:
        return _messages_plan(
            project=project,
            messages=context.messages,
            encoding=guess.encoding,
            recent=guess,
            look_up_first=guess.shared,
        )
    except FormatError:  # raised again in order, after a retried turn_id is recognized
        return None


#: A turn's messages of at least this many bytes (serialized) that this process remembers no
#: previous turn for are counted before its transaction opens (:func:`_cold_plan`).
COLD_PLAN_BYTES = 256 * 1024


def _cold_plan(
    project: Project, external_id: str, context: Context, model: str
) -> _MessagePlan | None:
    """The plan of ``context``'s messages when this process remembers no turn of the session
    (its first turn, a turn another process stored the previous one of, the first after a
    restart), made before the transaction opens: hashed, and their rows looked up with the
    session's lock, in its round trip. When they hold at least :data:`COLD_PLAN_BYTES`, they are
    also looked up now (reads, which wait for no writer) and the new ones scanned for secrets
    and counted with the session's encoding (a new session's: its model's): measured under the
    hostile load (``bench/hostile.py``, SQLite), a recorder counting a 24 MB call inside the
    transaction held the database's write lock for 2 to 5 s, every other writer waiting. In the
    transaction only what changed since is counted (rows stored meanwhile, or removed). None
    when the messages cannot be read (raised again in order, after a retried turn_id is
    recognized)."""
    try:
        plan = _messages_plan(
            project=project,
            messages=context.messages,
            encoding="",  # known with the session: counted in the transaction
            recent=None,
            look_up_first=True,
        )
    except FormatError:
        return None
    if sum(map(len, plan.texts)) < COLD_PLAN_BYTES:
        return plan
    stored = (
        Session.objects.filter(project=project, external_id=external_id)
        .values_list("encoding", flat=True)
        .first()
    )
    plan.encoding = stored or encoding_for(model)[0]
    plan.count(_rows_by_hash(project, plan.wanted))
    # Stored rows never counted with the encoding are counted in the transaction, as found then.
    plan.stale = []
    return plan


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


def _new_secrets(
    flagged: Mapping[int, list[dict[str, Any]]],
    ids: list[int],
    previous_ids: list[int],
    system: MessageRow | None,
) -> list[dict[str, Any]]:
    """The secrets of the messages this turn brings (not in the previous turn), each with its
    ``position`` in the turn (``None`` for the top-level system prompt). Costs nothing unless a
    message looked up or stored for this turn holds some."""
    found: list[dict[str, Any]] = []
    if system is not None and system.secrets:
        found += [{**s, "position": None} for s in system.secrets]
    if not flagged:
        return found
    before = set(previous_ids)
    seen: set[int] = set()
    for position, message_id in enumerate(ids):
        if message_id in flagged and message_id not in before and message_id not in seen:
            seen.add(message_id)
            found += [{**s, "position": position} for s in flagged[message_id]]
    return found


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
    context_window_source: str | None = None,
    occurred_at: object = None,
    savepoint: bool = True,
) -> IngestResult:
    """Store one model call of session ``external_id`` (created on first use), whole or not at all.

    A retry with the same ``turn_id`` and body returns the stored turn (``created`` False); the
    same ``turn_id`` with another body raises :class:`TurnConflict`. ``body`` is the posted body
    (``{"request": ..., ...}``) that ``context`` was parsed from.

    ``context_window`` is the call's window: stated by the call unless ``context_window_source``
    says the caller guessed it ("model", "default": see :mod:`compaction.windows`). A stated
    window is the turn's and becomes the session's; a guessed one only names a new session's.

    ``occurred_at`` is when the call happened by its source's clock (a transcript's timestamp, a
    span's start: a datetime, ISO 8601 text or an epoch number); one that cannot be read or is
    absurd is ignored (:func:`~ctxweb.contexts.services.moments.occurred_at_parse`). The turn
    counts on that day in the project overview; without one, on the day it was recorded.

    Inside a transaction of the caller's, the turn's writes are a savepoint of it, so that the
    caller may go on after this call failed; ``savepoint=False`` when the caller's transaction
    ends with the failure anyway (the proxy's recorder): two round trips fewer.
    """
    # Only a turn with a turn_id can be retried: hash the body only then.
    hashed = body is not None and turn_id is not None
    normalized = normalize_usage(usage) if usage else None  # every count within its column
    _check_storable(external_id=external_id, context=context, model=model)
    key = (project.pk, external_id)
    attribute_later: PendingTurn | None = None
    # One counting scope: the new messages' parts that storage counts for their regions are
    # counted again by attribution (items, tool uses) with a dictionary lookup.
    with contextlib.ExitStack() as scope:
        scope.enter_context(counting_scope())
        # What this process stored for the previous turn, if it still is the previous turn: the
        # new messages are inserted with the session's lock, in the same round trip. The plan (the
        # new messages hashed, scanned for secrets and counted: seconds for a message of tens of
        # MB) is made before the transaction opens: SQLite's locks the whole database. Without
        # a guess, so are big messages' (:func:`_cold_plan`).
        guess = _recent_guess(key)
        model = model or str(context.extra.get("model") or "")
        plan = (
            _guessed_plan(project, context, guess)
            if guess is not None
            else _cold_plan(project, external_id, context, model)
        )
        own = transaction.atomic(savepoint=savepoint)  # this turn's: its commit may be folded
        scope.enter_context(own)
        # Sent with the lock: the plan's rows (inserted, or looked up behind round robin), and
        # behind round robin the turns since this process's (to rebuild the previous turn's
        # message ids); ``rows_at`` and ``since`` are their places in what comes back.
        then: list[Then] = []
        rows_at = since = None
        if plan is not None and plan.optimistic and plan.new:
            rows_at = len(then)
            new_rows = plan.rows()
            then.append(Then(*_insert_rows_sql(new_rows), fixed=len(new_rows) <= _PREPARED_ROWS))
        elif plan is not None and not plan.optimistic and plan.wanted:
            rows_at = len(then)
            then.append(Then(*_rows_by_hash_sql(project.pk, sorted(plan.wanted)), MessageRow))
        if guess is not None and guess.shared:
            since = len(then)
            then.append(Then(*_turns_since_sql(guess.session_id, guess.index), Turn))
        found = _session_for_turn(
            project=project,
            external_id=external_id,
            turn_id=turn_id,
            format=context.format,
            model=model,
            context_window=context_window,
            output_reserve=context.max_output_tokens,
            source=source,
            then=then,
            context_window_source=context_window_source,
        )
        returned = found.returned
        session, previous = found.session, found.previous
        if session.format != context.format and found.retry_id is None:
            raise SessionFormatConflict(external_id, session.format, context.format)
        encoding = session.encoding
        index = session.turn_count
        if found.retry_id is not None:
            existing = Turn.objects.get(pk=found.retry_id)
            if hashed and existing.body_hash:
                # A retry of this process's latest turn: the plan holds every message's hash
                # (the messages it shares with that turn, taken from it); else, or for a turn
                # hashed as older versions did, every message is hashed again.
                hashes = [*plan.prefix.hashes, *plan.digests] if plan is not None else None
                same = hashes is not None and (
                    _body_digest(body, context, hashes) == existing.body_hash
                )
                if not same and not _same_body(existing.body_hash, body, context):
                    raise TurnConflict(turn_id)
            return IngestResult(existing, False)
        recent = earlier = None
        previous_ids: list[int] | None = None
        if guess is not None and _recent_valid(guess, session, previous):
            recent = guess
            previous_ids = recent.ids
        elif guess is not None and _recent_earlier(guess, session, previous):
            # Another process stored the turns since this one's: its messages are still known,
            # and the previous turn's ids are its own plus the deltas since.
            known_turn = (guess.index, *guess.turn_key)
            if since is not None and returned is not None:
                previous_ids = selectors.turn_message_ids_rebuilt(
                    [(t.index, t.pk, t.created_at, t.shared, t.tail) for t in returned[since]],
                    index=index - 1,
                    known=known_turn,
                    ids=guess.ids,
                )
            else:
                previous_ids = selectors.turn_message_ids_after(
                    session=session, index=index - 1, known=known_turn, ids=guess.ids
                )
            earlier = guess if previous_ids is not None else None
        if (recent is not None or earlier is not None) and plan is not None:
            # The plan made from the guess holds: its prefix and rows are the session's (for an
            # earlier turn, the messages since are those it counted; stored ones are found).
            rows = returned[rows_at] if returned is not None and rows_at is not None else None
            stored = (
                _messages_store(plan, rows)
                if plan.optimistic
                else _messages_store(plan, found=rows)
            )
        elif guess is None and plan is not None and plan.encoding in ("", encoding):
            # planned before the transaction, without a guess (counted already, or now with
            # the session's encoding): its rows as found with the lock
            plan.encoding = encoding
            rows = returned[rows_at] if returned is not None and rows_at is not None else None
            stored = _messages_store(plan, found=rows)
        else:  # rows the guess inserted are found like any others
            stored = message_rows(
                project=project,
                messages=context.messages,
                encoding=encoding,
                recent=recent or earlier,
            )
        known = recent or earlier
        body_hash = _body_digest(body, context, stored.hashes) if hashed else ""
        system_parts, tools = tuple(context.system), tuple(context.tools)
        if known is not None and _same_content(system_parts, known.system):
            system = known.system_row
        else:
            system = system_row(project=project, context=context, encoding=encoding)
        if known is not None and _same_content(tools, known.tools):
            toolset = known.toolset
        else:
            toolset = toolset_row(project=project, context=context, encoding=encoding)
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
        if previous_ids is None:
            previous_ids = (
                selectors.turn_message_ids(session=session, index=index - 1)
                if previous is not None
                else []
            )
        shared, tail, keyframe = _delta(previous_ids, ids, index)
        system_pk = system.pk if system is not None else None
        # A system prompt's secrets count on the first turn, or when it changed (as far as
        # this process knows the previous turn).
        system_is_new = previous is None or (
            recent is not None and (recent.system_row is None or recent.system_row.pk != system_pk)
        )
        secrets = _new_secrets(stored.flagged, ids, previous_ids, system if system_is_new else None)
        toolset_is_new = previous is None or (
            recent is not None
            and (recent.toolset is None or toolset is None or recent.toolset.pk != toolset.pk)
        )
        if toolset is not None and toolset.secrets and toolset_is_new:
            secrets += [{**s, "position": None} for s in toolset.secrets]
        # The request's options (``user``, ``metadata``, every other top-level key) and the
        # response are scanned (and masked) on every turn; the options the previous turn sent
        # are reused as this process stored them. Their secrets are listed on the turn; those
        # of options count in the session's total when they are new to it, as a system
        # prompt's do, and a response's not at all (the next turn's assistant message holds
        # them again, and counts them then).
        options = dict(context.extra)
        _check_text(options, "request")
        if (
            recent is not None
            and recent.extra is not None
            and recent.extra_stored is not None
            and recent.extra_masked == project.mask_secrets
            and _typed_equal(recent.extra, options)
        ):
            extra, option_secrets = dict(recent.extra_stored), list(recent.extra_secrets or ())
            options_are_new = False
        else:
            extra, option_secrets = value_scanned(
                options, field="request", mask=project.mask_secrets
            )
            options_are_new = previous is None or recent is not None
        response_secrets: list[dict[str, Any]] = []
        if response is not None:
            _check_text(response, "response")
            response, response_secrets = value_scanned(
                response, field="response", mask=project.mask_secrets
            )
        counted_secrets = len(secrets) + (len(option_secrets) if options_are_new else 0)
        secrets += [{**s, "position": None} for s in (*option_secrets, *response_secrets)]
        turn_events = [dict(e) for e in events]
        applied, applied_event = (
            selectors.turn_operation_event(
                session=session,
                index=index,
                message_ids=ids,
                system_id=system.id if system else None,
                managed_by=next(
                    (
                        e.get("operation")
                        for e in turn_events
                        if e.get("type") == "managed" and isinstance(e.get("operation"), int)
                    ),
                    None,
                ),
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
        window = session.context_window
        stated = bool(context_window) and context_window_source in (None, "request")
        if stated and (window, session.context_window_source) != (context_window, "request"):
            # the call says its window: the session's was guessed, or the call changed it
            assert context_window is not None
            window = session.context_window = context_window
            session.context_window_source = "request"
            Session.objects.filter(pk=session.pk).update(
                context_window=window, context_window_source="request"
            )
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
            secrets=secrets,
            operation=applied,
            occurred_at=occurred_at_parse(occurred_at),
        )
        reserve = context.max_output_tokens or session.output_reserve
        usable = max(1, window - reserve)
        session.turn_count = index + 1
        session.last_total_tokens = total
        session.last_fill = total / usable
        session.last_activity_at = timezone.now()
        session.compaction_count += sum(1 for e in turn_events if e.get("type") == "compaction")
        session.secret_count += counted_secrets
        if context.max_output_tokens:
            session.output_reserve = context.max_output_tokens
        insert = _insert_sql([turn])  # sets the turn's created_at: its day, for the rollups
        # The session's attribution rollups (only the messages past the shared prefix): after
        # the answer when one is sent (the caller does not wait for them), else written in the
        # turn's own round trip where the driver allows it, when the rollups hold every turn
        # before it (else caught up once the turn is stored).
        pending = PendingTurn(
            session=session,
            turn=turn,
            messages=context.messages,
            ids=ids,
            previous_ids=previous_ids,
            system=system,
            toolset=toolset,
            regions=stored.regions,
            mask=project.mask_secrets,
            counters=counting_kept(),
        )
        # The turn's batch holds the transaction's last writes: where it is this call's own,
        # its COMMIT goes in the same round trip (``commit``; the hook below runs after it).
        if answer_deferred() or session.attributed_turns != index:
            _turn_insert(turn, session, insert=insert, commit=own)
            attribute_later = pending
        else:
            session.attributed_turns = index + 1
            rollups = pending.writes()
            rollups.finish(
                _turn_insert(
                    turn,
                    session,
                    rollups.statements,
                    insert=insert,
                    returning=rollups.returning,
                    commit=own,
                )
            )
        _recent_put(
            key,
            _Recent(
                session_id=session.pk,
                encoding=encoding,
                turn_key=(turn.pk, turn.created_at),
                index=index,
                messages=tuple(context.messages),
                hashes=stored.hashes,
                ids=ids,
                regions=stored.regions,
                cumulative=stored.cumulative,
                system=system_parts,
                system_row=system,
                tools=tools,
                toolset=toolset,
                shared=earlier is not None,
                extra=options,
                extra_stored=extra,
                extra_secrets=option_secrets,
                extra_masked=project.mask_secrets,
            ),
        )
        transaction.on_commit(lambda: live_events.turn_created(turn))
    # Once the turn is stored: in a transaction of the caller's, still inside it; else after
    # the turn's commit, each receiver in a transaction of its own.
    turn_stored.send(
        sender=Turn,
        session=session,
        turn=turn,
        previous_total=previous.total_tokens if previous is not None else None,
    )
    if attribute_later is not None:
        after_answer(partial(attribution_catch_up, session_id=session.pk, pending=attribute_later))
    return IngestResult(turn, True)
