"""Tool outputs and message shapes as the strategies see them, across formats.

OpenAI Chat carries a tool output as a ``tool`` message; Anthropic as a ``tool_result`` part inside
a ``user`` message. The seeds were written for the first shape: here a "tool message" is either,
and a "real user message" is a user message that is not only tool results.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from compaction.messages.model import Message, Part, TextPart, ToolResultPart
from compaction.turns import is_tool_result_message, is_user_turn_start

if TYPE_CHECKING:
    from compaction.strategies.base import Draft

__all__ = [
    "call_ids",
    "is_real_user",
    "is_tool_message",
    "result_ids",
    "set_system_block",
    "system_block",
    "tool_outputs",
    "with_result_text",
]


def is_tool_message(message: Message) -> bool:
    """True for a ``tool`` message, or a user message carrying tool results (see
    :func:`compaction.turns.is_tool_result_message`)."""
    return is_tool_result_message(message)


def is_real_user(message: Message) -> bool:
    """True for a ``user`` message that starts a user turn (not a tool-result message)."""
    return is_user_turn_start(message)


def tool_outputs(messages: Sequence[Message]) -> Iterator[tuple[int, int, ToolResultPart]]:
    """Every tool result as ``(message index, part index, part)``, in order."""
    for i, message in enumerate(messages):
        for j, part in enumerate(message.parts):
            if isinstance(part, ToolResultPart):
                yield i, j, part


def with_result_text(message: Message, part_index: int, text: str) -> Message:
    """``message`` with the tool result at ``part_index`` holding only ``text``."""
    part = message.parts[part_index]
    assert isinstance(part, ToolResultPart)
    first_text = next((p for p in part.content if isinstance(p, TextPart)), None)
    new_text = TextPart(text, first_text.extra) if first_text is not None else TextPart(text)
    parts = list(message.parts)
    parts[part_index] = replace(part, content=(new_text,))
    return replace(message, parts=tuple(parts))


def call_ids(message: Message) -> list[str]:
    """The ids of the tool calls ``message`` makes."""
    return [c.id for c in message.tool_calls]


def result_ids(message: Message) -> list[str]:
    """The tool-call ids of the results ``message`` carries."""
    return [r.tool_call_id for r in message.tool_results]


def _system_position(draft: Draft) -> int | None:
    for i, message in enumerate(draft.messages):
        if message.role in ("system", "developer"):
            return i
        break
    return None


def system_block(draft: Draft, prefix: str) -> str | None:
    """The text after ``prefix`` in the system prompt part that starts with it, if any."""
    parts: tuple[Part, ...] = draft.system
    position = _system_position(draft)
    if not parts and position is not None:
        parts = draft.messages[position].parts
    for part in parts:
        if isinstance(part, TextPart) and part.text.startswith(prefix):
            return part.text[len(prefix) :]
    return None


def set_system_block(draft: Draft, prefix: str, body: str, detail: str) -> None:
    """Put ``prefix + body`` into the system prompt, replacing a part that starts with ``prefix``.

    The top-level system prompt is used when the context has one (or its format keeps the system
    prompt out of the messages); otherwise the leading system message, created when missing.
    """
    block = TextPart(prefix + body)
    position = _system_position(draft)
    if draft.system or (position is None and draft.context.format != "openai-chat"):
        kept = [
            p for p in draft.system if not (isinstance(p, TextPart) and p.text.startswith(prefix))
        ]
        draft.set_system((*kept, block), detail)
        return
    if position is None:
        draft.insert(0, Message("system", (block,)), detail)
        return
    message = draft.messages[position]
    kept = [p for p in message.parts if not (isinstance(p, TextPart) and p.text.startswith(prefix))]
    draft.replace_message(
        position, replace(message, parts=(*kept, block)), "insert-summary", detail
    )
