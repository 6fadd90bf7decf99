"""The process's token counters: one per encoding, sharing one content-hash cache.

Only services use this module; it is the one door from ctxweb into ``compaction.tokens``.
"""

from __future__ import annotations

from functools import cache

from compaction.tokens import TokenCache, TokenCounter, encoding_for_model, get_tokenizer

#: Every text counted in this process, keyed by content hash and encoding.
TOKEN_CACHE = TokenCache(maxsize=200_000)


@cache
def counter_for(encoding: str) -> TokenCounter:
    """The shared counter of ``encoding``."""
    return TokenCounter(get_tokenizer(encoding), cache=TOKEN_CACHE)


def encoding_for(model: str | None) -> tuple[str, bool]:
    """The encoding to count ``model`` with, and whether that count is approximate."""
    choice = encoding_for_model(model)
    return choice.encoding, choice.approximate
