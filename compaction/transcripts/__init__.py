"""Transcript import: agent session files turned into sessions of turns, one turn per model call.

Pure parsers: they take the bytes of a file already read (no file access, no Django) and rebuild,
for each model call the transcript records, the request the agent would have sent, the response
and the usage, marking what the format does not record as unknown. Supported formats: Claude Code
session JSONL, Codex rollouts, SWE-agent trajectories, OpenHands outputs, OpenAI Chat
conversations (tau-bench included) and claude-trace Anthropic Messages traffic.

Example:
    >>> data = b'[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]'
    >>> [session] = parse_transcript(data, name="chat.json")
    >>> session.external_id, session.format, len(session.turns)
    ('chat', 'openai-chat', 1)
"""

from __future__ import annotations

from collections.abc import Callable

from compaction.errors import FormatError

from . import claude_code, claude_trace, codex, openai_chat, openhands, swe_agent
from .detect import detect_format
from .model import TRANSCRIPT_FORMATS, ImportedSession, ImportedTurn

__all__ = [
    "TRANSCRIPT_FORMATS",
    "ImportedSession",
    "ImportedTurn",
    "detect_format",
    "parse_transcript",
]

_PARSERS: dict[str, Callable[..., list[ImportedSession]]] = {
    "claude-code": claude_code.parse,
    "codex": codex.parse,
    "swe-agent": swe_agent.parse,
    "openhands": openhands.parse,
    "openai-chat": openai_chat.parse,
    "anthropic-messages": claude_trace.parse,
}


def parse_transcript(data: bytes, *, format: str = "auto", name: str = "") -> list[ImportedSession]:
    """Parse a transcript file's content into its sessions.

    Args:
        data: the file's bytes (UTF-8).
        format: one of :data:`TRANSCRIPT_FORMATS`, or ``"auto"`` to detect it from the content.
        name: the file name: a detection hint and the session id when the file has none.

    Raises:
        FormatError: unknown format (path ``format``) or malformed content (path naming the line
            or field, e.g. ``line 3: not JSON``).
    """
    if format == "auto":
        format = detect_format(name, data)
    parser = _PARSERS.get(format)
    if parser is None:
        expected = ", ".join(TRANSCRIPT_FORMATS)
        raise FormatError(
            "format", f"unknown format {format!r}; expected auto or one of {expected}"
        )
    return parser(data, name=name)
