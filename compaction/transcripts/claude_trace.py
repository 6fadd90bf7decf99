"""claude-trace logs: raw Anthropic Messages API traffic, one request/response pair per line.

Each line is ``{"request": {"url", "body": {...}}, "response": {"status_code", "body": {...}} ,
"logged_at"}``; a streamed response has ``body: null`` and its server-sent events in
``body_raw``, from which the message and usage are rebuilt. Lines whose request has no
``messages`` (other endpoints) are skipped.

Each line is one turn whose context is exactly the request body, parsed by the Anthropic adapter
(so system prompt and tools are known). Grouping: a request joins the conversation whose latest
request's messages are a strict prefix of its own (compared without ``cache_control``, which
Claude Code moves from call to call; from the second message on when the conversation has at
least three, since Claude Code's summarization request rewrites the first); otherwise it starts a
new one. Conversations of a single
call (quota checks, title and topic generation, file-path extraction) are gathered, in order,
into one ``<name>:misc`` session; the others are ``<name>:1``, ``<name>:2``... A conversation
that opens with Claude Code's compact summary carries a ``compaction`` event on its first turn.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from compaction.errors import FormatError
from compaction.messages import anthropic
from compaction.messages.model import Context, Message, TextPart

from ._dialects import anthropic_message, anthropic_usage
from ._records import as_dict, iter_jsonl, opt_str
from .model import ImportedSession, ImportedTurn

__all__ = ["parse"]

_SUMMARY_PREFIX = "This session is being continued from a previous conversation"


@dataclass
class _Conversation:
    keys: tuple[str, ...]
    turns: list[ImportedTurn] = field(default_factory=list)
    models: list[str] = field(default_factory=list)


def parse(data: bytes | str, *, name: str = "") -> list[ImportedSession]:
    """Parse a claude-trace JSONL into conversations plus one ``misc`` session.

    Example:
        >>> line = ('{"request": {"body": {"model": "m", "max_tokens": 1, "messages": '
        ...         '[{"role": "user", "content": "quota"}]}}, "response": {"body": {"content": '
        ...         '[{"type": "text", "text": "A"}], '
        ...         '"usage": {"input_tokens": 8, "output_tokens": 1}}}}')
        >>> [(s.external_id, len(s.turns)) for s in parse(line, name="t.jsonl")]
        [('t:misc', 1)]
    """
    conversations: list[_Conversation] = []
    for number, record in iter_jsonl(data):
        request = as_dict(record.get("request"), f"line {number}.request")
        body = as_dict(request.get("body"), f"line {number}.request.body")
        if "messages" not in body:
            continue
        try:
            context = anthropic.parse(body)
        except FormatError as exc:
            raise FormatError(f"line {number}.request.body.{exc.path}", exc.reason) from None
        response, usage = _response(record.get("response"), number)
        keys = tuple(_key(m) for m in body["messages"])
        turn = ImportedTurn(
            context=context,
            response=response,
            usage=usage,
            events=_events(context, record),
            timestamp=opt_str(record, "logged_at"),
        )
        conversation = _extended(conversations, keys)
        if conversation is None:
            conversation = _Conversation(keys)
            conversations.append(conversation)
        elif conversation.turns:
            turn = replace(turn, context=_shared(conversation.turns[-1].context, context))
        conversation.keys = keys
        conversation.turns.append(turn)
        model = opt_str(body, "model")
        if model:
            conversation.models.append(model)
    return _sessions(conversations, name)


def _shared(previous: Context, context: Context) -> Context:
    """``context`` reusing the previous turn's message objects wherever they are equal."""
    old = previous.messages
    messages = tuple(
        old[i] if i < len(old) and old[i] == message else message
        for i, message in enumerate(context.messages)
    )
    return replace(context, messages=messages)


def _key(message: Any) -> str:
    """A message's identity across requests: its JSON without ``cache_control``."""

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k != "cache_control"}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return json.dumps(strip(message), sort_keys=True, ensure_ascii=False)


def _extended(conversations: list[_Conversation], keys: tuple[str, ...]) -> _Conversation | None:
    best: _Conversation | None = None
    for conversation in reversed(conversations):
        size = len(conversation.keys)
        # Claude Code's summarization request drops the context it injects into the first
        # message; the rest of the conversation is unchanged, so it still extends it.
        extends = size < len(keys) and (
            keys[:size] == conversation.keys
            or (size >= 3 and keys[1:size] == conversation.keys[1:])
        )
        if extends and (best is None or size > len(best.keys)):
            best = conversation
    return best


