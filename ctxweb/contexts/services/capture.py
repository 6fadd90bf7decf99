"""Spans in, turns out: model calls captured by an agent's own instrumentation (OpenTelemetry
GenAI, OpenInference, OpenLLMetry, the Langfuse SDK) stored as turns, with no ctxweb code in the
agent.

Each span that records a model call (:func:`compaction.telemetry.captured_call`) becomes one turn
of its conversation (:func:`compaction.telemetry.session_key`), in start-time order within an
export. Its ``turn_id`` is its span id (hex), so an exporter's retry, or the same span exported
twice, stores nothing new. Other spans (tools, agents, HTTP calls) are accepted and ignored; a
span that cannot be read is rejected with its reason, and the others still land.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.core.cache import cache

from compaction.errors import FormatError
from compaction.messages import parse
from compaction.telemetry import (
    CapturedCall,
    Span,
    SpanEvent,
    captured_call,
    langfuse_call,
    langfuse_usage,
    session_key,
)
from compaction.usage import normalize_usage
from ctxweb.accounts.models import Project
from ctxweb.contexts.models import Session, Turn
from ctxweb.contexts.services.ingest import (
    SessionFormatConflict,
    TurnConflict,
    session_id_problem,
    turn_ingest,
)

#: A captured turn's ``turn_id`` is its span id, as the contract says (docs/design.md §7).
TURN_ID_PREFIX = ""
#: The ``source`` of sessions captured from telemetry.
SOURCE = "otel"


@dataclass
class CaptureResult:
    """What an export did: spans read, model calls found, turns stored (``created``) or already
    there (``existing``), the sessions they went to, and each rejected span with its reason."""

    spans: int = 0
    calls: int = 0
    created: int = 0
    existing: int = 0
    sessions: list[str] = field(default_factory=list)
    rejected: list[tuple[str, str]] = field(default_factory=list)


def spans_ingest(*, project: Project, spans: Sequence[Span]) -> CaptureResult:
    """Store the model calls ``spans`` record as turns of ``project``'s sessions."""
    result = CaptureResult(spans=len(spans))
    calls: list[tuple[str, int, Span, CapturedCall]] = []
    for span in spans:
        try:
            call = captured_call(span)
        except FormatError as error:
            result.rejected.append((span.span_id, f"{error.path}: {error.reason}"))
            continue
        if call is None:
            continue
        session = session_key(span)
        problem = session_id_problem(session)
        if problem is not None:
            result.rejected.append((span.span_id, f"session id {session[:60]!r} {problem}"))
            continue
        calls.append((session, span.start, span, call))
    result.calls = len(calls)
    calls.sort(key=lambda item: (item[0], item[1], item[2].span_id))
    for session, _, span, call in calls:
        try:
            context = parse(call.format, call.request)
            stored = turn_ingest(
                project=project,
                external_id=session,
                context=context,
                model=call.model,
                response=call.response or None,
                usage=call.usage,
                turn_id=f"{TURN_ID_PREFIX}{span.span_id}",
                body={"format": call.format, "request": call.request, "usage": call.usage},
                unknown=call.unknown,
                source=SOURCE,
                occurred_at=span.start or None,  # nanoseconds since the epoch; 0: not said
            )
        except FormatError as error:
            result.rejected.append((span.span_id, f"{error.path}: {error.reason}"))
            continue
        except (SessionFormatConflict, TurnConflict) as error:
            result.rejected.append((span.span_id, str(error) or "the span was stored another way"))
            continue
        if stored.created:
            result.created += 1
        else:
            result.existing += 1
        if session not in result.sessions:
            result.sessions.append(session)
    return result


# --- Langfuse's batch ingestion (POST /api/public/ingestion) ------------------------------------

#: A Langfuse generation's ``turn_id``: this and the generation's id.
LANGFUSE_TURN_PREFIX = "lf:"
#: The longest generation id: what the ``turn_id`` column holds (200 characters) after the prefix.
GENERATION_ID_MAX = 200 - len(LANGFUSE_TURN_PREFIX)
#: How long a trace's session is remembered for generations that arrive in later batches.
TRACE_SESSION_SECONDS = 24 * 3600
#: How long the usage of an update that came before its generation's create is kept for it.
PENDING_USAGE_SECONDS = 24 * 3600
#: Event types that are accepted and have nothing for ctxweb.
IGNORED_TYPES = frozenset({"span-create", "span-update", "event-create", "score-create", "sdk-log"})
GENERATION_TYPES = frozenset({"generation-create", "generation-update"})
OBSERVATION_TYPES = frozenset({"observation-create", "observation-update"})


