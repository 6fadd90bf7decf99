"""Codex's token estimator (``docs/seed-strategies.md`` §1b): ceil(UTF-8 bytes/4), no overhead."""

from __future__ import annotations

from compaction.messages.model import Message
from compaction.tokens.estimators._seed_messages import _seed_messages, _utf8_len


def codex_approx_tokens(text: str) -> int:
    """Codex's ``approx_token_count``: ``ceil(utf8_bytes/4)``.

    Example:
        >>> codex_approx_tokens("héllo")  # 6 bytes
        2
    """
    return -(-_utf8_len(text) // 4)


def codex_message_tokens(message: Message) -> int:
    """Codex's estimate of one message: ``ceil(bytes/4)`` of all its text, no overhead.

    The text is every text part, readable reasoning, tool call name and arguments, and tool result
    text, in bytes summed; image items are ignored, as Codex's text conversion drops them.
    """
    size = 0
    for seed in _seed_messages(message):
        size += sum(_utf8_len(t) for t in seed.texts) + _utf8_len(seed.reasoning)
        size += sum(_utf8_len(c.name) + _utf8_len(c.arguments) for c in seed.tool_calls)
    return -(-size // 4)
