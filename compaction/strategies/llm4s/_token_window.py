"""LLM4S's ``TokenWindow`` (``docs/seed-strategies.md`` §3.7): trim a conversation to its budget.

:func:`trim_to_budget` keeps a leading digest, then the newest messages that fit within
``budget × (1 − headroom)``; :func:`fits_in_budget` and :func:`usage_info` measure against it.
"""

from __future__ import annotations

from collections.abc import Sequence

from compaction.errors import StrategyError
from compaction.messages.model import Message
from compaction.strategies.llm4s._history_compressor import HISTORY_SUMMARY, _content
from compaction.strategies.llm4s._token_counter import (
    Count,
    _Item,
    _items_tokens,
    _MessageTokens,
    conversation_tokens,
)

DEFAULT_HEADROOM = 0.08


def _validate(n_messages: int, budget: int, headroom: float) -> None:
    if budget <= 0:
        raise StrategyError("budget", "Token budget must be positive")
    if headroom < 0 or headroom >= 1.0:
        raise StrategyError("headroom", "Headroom percent must be between 0.0 and 1.0")
    if n_messages == 0:
        raise StrategyError("conversation", "Cannot trim empty conversation")


def _trim_items(
    items: Sequence[_Item], tokens: _MessageTokens, budget: int, headroom: float
) -> tuple[list[_Item], bool]:
    _validate(len(items), budget, headroom)
    effective = int(budget * (1.0 - headroom))
    if _items_tokens(items, tokens) <= effective:
        return list(items), False
    pinned: list[_Item] = []
    rest = list(items)
    if HISTORY_SUMMARY in _content(items[0][0]):
        pinned, rest = [items[0]], rest[1:]
    remaining = effective
    if pinned:
        remaining = max(0, effective - tokens(pinned[0][0]))
    kept: list[_Item] = []
    used = 0
    for item in reversed(rest):
        size = tokens(item[0])
        if used + size > remaining:
            break
        kept.append(item)
        used += size
    return [*pinned, *reversed(kept)], True


def trim_to_budget(
    messages: Sequence[Message], count: Count, budget: int, headroom: float = DEFAULT_HEADROOM
) -> list[Message]:
    """LLM4S's ``TokenWindow.trimToBudget``.

    Raises :class:`StrategyError` (paths ``budget``, ``headroom``, ``conversation``) where LLM4S
    returns a ``ValidationError``, e.g. "Cannot trim empty conversation".

    Example:
        >>> trim_to_budget([], len, 100)
        Traceback (most recent call last):
        compaction.errors.StrategyError: conversation: Cannot trim empty conversation
    """
    items = [(m, i) for i, m in enumerate(messages)]
    out, _ = _trim_items(items, _MessageTokens(count), budget, headroom)
    return [m for m, _ in out]


def fits_in_budget(
    messages: Sequence[Message], count: Count, budget: int, headroom: float = DEFAULT_HEADROOM
) -> bool:
    """LLM4S's ``TokenWindow.fitsInBudget``: count ≤ ``int(budget × (1 − headroom))``."""
    return conversation_tokens(messages, count) <= int(budget * (1.0 - headroom))


def usage_info(messages: Sequence[Message], count: Count, budget: int) -> tuple[int, bool, int]:
    """LLM4S's ``getUsageInfo``: (current tokens, within budget, utilisation percent rounded)."""
    current = conversation_tokens(messages, count)
    percent = int(current / budget * 100 + 0.5) if budget > 0 else 0
    return current, current <= budget, percent
