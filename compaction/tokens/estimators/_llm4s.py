"""LLM4S's token counter (``docs/seed-strategies.md`` §3.1): its tokenizer on each message's
content, tool calls and tool call id, plus fixed per-message, per-call and per-conversation
overheads.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable

from compaction.messages.model import Message
from compaction.tokens.estimators._seed_messages import _json_value, _seed_messages

#: LLM4S's per-message overhead, in tokens.
LLM4S_MESSAGE_OVERHEAD = 4
#: LLM4S's per-tool-call overhead, in tokens.
LLM4S_TOOL_CALL_OVERHEAD = 10
#: LLM4S's per-conversation overhead, in tokens.
LLM4S_CONVERSATION_OVERHEAD = 10


def _compact_json(arguments: str) -> str:
    """The arguments as ujson's ``render()`` writes them: compact, key order kept."""
    value = _json_value(arguments)
    if isinstance(value, str) and value == arguments:
        return arguments
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def llm4s_message_tokens(message: Message, count: Callable[[str], int]) -> int:
    """LLM4S's ``ConversationTokenCounter.countMessage``.

    ``count(content) + 4``; per tool call ``count(name) + count(rendered arguments JSON) + 10``;
    a tool message adds ``count("tool_call_id:" + id)``. Images and reasoning are not counted.

    Args:
        message: the message.
        count: text to tokens (LLM4S's tokenizer; its tests use ``ceil(len/4)``).

    Example:
        >>> from compaction.messages.model import TextPart
        >>> llm4s_message_tokens(Message(role="user", parts=(TextPart("hello"),)),
        ...                      lambda s: -(-len(s) // 4))
        6
    """
    total = 0
    for seed in _seed_messages(message):
        tokens = count("\n".join(seed.texts)) + LLM4S_MESSAGE_OVERHEAD
        for call in seed.tool_calls:
            tokens += count(call.name) + count(_compact_json(call.arguments))
            tokens += LLM4S_TOOL_CALL_OVERHEAD
        if seed.tool_call_id is not None:
            tokens += count("tool_call_id:" + seed.tool_call_id)
        total += tokens
    return total


def llm4s_conversation_tokens(messages: Iterable[Message], count: Callable[[str], int]) -> int:
    """LLM4S's ``countConversation``: Σ :func:`llm4s_message_tokens` + 10."""
    return sum(llm4s_message_tokens(m, count) for m in messages) + LLM4S_CONVERSATION_OVERHEAD
