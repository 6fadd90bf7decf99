"""A session out again: every turn's request as ingested, as JSON lines or as an OTLP JSON
export of OpenTelemetry GenAI spans (one per turn) that ctxweb's receiver, or any OTLP backend,
reads back. Streamed: a turn at a time, each distinct message parsed once."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

from compaction.messages import message_from_dict, render
from compaction.messages.model import Context, Message
from compaction.telemetry import gen_ai_attributes
from ctxweb.contexts.models import Session, Turn
from ctxweb.contexts.selectors.turns import _tools, messages_by_id

EXPORT_FORMATS = ("otlp-json", "jsonl")


def _turns(session: Session) -> Iterator[tuple[Turn, Context]]:
    """Each turn with the context it sent, rebuilt from the stored deltas in one pass."""
    ids: list[int] = []
    parsed: dict[int, Message] = {}
    system_cache: dict[int, tuple[Any, ...]] = {}
    turns = (
        Turn.objects.filter(session=session).select_related("system", "toolset").order_by("index")
    )
    for turn in turns.iterator(chunk_size=100):
        ids = ids[: turn.shared] + list(turn.tail)
        missing = set(ids) - parsed.keys()
        for pk, row in messages_by_id(ids=missing).items():
            parsed[pk] = message_from_dict(row.data)
        system: tuple[Any, ...] = ()
        if turn.system is not None:
            key = turn.system.pk
            if key not in system_cache:
                system_cache[key] = message_from_dict(turn.system.data).parts
            system = system_cache[key]
        yield (
            turn,
            Context(
                format=session.format,  # type: ignore[arg-type]
                messages=tuple(parsed[i] for i in ids),
                system=system,
                tools=_tools(turn.toolset),
                max_output_tokens=turn.max_output_tokens,
                extra=turn.request_extra,
            ),
        )


def session_export_jsonl(*, session: Session) -> Iterator[str]:
    """One line per turn: its index, ``turn_id``, when it was recorded and when its call
    happened (``occurred_at``: null when its source did not say), model, the request as ingested,
    the response and usage as reported, and ctxweb's counts."""
    for turn, context in _turns(session):
        line = {
            "session": session.external_id,
            "index": turn.index,
            "turn_id": turn.turn_id,
            "created_at": turn.created_at.isoformat(),
            "occurred_at": turn.occurred_at.isoformat() if turn.occurred_at else None,
            "model": session.model,
            "format": context.format,
            "request": render(context),
            "response": turn.response,
            "usage": turn.usage,
            "total_tokens": turn.total_tokens,
            "regions": turn.regions,
        }
        yield json.dumps(line, ensure_ascii=False) + "\n"


def _any_value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    return {"stringValue": str(value)}


def _hex(text: str, digits: int) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:digits]


def session_export_otlp(*, session: Session) -> Iterator[str]:
    """An OTLP JSON ``ExportTraceServiceRequest``: the session is one trace (resource attribute
    ``session.id``), each turn one span with OpenTelemetry GenAI attributes and the request as
    sent, in turn order, starting when its call happened (when it was recorded if its source did
    not say): read back by the receiver, the turns keep their dates."""
    resource = {
        "attributes": [
            {"key": "service.name", "value": _any_value("ctxweb-export")},
            {"key": "session.id", "value": _any_value(session.external_id)},
        ]
    }
    head = {"resource": resource, "scopeSpans": [{"scope": {"name": "ctxweb.export"}, "spans": []}]}
    opening = json.dumps({"resourceSpans": [head]}, ensure_ascii=False)
    # Stream the spans into the empty list: everything before it, the spans, everything after.
    before, after = opening.split('"spans": []', 1)
    yield before + '"spans": ['
    trace_id = _hex(f"ctxweb:{session.project_id}:{session.external_id}", 32)
    for n, (turn, context) in enumerate(_turns(session)):
        moment = turn.occurred_at or turn.created_at
        started = int(moment.timestamp()) * 1_000_000_000 + moment.microsecond * 1_000
        attributes = gen_ai_attributes(
            context,
            render(context),
            model=session.model or None,
            usage=turn.usage,
            response=turn.response,
        )
        attributes["gen_ai.conversation.id"] = session.external_id
        attributes["ctxweb.turn.index"] = turn.index
        span = {
            "traceId": trace_id,
            "spanId": _hex(f"{trace_id}:{turn.index}:{turn.pk}", 16),
            "name": f"chat {session.model or 'model'}",
            "kind": 3,
            "startTimeUnixNano": str(started),
            "endTimeUnixNano": str(started),
            "attributes": [{"key": k, "value": _any_value(v)} for k, v in attributes.items()],
        }
        yield ("," if n else "") + json.dumps(span, ensure_ascii=False)
    yield "]" + after
