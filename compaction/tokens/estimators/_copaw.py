"""CoPaw's token estimator (``docs/seed-strategies.md`` §5.2): UTF-8 bytes/3.75 per text, as
ReMe's ``stat_message`` counts a message's blocks, with no per-message overhead.
"""

from __future__ import annotations

import json

from compaction.messages.model import (
    MediaPart,
    Message,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from compaction.tokens._encodings import Tokenizer
from compaction.tokens.estimators._seed_messages import _json_value, _utf8_len

#: CoPaw's default bytes-per-token divisor.
COPAW_DIVISOR = 3.75
_COPAW_EMPTY_MEDIA = 10


def copaw_text_tokens(
    text: str, divisor: float = COPAW_DIVISOR, *, tokenizer: Tokenizer | None = None
) -> int:
    """CoPaw's ``CopawTokenCounter.count``: ``int(utf8_bytes/divisor + 0.5)``; "" gives 0.

    CoPaw takes the larger of that and its bundled Qwen tokenizer's count; ctxweb ships no Qwen
    tokenizer, so by default only the byte estimate is used (CoPaw's own path without a tokenizer).
    Pass ``tokenizer`` to take the larger of the two as CoPaw does.

    Example:
        >>> copaw_text_tokens("hello world")  # 11 bytes / 3.75 = 2.93
        3
    """
    if not text:
        return 0
    estimate = int(_utf8_len(text) / divisor + 0.5)
    if tokenizer is not None:
        estimate = max(estimate, tokenizer.count(text))
    return max(estimate, 0)


def _copaw_media(part: MediaPart) -> int:
    if part.data:
        return len(part.data) // 4
    if part.url:
        return copaw_text_tokens(part.url)
    return _COPAW_EMPTY_MEDIA


def copaw_message_tokens(message: Message) -> int:
    """ReMe's ``AsMsgHandler.stat_message`` with CoPaw's byte estimate: no per-message overhead.

    Text and thinking (readable reasoning) count their text; media with base64 ``len(data)//4``,
    by URL the tokens of the URL, 10 if empty; a tool call the tokens of ``name + json(input)``;
    a tool result its text parts and media as above.

    Example:
        >>> copaw_message_tokens(Message(role="user", parts=(TextPart("hello world"),)))
        3
    """
    total = 0
    for part in message.parts:
        if isinstance(part, TextPart):
            total += copaw_text_tokens(part.text)
        elif isinstance(part, ReasoningPart):
            total += copaw_text_tokens(part.text if not part.redacted else "")
        elif isinstance(part, MediaPart):
            total += _copaw_media(part)
        elif isinstance(part, ToolCallPart):
            arguments = json.dumps(_json_value(part.arguments), ensure_ascii=False)
            total += copaw_text_tokens(part.name + arguments)
        elif isinstance(part, ToolResultPart):
            for item in part.content:
                if isinstance(item, TextPart):
                    total += copaw_text_tokens(item.text)
                elif isinstance(item, MediaPart):
                    total += _copaw_media(item)
    return total
