"""What a transcript parses into: sessions of turns, one turn per model call.

A transcript (a Claude Code session file, a Codex rollout, a SWE-agent trajectory...) records a
conversation, not the requests that carried it. The parsers rebuild, for every model call, the
:class:`~compaction.messages.model.Context` the agent would have sent, the response it got and the
usage the provider reported, and say what the file does not record (``unknown``) rather than
inventing it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from compaction.messages.model import Context, Message

__all__ = ["TRANSCRIPT_FORMATS", "ImportedSession", "ImportedTurn"]

TRANSCRIPT_FORMATS: tuple[str, ...] = (
    "claude-code",
    "codex",
    "swe-agent",
    "openhands",
    "openai-chat",
    "anthropic-messages",
)
"""The transcript formats :func:`compaction.transcripts.parse_transcript` reads."""


def _mapping() -> Mapping[str, Any]:
    return {}


@dataclass(frozen=True)
class ImportedTurn:
    """One model call rebuilt from a transcript.

    ``context`` is the request as the agent would have sent it; consecutive turns of a session share
    their :class:`Message` objects. ``response`` is what the model answered (empty when the file
    does not say). ``usage`` is the provider's report normalized so that ``input_tokens``
    includes cache reads and writes, with ``output_tokens``, ``cache_read_tokens`` and
    ``cache_write_tokens``; ``None`` when the file has none. ``unknown`` names the parts of the
    request the format does not record (``"system"``, ``"tools"``): they were sent but cannot be
    shown. ``events`` carries
    markers such as ``{"type": "compaction", "source": "claude-code", ...}`` seen just before this
    call.
    """

    context: Context
    response: tuple[Message, ...] = ()
    usage: Mapping[str, int] | None = None
    unknown: frozenset[str] = frozenset()
    events: tuple[Mapping[str, Any], ...] = ()
    timestamp: str | None = None


@dataclass(frozen=True)
class ImportedSession:
    """One agent conversation: its turns in call order.

    ``external_id`` is the transcript's own id (a sub-agent's session gets its parent's id with a
    suffix). ``format`` is the request format of every turn's context (``"anthropic-messages"``,
    ``"openai-chat"`` or ``"openai-responses"``); ``source`` the transcript format it came from.
    """

    external_id: str
    model: str | None
    format: str
    turns: tuple[ImportedTurn, ...]
    source: str
    metadata: Mapping[str, Any] = field(default_factory=_mapping)
