"""LLM4S's ``ConversationTokenCounter`` (``docs/seed-strategies.md`` §3.1), message by message.

:func:`conversation_tokens` counts a conversation as LLM4S does; :class:`_MessageTokens` counts
each message once per run, and an item is a message with its position in the strategy's draft.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TypeAlias

from compaction.messages.model import Message
from compaction.tokens.estimators import LLM4S_CONVERSATION_OVERHEAD, llm4s_message_tokens

Count: TypeAlias = Callable[[str], int]
#: A message and its position in the strategy's draft (``None`` for a message LLM4S created).
_Item: TypeAlias = tuple[Message, int | None]


def conversation_tokens(messages: Sequence[Message], count: Count) -> int:
    """LLM4S's ``countConversation``: each message's tokens plus 10.

    Example:
        >>> from compaction.messages.model import Message, TextPart
        >>> conversation_tokens([Message("user", (TextPart("Hello, how are you?"),))],
        ...                     lambda s: -(-len(s) // 4))
        19
    """
    return sum(llm4s_message_tokens(m, count) for m in messages) + LLM4S_CONVERSATION_OVERHEAD


class _MessageTokens:
    """LLM4S's tokens of each message (:func:`llm4s_message_tokens` with ``count``), each message
    counted once.

    The pipeline recounts the whole conversation before and after every step, and most messages
    go through all four steps unchanged. Messages are frozen, so a count is kept by identity; the
    message is held beside it, so its id cannot be reused while the memo lives (one run).
    """

    def __init__(self, count: Count) -> None:
        self.count = count
        self._known: dict[int, tuple[Message, int]] = {}

    def __call__(self, message: Message) -> int:
        known = self._known.get(id(message))
        if known is not None and known[0] is message:
            return known[1]
        tokens = llm4s_message_tokens(message, self.count)
        self._known[id(message)] = (message, tokens)
        return tokens

    def conversation(self, messages: Iterable[Message]) -> int:
        """:func:`conversation_tokens` of ``messages``."""
        return sum(self(m) for m in messages) + LLM4S_CONVERSATION_OVERHEAD


def _items_tokens(items: Sequence[_Item], tokens: _MessageTokens) -> int:
    return tokens.conversation(m for m, _ in items)
