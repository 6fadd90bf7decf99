"""Which transcript format a file holds, decided by its content; the file name only breaks ties.

JSON Lines files are recognised by the keys of their first records, JSON documents by their
top-level shape:

- ``claude-code``: records with ``sessionId`` / ``uuid``, or ``summary`` and
  ``file-history-snapshot`` records;
- ``codex``: ``{"type", "payload"}`` wrappers (``session_meta``, ``response_item``...) or the old
  bare layout (a session meta line, then Responses items);
- ``anthropic-messages``: claude-trace ``{"request", "response"}`` pairs;
- ``openhands``: one run per line with a ``history`` of events and ``instance_id``, ``issue``
  or ``metrics``;
- ``swe-agent``: one object with ``history`` and ``trajectory``;
- ``openai-chat``: a list of messages, ``{"messages": [...]}``, or a list of conversations
  (tau-bench's ``traj``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from compaction.errors import FormatError

from ._records import decode_text

__all__ = ["detect_format"]

_CLAUDE_CODE_TYPES = frozenset({"summary", "file-history-snapshot", "user", "assistant", "system"})
_CODEX_TYPES = frozenset(
    {"session_meta", "response_item", "event_msg", "turn_context", "compacted"}
)
_RESPONSES_ITEMS = frozenset(
    {"message", "reasoning", "function_call", "function_call_output", "local_shell_call"}
)
_HINTS = {
    ".traj": "swe-agent",
    ".json": "openai-chat",
}


def _record_format(record: Mapping[str, Any]) -> str | None:
    kind = record.get("type")
    request = record.get("request")
    if isinstance(request, dict) and ("response" in record or "body" in request):
        return "anthropic-messages"
    if "payload" in record and kind in _CODEX_TYPES:
        return "codex"
    if "sessionId" in record or ("uuid" in record and "parentUuid" in record):
        return "claude-code"
    if kind in ("summary", "file-history-snapshot") and (
        "leafUuid" in record or "snapshot" in record
    ):
        return "claude-code"
    if "history" in record and "trajectory" in record:
        return "swe-agent"
    if "history" in record and ({"instance_id", "issue", "metrics", "instruction"} & record.keys()):
        return "openhands"
    if "record_type" in record or (kind in _RESPONSES_ITEMS and "role" in record):
        return "codex"
    if {"id", "timestamp"} <= record.keys() and "instructions" in record:
        return "codex"
    return None


def _document_format(document: Any) -> str | None:
    if isinstance(document, dict):
        if "history" in document and "trajectory" in document:
            return "swe-agent"
        if isinstance(document.get("messages"), list):
            return "openai-chat"
        return _record_format(document)
    if isinstance(document, list) and document:
        first = document[0]
        if isinstance(first, list):
            return "openai-chat"
        if isinstance(first, dict) and ({"role", "messages", "traj"} & first.keys()):
            return "openai-chat"
    return None


def detect_format(name: str, data: bytes | str) -> str:
    """The transcript format of ``data``: one of
    :data:`~compaction.transcripts.model.TRANSCRIPT_FORMATS`.

    Args:
        name: the file name, used only when the content does not decide.
        data: the file's content.

    Raises:
        FormatError: ``format``, when the content matches no known transcript.

    Example:
        >>> detect_format("x.jsonl", b'{"type":"session_meta","payload":{"id":"r"}}')
        'codex'
    """
    text = decode_text(data)
    stripped = text.lstrip()
    if not stripped:
        raise FormatError("format", "the file is empty")
    decoder = json.JSONDecoder()
    lines = [line for line in stripped.splitlines()[:20] if line.strip()]
    first_records: list[dict[str, Any]] = []
    for line in lines[:5]:
        try:
            value = decoder.decode(line)
        except (ValueError, RecursionError):
            break
        if isinstance(value, dict):
            first_records.append(value)
    for record in first_records:
        found = _record_format(record)
        if found is not None:
            return found
    if stripped[0] in "[{":
        try:
            found = _document_format(json.loads(stripped))
        except (ValueError, RecursionError):
            found = None
        if found is not None:
            return found
    lowered = name.lower()
    for suffix, hinted in _HINTS.items():
        if lowered.endswith(suffix) and stripped[0] in "[{":
            return hinted
    raise FormatError(
        "format",
        "unrecognised transcript: expected Claude Code, Codex, SWE-agent, OpenHands, "
        "OpenAI Chat or claude-trace (Anthropic Messages) content",
    )
