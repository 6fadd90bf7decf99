"""Message builders for the strategy tests (OpenAI Chat shapes in the normalized model)."""

from __future__ import annotations

from compaction.messages.model import (
    Context,
    Message,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)


def sys(text: str) -> Message:
    return Message("system", (TextPart(text),))


def u(text: str) -> Message:
    return Message("user", (TextPart(text),))


def a(text: str) -> Message:
    return Message("assistant", (TextPart(text),))


def atc(
    *ids: str, text: str = "", name: str | None = None, args: str = '{"key":"value"}'
) -> Message:
    parts: list[TextPart | ToolCallPart] = [TextPart(text)] if text else []
    parts += [ToolCallPart(i, name or f"tool_{i}", args) for i in ids]
    return Message("assistant", tuple(parts))


def t(call_id: str, text: str = "result") -> Message:
    return Message("tool", (ToolResultPart(call_id, (TextPart(text),)),))


def ctx(
    *messages: Message, fmt: str = "openai-chat", max_output_tokens: int | None = None
) -> Context:
    return Context(fmt, tuple(messages), max_output_tokens=max_output_tokens)  # type: ignore[arg-type]
