"""Our messages as the seeds see them: OpenAI-chat-shaped seed messages, one per message's
non-result parts plus one ``tool`` message per tool result, and the byte and JSON helpers the
estimators share.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from compaction.messages.model import (
    MediaPart,
    Message,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)


@dataclass(frozen=True)
class _SeedMessage:
    """One OpenAI-chat-shaped message as a seed sees it; ``parts`` hold no tool results."""

    role: str
    parts: tuple[Part, ...]
    name: str | None = None
    tool_call_id: str | None = None

    @property
    def texts(self) -> list[str]:
        return [p.text for p in self.parts if isinstance(p, TextPart)]

    @property
    def reasoning(self) -> str:
        return "\n".join(
            p.text for p in self.parts if isinstance(p, ReasoningPart) and not p.redacted
        )

    @property
    def tool_calls(self) -> list[ToolCallPart]:
        return [p for p in self.parts if isinstance(p, ToolCallPart)]

    @property
    def media(self) -> list[MediaPart]:
        return [p for p in self.parts if isinstance(p, MediaPart)]


def _seed_messages(message: Message) -> list[_SeedMessage]:
    """``message`` as seed messages: the non-result parts, then one tool message per result."""
    rest = tuple(p for p in message.parts if not isinstance(p, ToolResultPart))
    results = message.tool_results
    seeds: list[_SeedMessage] = []
    if rest or not results:
        seeds.append(_SeedMessage(message.role, rest, message.name))
    for result in results:
        content = tuple(p for p in result.content if not isinstance(p, ToolResultPart))
        seeds.append(_SeedMessage("tool", content, message.name, result.tool_call_id))
    return seeds


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _json_value(arguments: str) -> Any:
    """The arguments' JSON value, or the raw string when they are not valid JSON."""
    try:
        return json.loads(arguments)
    except (ValueError, RecursionError):
        return arguments
