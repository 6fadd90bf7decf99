"""BaseAgent's token estimator (``docs/seed-strategies.md`` §1.2): floor(chars/4) per text, a flat
cost per image, and a per-message overhead.
"""

from __future__ import annotations

from compaction.messages.model import MediaPart, Message, TextPart, ToolCallPart
from compaction.tokens.estimators._seed_messages import _seed_messages

#: BaseAgent's per-message role overhead.
BASEAGENT_MESSAGE_OVERHEAD = 4
#: BaseAgent's flat cost of an ``image_url`` content part.
BASEAGENT_IMAGE_TOKENS = 1000


def baseagent_text_tokens(text: str | None) -> int:
    """BaseAgent's ``estimate_tokens``: ``floor(len(text)/4)`` in code points; None or "" gives 0.

    Example:
        >>> baseagent_text_tokens("abcdefgh")
        2
    """
    return len(text) // 4 if text else 0


def baseagent_message_tokens(message: Message) -> int:
    """BaseAgent's per-message estimate.

    Each text part ``floor(len/4)`` (a string content is a single text part), **1000** per image
    part (BaseAgent's ``image_url``; audio and files are other part types and count 0), per tool
    call ``floor(len(name)/4) + floor(len(arguments)/4)``, plus **4**. Reasoning and
    ``tool_call_id`` are not counted.

    Example:
        >>> baseagent_message_tokens(Message(role="user", parts=(TextPart("abcdefgh"),)))
        6
    """
    total = 0
    for seed in _seed_messages(message):
        tokens = BASEAGENT_MESSAGE_OVERHEAD
        for part in seed.parts:
            if isinstance(part, TextPart):
                tokens += baseagent_text_tokens(part.text)
            elif isinstance(part, MediaPart) and part.media == "image":
                tokens += BASEAGENT_IMAGE_TOKENS
            elif isinstance(part, ToolCallPart):
                tokens += baseagent_text_tokens(part.name) + baseagent_text_tokens(part.arguments)
        total += tokens
    return total
