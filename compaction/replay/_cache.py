"""The prompt cache of one call, by OpenAI's rule or Anthropic's (see :mod:`compaction.replay`)."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Literal, TypeAlias

CacheRule: TypeAlias = Literal["openai", "anthropic", "anthropic-end"]
#: ``anthropic-end`` is Anthropic's rule with a breakpoint taken at the end of every request, as
#: Claude Code marks its requests: for records that kept no ``cache_control`` (its session files).
CACHE_RULES: tuple[CacheRule, ...] = ("openai", "anthropic", "anthropic-end")

#: OpenAI caches a prompt's prefix from this many tokens on...
OPENAI_MIN_PREFIX = 1024
#: ...in steps of this many tokens.
OPENAI_STEP = 128


def openai_cached(prefix: int) -> int:
    """The tokens OpenAI reads from its cache when ``prefix`` leading tokens are as last time.

    Example:
        >>> openai_cached(1023), openai_cached(1024), openai_cached(1300), openai_cached(1408)
        (0, 1024, 1280, 1408)
    """
    if prefix < OPENAI_MIN_PREFIX:
        return 0
    return OPENAI_MIN_PREFIX + (prefix - OPENAI_MIN_PREFIX) // OPENAI_STEP * OPENAI_STEP


def anthropic_cached(
    *, shared: int, breakpoints: Sequence[int], previous: Sequence[int]
) -> tuple[int, int]:
    """Tokens (read, written) by Anthropic's cache for a call whose breakpoints end at the token
    positions ``breakpoints`` (ascending), sharing ``shared`` leading tokens with the previous
    call, whose breakpoints ended at ``previous`` (ascending).

    Read: the longest prefix the previous call cached (one of its breakpoints) within the shared
    prefix and not past this call's last breakpoint (whose lookback finds it). Written: the rest
    through this call's last breakpoint.

    Example:
        >>> anthropic_cached(shared=5000, breakpoints=[800, 5200], previous=[800, 4900])
        (4900, 300)
        >>> anthropic_cached(shared=5000, breakpoints=[], previous=[800, 4900])
        (0, 0)
    """
    if not breakpoints:
        return 0, 0
    last = breakpoints[-1]
    limit = min(shared, last)
    at = bisect.bisect_right(previous, limit)
    read = previous[at - 1] if at else 0
    return read, max(0, last - read)
