"""Codex CLI rollout files (``~/.codex/sessions/.../rollout-*.jsonl``).

Current layout: every line is ``{"timestamp", "type", "payload"}`` with ``type`` one of
``session_meta`` (id, cwd, ``instructions``, sometimes ``base_instructions``), ``response_item``
(an OpenAI Responses item: ``message``, ``reasoning``, ``function_call``,
``function_call_output``, ``local_shell_call``, ``custom_tool_call``...), ``event_msg`` (UI events;
``token_count`` carries ``info.last_token_usage``), ``turn_context`` (``model``) and ``compacted``
(``message`` and, in newer versions, ``replacement_history``). The old layout has no wrapper: the
first line is the session meta (``id``, ``timestamp``, ``instructions``), response items follow as
bare objects, and ``{"record_type": "state"}`` lines are skipped.

Rebuilding: the context of a model call is every response item so far. A call is a run of
consecutive model-produced items (assistant messages, reasoning, tool calls) after input items; its
response is that run. A ``token_count`` event belongs to the call it touches: Codex writes it after
the call's items in recent versions and just before them in older ones (0.40), so an event seen
while a call is open goes to that call, otherwise to the next one. ``compacted`` replaces the
history with ``replacement_history`` (or, when absent, with one user message holding the summary,
marked ``compacted`` in ``extra``) and gives the next call a ``compaction`` event. ``instructions``
and ``base_instructions`` become the system prompt when present; otherwise the system prompt is
unknown. Tool definitions are never recorded: always unknown.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from compaction.messages.model import Context, Message, Part, TextPart

from ._dialects import MODEL_ITEM_TYPES, openai_usage, responses_item
from ._records import iter_jsonl, opt_str
from .model import ImportedSession, ImportedTurn

__all__ = ["parse"]


@dataclass
class _Call:
    context: tuple[Message, ...]
    events: tuple[Mapping[str, Any], ...]
    model: str | None
    timestamp: str | None
    response: list[Message] = field(default_factory=list)
    usage: dict[str, int] | None = None


def _model_produced(item: Mapping[str, Any]) -> bool:
    kind = item.get("type", "message")
    if kind == "message":
        return item.get("role") == "assistant"
    return kind in MODEL_ITEM_TYPES


def _unwrap(record: dict[str, Any], number: int) -> tuple[str, Any]:
    """``(kind, payload)`` for both layouts."""
    if "payload" in record and isinstance(record.get("type"), str):
        return record["type"], record["payload"]
    if "record_type" in record:
        return "state", record
    if "type" in record:
        return "response_item", record
    if number == 1 or ("id" in record and "timestamp" in record):
        return "session_meta", record
    return "unknown", record


def parse(data: bytes | str, *, name: str = "") -> list[ImportedSession]:
    """Parse a Codex rollout into one session of ``openai-responses`` turns.

    Example:
        >>> rollout = "\\n".join([
        ...     '{"type":"session_meta","payload":{"id":"r1","instructions":null}}',
        ...     '{"type":"response_item","payload":{"type":"message","role":"user",'
        ...     '"content":[{"type":"input_text","text":"hi"}]}}',
        ...     '{"type":"response_item","payload":{"type":"message","role":"assistant",'
        ...     '"content":[{"type":"output_text","text":"hello"}]}}',
        ... ])
        >>> [(s.external_id, len(s.turns)) for s in parse(rollout)]
        [('r1', 1)]
    """
    items: tuple[Message, ...] = ()
    calls: list[_Call] = []
    open_call: _Call | None = None
    pending_usage: dict[str, int] | None = None
    pending_events: tuple[Mapping[str, Any], ...] = ()
    model: str | None = None
    session_id: str | None = None
    system: tuple[Part, ...] = ()
    metadata: dict[str, Any] = {}

    for number, record in iter_jsonl(data):
        kind, payload = _unwrap(record, number)
        if not isinstance(payload, dict):
            continue
        timestamp = opt_str(record, "timestamp")
        if kind == "session_meta":
            session_id = session_id or opt_str(payload, "id")
            system = _instructions(payload)
            metadata.update(
                {
                    k: payload[k]
                    for k in ("cwd", "originator", "cli_version")
                    if isinstance(payload.get(k), str)
                }
            )
        elif kind == "turn_context":
            model = opt_str(payload, "model") or model
        elif kind == "response_item":
            message = responses_item(payload, f"line {number}.payload")
            if _model_produced(payload):
                if open_call is None:
                    open_call = _Call(items, pending_events, model, timestamp, usage=pending_usage)
                    calls.append(open_call)
                    pending_usage, pending_events = None, ()
                open_call.response.append(message)
            else:
                open_call = None
            items = (*items, message)
        elif kind == "event_msg" and payload.get("type") == "token_count":
            info = payload.get("info")
            usage = openai_usage(info.get("last_token_usage")) if isinstance(info, dict) else None
            if usage is None:
                continue
            if open_call is not None:
                if open_call.usage is None:
                    open_call.usage = usage
            else:
                pending_usage = usage
        elif kind == "compacted":
            items = _compacted(payload, number)
            open_call = None
            pending_usage = None
            pending_events = (
                *pending_events,
                {
                    "type": "compaction",
                    "source": "codex",
                    "trigger": None,
                    "pre_tokens": None,
                    "timestamp": timestamp,
                },
            )

    unknown = frozenset({"tools"}) if system else frozenset({"system", "tools"})
    turns = tuple(
        ImportedTurn(
            context=Context(
                "openai-responses",
                call.context,
                system=system,
                extra={"model": call.model} if call.model else {},
            ),
            response=tuple(call.response),
            usage=call.usage,
            unknown=unknown,
            events=call.events,
            timestamp=call.timestamp,
        )
        for call in calls
    )
    if not turns:
        return []
    external_id = session_id or (name.rsplit("/", 1)[-1].removesuffix(".jsonl") or "codex")
    return [
        ImportedSession(
            external_id=external_id,
            model=model,
            format="openai-responses",
            turns=turns,
            source="codex",
            metadata=metadata,
        )
    ]


def _instructions(payload: Mapping[str, Any]) -> tuple[Part, ...]:
    parts: list[Part] = []
    base = payload.get("base_instructions")
    if isinstance(base, dict):
        base = base.get("text")
    if isinstance(base, str) and base:
        parts.append(TextPart(base))
    instructions = payload.get("instructions")
    if isinstance(instructions, str) and instructions:
        parts.append(TextPart(instructions))
    return tuple(parts)


def _compacted(payload: Mapping[str, Any], number: int) -> tuple[Message, ...]:
    history = payload.get("replacement_history")
    if isinstance(history, list):
        return tuple(
            responses_item(item, f"line {number}.payload.replacement_history.{i}")
            for i, item in enumerate(history)
        )
    summary = payload.get("message")
    text = summary if isinstance(summary, str) else ""
    return (Message("user", (TextPart(text),), extra={"compacted": True}),)