def _events(context: Context, record: Mapping[str, Any]) -> tuple[Mapping[str, Any], ...]:
    first = context.messages[0] if context.messages else None
    if (
        first is not None
        and first.role == "user"
        and any(isinstance(p, TextPart) and p.text.startswith(_SUMMARY_PREFIX) for p in first.parts)
    ):
        return (
            {
                "type": "compaction",
                "source": "claude-trace",
                "trigger": None,
                "pre_tokens": None,
                "timestamp": record.get("logged_at"),
            },
        )
    return ()


def _response(response: Any, number: int) -> tuple[tuple[Message, ...], dict[str, int] | None]:
    if not isinstance(response, dict):
        return (), None
    body = response.get("body")
    if not isinstance(body, dict) and isinstance(response.get("body_raw"), str):
        body = _from_events(response["body_raw"])
    if not isinstance(body, dict) or body.get("type") == "error":
        return (), None
    usage = anthropic_usage(body.get("usage"))
    content = body.get("content")
    if not isinstance(content, list):
        return (), usage
    message = anthropic_message(
        {"role": "assistant", "content": content}, f"line {number}.response.body"
    )
    return (message,), usage


def _from_events(raw: str) -> dict[str, Any] | None:
    """The final message of a server-sent event stream (``message_start`` ... ``message_stop``)."""
    message: dict[str, Any] | None = None
    blocks: dict[int, dict[str, Any]] = {}
    partial: dict[int, str] = {}
    for line in raw.splitlines():
        if not line.startswith("data:"):
            continue
        try:
            event = json.loads(line[5:])
        except (ValueError, RecursionError):
            continue
        if not isinstance(event, dict):
            continue
        kind = event.get("type")
        if kind == "message_start" and isinstance(event.get("message"), dict):
            message = dict(event["message"])
            message["usage"] = dict(message.get("usage") or {})
        elif kind == "content_block_start" and isinstance(event.get("content_block"), dict):
            blocks[int(event.get("index", len(blocks)))] = dict(event["content_block"])
        elif kind == "content_block_delta" and isinstance(event.get("delta"), dict):
            index = int(event.get("index", 0))
            block = blocks.setdefault(index, {"type": "text", "text": ""})
            delta = event["delta"]
            for field_name, key in (("text", "text"), ("thinking", "thinking")):
                if isinstance(delta.get(key), str):
                    block[field_name] = block.get(field_name, "") + delta[key]
            if isinstance(delta.get("signature"), str):
                block["signature"] = block.get("signature", "") + delta["signature"]
            if isinstance(delta.get("partial_json"), str):
                partial[index] = partial.get(index, "") + delta["partial_json"]
        elif kind == "message_delta" and message is not None:
            if isinstance(event.get("usage"), dict):
                message["usage"].update({k: v for k, v in event["usage"].items() if v is not None})
            if isinstance(event.get("delta"), dict):
                message.update(event["delta"])
    if message is None:
        return None
    for index, text in partial.items():
        if index in blocks:
            try:
                blocks[index]["input"] = json.loads(text) if text.strip() else {}
            except (ValueError, RecursionError):
                blocks[index]["input"] = {}
    message["content"] = [blocks[i] for i in sorted(blocks)]
    return message


def _sessions(conversations: list[_Conversation], name: str) -> list[ImportedSession]:
    stem = name.rsplit("/", 1)[-1].removesuffix(".jsonl") or "claude-trace"
    sessions: list[ImportedSession] = []
    misc: list[ImportedTurn] = []
    misc_models: set[str] = set()
    for conversation in conversations:
        if len(conversation.turns) == 1:
            misc.extend(conversation.turns)
            misc_models.update(conversation.models)
            continue
        sessions.append(
            ImportedSession(
                external_id=f"{stem}:{len(sessions) + 1}",
                model=conversation.models[0] if conversation.models else None,
                format="anthropic-messages",
                turns=tuple(conversation.turns),
                source="anthropic-messages",
                metadata={},
            )
        )
    if misc:
        sessions.append(
            ImportedSession(
                external_id=f"{stem}:misc",
                model=next(iter(misc_models)) if len(misc_models) == 1 else None,
                format="anthropic-messages",
                turns=tuple(misc),
                source="anthropic-messages",
                metadata={"misc": True},
            )
        )
    return sessions