@dataclass(frozen=True)
class EventOutcome:
    """One batch event's answer, as Langfuse gives it: ``status`` 201, or an error status and
    message."""

    id: str
    status: int
    message: str = ""


def _cache_key(kind: str, project: Project, langfuse_id: str) -> str:
    # hashed: a Langfuse id is any text, and a cache key holds no spaces or control characters
    digest = hashlib.sha256(langfuse_id.encode("utf-8", "surrogatepass")).hexdigest()
    return f"ctxweb:lf-{kind}:{project.pk}:{digest}"


def _trace_session_key(project: Project, trace_id: str) -> str:
    return _cache_key("trace", project, trace_id)


def _pending_usage_key(project: Project, generation_id: str) -> str:
    return _cache_key("usage", project, generation_id)


def langfuse_batch_ingest(*, project: Project, batch: Sequence[Any]) -> list[EventOutcome]:
    """Store the model calls a Langfuse ingestion batch records; one outcome per event.

    ``trace-create`` events name their trace's session (remembered for a day, for generations
    in later batches); ``generation-create`` and ``-update`` events are merged by the
    generation's id, and a generation with its ``input`` becomes a turn of its trace's session
    (else of the trace, by its id) with ``turn_id`` ``lf:<id>``. Usage that arrives in a later
    update is reported on the stored turn; an update that comes before its create (batches are
    sent concurrently) has its usage kept for a day and reported when the create arrives. Spans,
    events, scores and SDK logs are accepted and ignored; an event that cannot be read (usage
    that is no token count included) gets its own error, and the rest still land.
    """
    outcomes: dict[int, EventOutcome] = {}
    traces: dict[str, str] = {}
    generations: dict[str, dict[str, Any]] = {}
    members: dict[str, list[int]] = {}
    for position, event in enumerate(batch):
        event_id = str(event.get("id", "")) if isinstance(event, dict) else ""
        if not isinstance(event, dict) or not event_id or not isinstance(event.get("body"), dict):
            outcomes[position] = EventOutcome(
                event_id, 400, "an event needs an id, a type and a body"
            )
            continue
        kind, body = event.get("type"), event["body"]
        if kind == "trace-create":
            named = body.get("sessionId")
            unnamable = session_id_problem(named) if isinstance(named, str) else None
            if unnamable is not None:  # not remembered: its generations go to the trace's id
                outcomes[position] = EventOutcome(event_id, 400, f"body.sessionId: {unnamable}")
                continue
            if isinstance(body.get("id"), str) and isinstance(named, str):
                traces[body["id"]] = named
            outcomes[position] = EventOutcome(event_id, 201)
        elif kind in GENERATION_TYPES or (
            kind in OBSERVATION_TYPES and str(body.get("type", "")).upper() == "GENERATION"
        ):
            if not isinstance(body.get("id"), str) or not body["id"]:
                outcomes[position] = EventOutcome(
                    event_id, 400, "body.id: a generation needs an id"
                )
                continue
            if len(body["id"]) > GENERATION_ID_MAX:  # it is the turn's turn_id, after a prefix
                outcomes[position] = EventOutcome(
                    event_id, 400, f"body.id: at most {GENERATION_ID_MAX} characters"
                )
                continue
            merged = generations.setdefault(body["id"], {})
            merged.update({k: v for k, v in body.items() if v is not None})
            members.setdefault(body["id"], []).append(position)
            outcomes[position] = EventOutcome(event_id, 201)
        elif kind in IGNORED_TYPES or kind in OBSERVATION_TYPES:
            outcomes[position] = EventOutcome(event_id, 201)
        else:
            outcomes[position] = EventOutcome(
                event_id, 400, f"type: unsupported event type {kind!r}"
            )
    for trace_id, session in traces.items():
        cache.set(_trace_session_key(project, trace_id), session, TRACE_SESSION_SECONDS)
    for generation_id, body in generations.items():
        problem = _generation_ingest(project, generation_id, body, traces)
        if problem is not None:
            status, message = problem
            for position in members[generation_id]:
                outcomes[position] = EventOutcome(outcomes[position].id, status, message)
    return [outcomes[i] for i in range(len(batch))]


