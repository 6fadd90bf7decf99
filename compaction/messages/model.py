"""The normalized message model shared by every adapter, counter and strategy.

A request body of any supported format parses into a :class:`Context`: the system prompt, the tool
definitions, the ordered :class:`Message` list and the output reserve. Each message is a role plus
typed parts. Whatever a format carries that the model has no field for (``cache_control``,
``citations``, a provider's new keys) is kept in the ``extra`` mapping of the part, message or
context it came with, so rendering back to the same format reproduces the request exactly.
Keys of ``extra`` that start with ``ctxweb:`` are markers of how the request was shaped (a string
where a list was possible, a key that was absent); they are never rendered into a request, so a
strategy may use that prefix for flags of its own.

Every class is a frozen dataclass: strategies build new values, they never mutate.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

__all__ = [
    "FORMATS",
    "ROLES",
    "Context",
    "Format",
    "MediaPart",
    "Message",
    "Part",
    "ReasoningPart",
    "Role",
    "TextPart",
    "ToolCallPart",
    "ToolDefinition",
    "ToolResultPart",
]

Format: TypeAlias = Literal["openai-chat", "anthropic-messages", "openai-responses"]
FORMATS: tuple[Format, ...] = ("openai-chat", "anthropic-messages", "openai-responses")

Role: TypeAlias = Literal["system", "developer", "user", "assistant", "tool"]
ROLES: tuple[Role, ...] = ("system", "developer", "user", "assistant", "tool")

_EMPTY: Mapping[str, Any] = {}


def _extra() -> Mapping[str, Any]:
    return {}


@dataclass(frozen=True)
class TextPart:
    """Plain text; ``extra`` keeps format details (``cache_control``, the ``type`` spelling)."""

    text: str
    extra: Mapping[str, Any] = field(default_factory=_extra)
    kind: Literal["text"] = "text"


@dataclass(frozen=True)
class ReasoningPart:
    """Reasoning or thinking. ``redacted`` parts carry opaque ``data`` and no readable text."""

    text: str
    signature: str | None = None
    redacted: bool = False
    data: str | None = None
    extra: Mapping[str, Any] = field(default_factory=_extra)
    kind: Literal["reasoning"] = "reasoning"


@dataclass(frozen=True)
class MediaPart:
    """An image, audio clip or file, inline (base64 ``data``) or by ``url``; never read as text.

    ``width`` and ``height`` are set when the format or the client states them; estimators use
    them (see :mod:`compaction.tokens`).
    """

    media: Literal["image", "audio", "file"]
    media_type: str | None = None
    data: str | None = None
    url: str | None = None
    width: int | None = None
    height: int | None = None
    extra: Mapping[str, Any] = field(default_factory=_extra)
    kind: Literal["media"] = "media"


@dataclass(frozen=True)
class ToolCallPart:
    """A tool call: ``arguments`` is the argument JSON as text (Anthropic's ``input`` dumped)."""

    id: str
    name: str
    arguments: str
    extra: Mapping[str, Any] = field(default_factory=_extra)
    kind: Literal["tool_call"] = "tool_call"


@dataclass(frozen=True)
class ToolResultPart:
    """The output of one tool call, itself made of parts (text, media)."""

    tool_call_id: str
    content: tuple[Part, ...]
    is_error: bool = False
    extra: Mapping[str, Any] = field(default_factory=_extra)
    kind: Literal["tool_result"] = "tool_result"

    @property
    def text(self) -> str:
        """The result's text parts joined with newlines."""
        return "\n".join(p.text for p in self.content if isinstance(p, TextPart))


Part: TypeAlias = TextPart | ReasoningPart | MediaPart | ToolCallPart | ToolResultPart


@dataclass(frozen=True)
class Message:
    """One message: a role and its parts.

    ``name`` is OpenAI's participant name (or a tool message's ``name``). ``extra`` keeps every
    other key the format carried, including how the content was shaped (string or list), so that
    rendering is lossless.
    """

    role: Role
    parts: tuple[Part, ...]
    name: str | None = None
    extra: Mapping[str, Any] = field(default_factory=_extra)

    @property
    def text(self) -> str:
        """The message's plain text parts joined with newlines (no tool results, no reasoning)."""
        return "\n".join(p.text for p in self.parts if isinstance(p, TextPart))

    @property
    def tool_calls(self) -> tuple[ToolCallPart, ...]:
        """The tool calls this message makes, in order."""
        return tuple(p for p in self.parts if isinstance(p, ToolCallPart))

    @property
    def tool_results(self) -> tuple[ToolResultPart, ...]:
        """The tool results this message carries, in order."""
        return tuple(p for p in self.parts if isinstance(p, ToolResultPart))


@dataclass(frozen=True)
class ToolDefinition:
    """A tool the model may call: name, description and JSON-schema parameters.

    ``extra`` keeps the rest of the definition as sent (``type``, ``strict``, ``cache_control``...).
    """

    name: str
    description: str = ""
    parameters: Mapping[str, Any] = field(default_factory=_extra)
    extra: Mapping[str, Any] = field(default_factory=_extra)


@dataclass(frozen=True)
class Context:
    """Everything a model call sends that occupies the window.

    ``system`` is a top-level system prompt (Anthropic's ``system``, Responses' ``instructions``);
    OpenAI Chat keeps its system and developer messages in ``messages``. ``extra`` holds the other
    request keys (``model``, ``temperature``...), so the request renders back exactly.
    """

    format: Format
    messages: tuple[Message, ...]
    system: tuple[Part, ...] = ()
    tools: tuple[ToolDefinition, ...] = ()
    max_output_tokens: int | None = None
    extra: Mapping[str, Any] = field(default_factory=_extra)
