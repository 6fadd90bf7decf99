"""LLM4S's semantic blocks (``docs/seed-strategies.md`` §3.4): what counts as a "turn" in LLM4S.

A user message opens a block that the next assistant message closes; tool messages join the open
block. :func:`semantic_blocks` groups a conversation into :class:`Block` s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from compaction.messages.model import Message
from compaction.strategies.outputs import is_tool_message


@dataclass(frozen=True)
class Block:
    """One LLM4S semantic block: its type and the indexes of its messages."""

    type: str
    indexes: tuple[int, ...]


def _kind(message: Message) -> str:
    if is_tool_message(message):
        return "tool"
    if message.role == "user":
        return "user"
    return "assistant"  # assistant, and system/developer treated like it


def semantic_blocks(messages: Sequence[Message]) -> list[Block]:
    """LLM4S's ``groupIntoSemanticBlocks``: a user message opens a pair that the next assistant
    (or system) message closes; a tool message joins the open block or opens a standalone one.

    Example:
        >>> from compaction.messages.model import Message, TextPart
        >>> [b.type for b in semantic_blocks([Message("assistant", (TextPart("hi"),))])]
        ['StandaloneAssistant']
    """
    blocks: list[Block] = []
    current: list[int] = []
    current_type = ""
    expecting = False
    for i, message in enumerate(messages):
        kind = _kind(message)
        if kind == "user":
            if current:
                blocks.append(Block(current_type, tuple(current)))
            current, current_type, expecting = [i], "UserAssistantPair", True
        elif kind == "assistant":
            if current and expecting:
                blocks.append(Block(current_type, (*current, i)))
                current, current_type, expecting = [], "", False
            else:
                if current:
                    blocks.append(Block(current_type, tuple(current)))
                current, current_type, expecting = [i], "StandaloneAssistant", False
        elif current:
            current.append(i)
        else:
            current, current_type, expecting = [i], "StandaloneTool", False
    if current:
        blocks.append(Block(current_type, tuple(current)))
    return blocks