def _generation_ingest(
    project: Project, generation_id: str, body: dict[str, Any], traces: dict[str, str]
) -> tuple[int, str] | None:
    """Store or complete one merged generation; (status, message) when it cannot be."""
    turn_id = f"{LANGFUSE_TURN_PREFIX}{generation_id}"
    usage_path = "usageDetails" if body.get("usageDetails") else "usage"
    usage_details = body.get(usage_path)
    if "input" not in body:  # an update: its usage, for the generation's turn
        try:
            usage = _langfuse_usage(usage_details, usage_path)
        except FormatError as error:
            return 400, f"{error.path}: {error.reason}"
        if usage is not None:
            _usage_for_turn(project, generation_id, turn_id, usage)
        return None
    trace_id = str(body.get("traceId") or "")
    session = traces.get(trace_id) or (
        cache.get(_trace_session_key(project, trace_id)) if trace_id else None
    )
    session = session or trace_id or f"langfuse-{generation_id}"
    problem = session_id_problem(session)
    if problem is not None:
        return 400, f"session id {session[:60]!r} {problem}"
    try:
        call = langfuse_call(
            input=body.get("input"),
            output=body.get("output"),
            model=body.get("model") if isinstance(body.get("model"), str) else None,
            usage=usage_details,
            parameters=body.get("modelParameters"),
            usage_path=usage_path,
        )
        stored = turn_ingest(
            project=project,
            external_id=session,
            context=parse(call.format, call.request),
            model=call.model,
            response=call.response or None,
            usage=call.usage,
            turn_id=turn_id,
            body={"format": call.format, "request": call.request},
            unknown=call.unknown,
            source="langfuse",
            occurred_at=body.get("startTime"),
        )
    except FormatError as error:
        return 400, f"{error.path}: {error.reason}"
    except (SessionFormatConflict, TurnConflict) as error:
        return 409, str(error) or "the generation was stored with another input"
    if not stored.created and call.usage:
        _report_usage(stored.turn, normalize_usage(call.usage))
    pending = _pending_usage_key(project, generation_id)
    early = cache.get(pending)
    if early is not None:  # an update that came before this create
        _report_usage(stored.turn, early)
        cache.delete(pending)
    return None


def _langfuse_usage(details: Any, path: str) -> dict[str, int] | None:
    """An update's usage, normalized and held to the bounds every usage is held to
    (:func:`compaction.usage.normalize_usage`); None when it reports none."""
    usage = langfuse_usage(details, path)
    return normalize_usage(usage) if usage else None


def _usage_for_turn(
    project: Project, generation_id: str, turn_id: str, usage: Mapping[str, int]
) -> None:
    """Report ``usage`` on the generation's turn, or keep it for the turn's create: kept first,
    then looked for again, so that a create stored meanwhile by another request finds it or is
    found (reporting twice changes nothing: a turn that has usage keeps it)."""
    turn = Turn.objects.filter(session__project=project, turn_id=turn_id).first()
    if turn is None:
        pending = _pending_usage_key(project, generation_id)
        cache.set(pending, dict(usage), PENDING_USAGE_SECONDS)
        turn = Turn.objects.filter(session__project=project, turn_id=turn_id).first()
        if turn is None:
            return
        cache.delete(pending)
    _report_usage(turn, usage)


def _report_usage(turn: Any, usage: Mapping[str, int]) -> None:
    """Give a stored turn the usage its provider reported later (a Langfuse update): what it
    reported beyond what ctxweb counted becomes ``unattributed``. A turn that has usage keeps it."""
    if turn.reported_input_tokens is not None:
        return
    reported = usage["input_tokens"]
    unattributed = max(0, reported - turn.counted_tokens)
    total = turn.counted_tokens + unattributed
    regions = {**turn.regions, "unattributed": unattributed}
    Turn.objects.filter(pk=turn.pk, reported_input_tokens__isnull=True).update(
        usage=dict(usage), reported_input_tokens=reported, regions=regions, total_tokens=total
    )
    session = Session.objects.get(pk=turn.session_id)
    if session.turn_count == turn.index + 1:  # the latest turn: the session's fill follows it
        reserve = turn.max_output_tokens or session.output_reserve
        usable = max(1, turn.context_window - reserve)
        Session.objects.filter(pk=session.pk).update(
            last_total_tokens=total, last_fill=total / usable
        )


__all__ = [
    "SOURCE",
    "TURN_ID_PREFIX",
    "CaptureResult",
    "EventOutcome",
    "Span",
    "SpanEvent",
    "langfuse_batch_ingest",
    "spans_ingest",
]
