"""Spans in, turns out: model calls captured by an agent's own instrumentation (OpenTelemetry
GenAI, OpenInference, OpenLLMetry, the Langfuse SDK) stored as turns, with no ctxweb code in the
agent.

Each span that records a model call (:func:`compaction.telemetry.captured_call`) becomes one turn
of its conversation (:func:`compaction.telemetry.session_key`), in start-time order within an
export. Its ``turn_id`` is ``span:<span id>``, so an exporter's retry, or the same span exported
twice, stores nothing new. Other spans (tools, agents, HTTP calls) are accepted and ignored; a
span that cannot be read is rejected with its reason, and the others still land.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from compaction.errors import FormatError
from compaction.messages import parse
from compaction.telemetry import CapturedCall, Span, SpanEvent, captured_call, session_key
from ctxweb.accounts.models import Project
from ctxweb.contexts.services.ingest import (
    SessionFormatConflict,
    TurnConflict,
    session_id_problem,
    turn_ingest,
)

#: A captured turn's ``turn_id``: this and its span id.
TURN_ID_PREFIX = "span:"
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


__all__ = ["SOURCE", "TURN_ID_PREFIX", "CaptureResult", "Span", "SpanEvent", "spans_ingest"]
