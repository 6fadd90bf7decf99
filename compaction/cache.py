"""What a plan costs the provider's prompt cache: the leading tokens that stay byte-identical,
the tokens to write to the cache again, and the next call's price before and after.

Providers cache a request's prefix: OpenAI automatically (cache writes at the input price),
Anthropic up to each ``cache_control`` breakpoint (writes at 1.25× the input price). A plan that
edits message ``k`` leaves messages ``0..k-1`` (after the system prompt and tools) byte for byte
as they were, so the next call reads them from the cache and writes the rest again.

:data:`PRICES` holds list prices in USD per million tokens, as published on the date in
:data:`PRICES_DATE`; callers pass their own table to override it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from compaction.messages.model import Context
from compaction.regions import context_regions
from compaction.tokens import TokenCounter

__all__ = [
    "PRICES",
    "PRICES_DATE",
    "CacheImpact",
    "ModelPrice",
    "cache_impact",
    "call_cost",
    "last_breakpoint",
    "prefix_messages",
    "price_for",
]


@dataclass(frozen=True)
class ModelPrice:
    """USD per million input tokens: uncached, written to the cache, read from the cache."""

    input: float
    cache_write: float
    cache_read: float


#: When :data:`PRICES` was read from the providers' pricing pages.
PRICES_DATE = "2025-11-01"

#: List prices by model-name prefix (the longest matching prefix wins).
PRICES: Mapping[str, ModelPrice] = {
    "gpt-5-nano": ModelPrice(0.05, 0.05, 0.005),
    "gpt-5-mini": ModelPrice(0.25, 0.25, 0.025),
    "gpt-5": ModelPrice(1.25, 1.25, 0.125),
    "gpt-4.1-nano": ModelPrice(0.10, 0.10, 0.025),
    "gpt-4.1-mini": ModelPrice(0.40, 0.40, 0.10),
    "gpt-4.1": ModelPrice(2.00, 2.00, 0.50),
    "gpt-4o-mini": ModelPrice(0.15, 0.15, 0.075),
    "gpt-4o": ModelPrice(2.50, 2.50, 1.25),
    "o4-mini": ModelPrice(1.10, 1.10, 0.275),
    "o3": ModelPrice(2.00, 2.00, 0.50),
    "claude-opus-4-5": ModelPrice(5.00, 6.25, 0.50),
    "claude-opus-4": ModelPrice(15.00, 18.75, 1.50),
    "claude-sonnet-4": ModelPrice(3.00, 3.75, 0.30),
    "claude-3-7-sonnet": ModelPrice(3.00, 3.75, 0.30),
    "claude-3-5-sonnet": ModelPrice(3.00, 3.75, 0.30),
    "claude-haiku-4-5": ModelPrice(1.00, 1.25, 0.10),
    "claude-3-5-haiku": ModelPrice(0.80, 1.00, 0.08),
}


def price_for(
    model: str | None, table: Mapping[str, ModelPrice] = PRICES
) -> tuple[str, ModelPrice] | None:
    """The table entry for ``model`` (its longest matching prefix, provider prefix removed),
    or None.

    Example:
        >>> price_for("openai/gpt-4o-2024-08-06")[0]
        'gpt-4o'
    """
    if not model:
        return None
    name = model.strip().lower().rsplit("/", 1)[-1]
    matches = [key for key in table if name.startswith(key.lower())]
    if not matches:
        return None
    key = max(matches, key=len)
    return key, table[key]


def _has_breakpoint(value: Any) -> bool:
    extra = getattr(value, "extra", None)
    if isinstance(extra, Mapping) and "cache_control" in extra:
        return True
    return any(_has_breakpoint(p) for p in getattr(value, "content", ()) or ())


def last_breakpoint(context: Context) -> int:
    """The index of the last message carrying an Anthropic ``cache_control`` breakpoint (on
    the message or any of its parts); -1 when there is none."""
    for i in range(len(context.messages) - 1, -1, -1):
        message = context.messages[i]
        if _has_breakpoint(message) or any(_has_breakpoint(p) for p in message.parts):
            return i
    return -1


def prefix_messages(before: Context, after: Context) -> int:
    """How many leading messages ``after`` shares with ``before`` byte for byte (0 when the
    system prompt or tools changed: they come first in every provider's request)."""
    if before.system != after.system or before.tools != after.tools:
        return 0
    shared = 0
    for old, new in zip(before.messages, after.messages, strict=False):
        if old != new:
            break
        shared += 1
    return shared


@dataclass(frozen=True)
class CacheImpact:
    """A plan's effect on the prompt cache, in tokens."""

    before_tokens: int
    after_tokens: int
    prefix_messages: int
    #: leading tokens of the context that stay byte-identical (still served from the cache)
    prefix_tokens: int
    #: tokens the next call writes to the cache again (the context after the kept prefix)
    rewrite_tokens: int


def cache_impact(
    before: Context,
    after: Context,
    counter: TokenCounter,
    *,
    totals: tuple[int, int] | None = None,
) -> CacheImpact:
    """How much of ``before``'s cached prefix ``after`` keeps, counted with ``counter``;
    ``totals`` are the two contexts' tokens when the caller has them (a plan does), so that
    they are not counted again."""
    shared = prefix_messages(before, after)
    if totals is None:
        totals = (
            int(context_regions(before, counter).total),
            int(context_regions(after, counter).total),
        )
    before_total, after_total = totals
    if shared == len(after.messages):
        prefix = after_total
    elif shared == 0 and (
        before.system != after.system
        or before.tools != after.tools
        or not after.system + after.tools
    ):
        prefix = 0
    else:
        prefix = int(
            context_regions(replace(after, messages=after.messages[:shared]), counter).total
        )
    prefix = min(prefix, after_total)
    return CacheImpact(before_total, after_total, shared, prefix, after_total - prefix)


def call_cost(impact: CacheImpact, price: ModelPrice) -> tuple[float, float]:
    """The next call's input cost in USD (before, after the plan): before, the whole context
    is read from the cache the previous call warmed; after, the kept prefix is read and the
    rest written again."""
    before = impact.before_tokens * price.cache_read / 1e6
    after = (
        impact.prefix_tokens * price.cache_read + impact.rewrite_tokens * price.cache_write
    ) / 1e6
    return before, after
