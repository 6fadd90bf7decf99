"""picoclaw's token estimators (``docs/seed-strategies.md`` §2.2): runes×2/5 of a message with a
per-message overhead and a flat cost per media item, and the same for tool definitions.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from compaction.messages.model import Message, ToolDefinition
from compaction.tokens.estimators._seed_messages import _seed_messages, _SeedMessage, _utf8_len

#: picoclaw's per-message overhead, in characters, added before the 2/5 conversion.
PICOCLAW_MESSAGE_OVERHEAD_CHARS = 12
#: picoclaw's flat cost per media item, added after the conversion.
PICOCLAW_MEDIA_TOKENS = 256
_PICOCLAW_SYSTEM_PART_OVERHEAD = 20
_PICOCLAW_TOOL_OVERHEAD = 20
_PICOCLAW_SYSTEM_SEPARATOR = "\n\n---\n\n"  # 7 characters, the "7 chars per separator"


def _picoclaw_one(seed: _SeedMessage) -> int:
    texts = seed.texts
    if seed.role in ("system", "developer") and len(texts) > 1:
        # A system prompt of several blocks is picoclaw's SystemParts; its Content is the blocks
        # joined, and the larger of the two representations counts.
        chars = len(_PICOCLAW_SYSTEM_SEPARATOR.join(texts))
        chars = max(chars, sum(len(t) for t in texts) + _PICOCLAW_SYSTEM_PART_OVERHEAD * len(texts))
    else:
        chars = len("\n".join(texts))
    chars += len(seed.reasoning)
    for call in seed.tool_calls:
        chars += _utf8_len(call.id) + len("function") + _utf8_len(call.name)
        chars += _utf8_len(call.arguments)
    if seed.tool_call_id:
        chars += _utf8_len(seed.tool_call_id)
    chars += PICOCLAW_MESSAGE_OVERHEAD_CHARS
    return chars * 2 // 5 + PICOCLAW_MEDIA_TOKENS * len(seed.media)


def picoclaw_message_tokens(message: Message) -> int:
    """picoclaw's ``EstimateMessageTokens``.

    ``chars`` = runes of the content (for a system message of several text parts, the larger of
    the joined content and Σ runes + 20 per part) + runes of the reasoning + per tool call the
    bytes of ID, ``"function"``, name and arguments + the bytes of the tool message's
    ``ToolCallID`` + 12; tokens = ``chars*2//5`` + 256 per media item.

    Example:
        >>> from compaction.messages.model import TextPart
        >>> picoclaw_message_tokens(Message(role="user", parts=(TextPart("hello"),)))
        6
    """
    return sum(_picoclaw_one(seed) for seed in _seed_messages(message))


def _go_json(value: Any) -> str:
    """JSON as Go's ``json.Marshal`` writes a ``map[string]any``: sorted keys, no spaces, UTF-8,
    HTML characters escaped, integral floats without a fraction."""

    def normalize(item: Any) -> Any:
        if isinstance(item, Mapping):
            return {str(k): normalize(v) for k, v in item.items()}
        if isinstance(item, list | tuple):
            return [normalize(v) for v in item]
        if isinstance(item, float) and item.is_integer() and abs(item) < 1e21:
            return int(item)
        return item

    text = json.dumps(normalize(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    for char, escaped in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(char, escaped)
    return text


def picoclaw_tooldefs_tokens(tools: Sequence[ToolDefinition]) -> int:
    """picoclaw's ``EstimateToolDefsTokens``: ``Σ(bytes(name) + bytes(description) +
    bytes(json(parameters)) + 20) * 2 // 5``; no tools gives 0.

    Empty ``parameters`` stand for Go's nil map, which adds nothing.

    Example:
        >>> tool = ToolDefinition("test_tool", "A test tool", {"type": "object"})
        >>> picoclaw_tooldefs_tokens([tool])
        22
    """
    if not tools:
        return 0
    chars = 0
    for tool in tools:
        chars += _utf8_len(tool.name) + _utf8_len(tool.description) + _PICOCLAW_TOOL_OVERHEAD
        if tool.parameters:
            chars += _utf8_len(_go_json(tool.parameters))
    return chars * 2 // 5
