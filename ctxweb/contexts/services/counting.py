"""The process's token counters: one per encoding, sharing one content-hash cache.

Only services use this module; it is the one door from ctxweb into ``compaction.tokens``.
Within a :func:`counting_scope` (a turn's ingest), :func:`counter_for` gives a scoped counter
per encoding, so the parts that storage counts (a new message's regions) and that attribution
counts again (its items, its tool uses) are hashed and looked up once.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cache

from compaction.tokens import TokenCache, TokenCounter, encoding_for_model, get_tokenizer

#: Every text counted in this process, keyed by content hash and encoding.
TOKEN_CACHE = TokenCache(maxsize=200_000)

#: The scoped counters of the job at hand, by encoding (None: no scope open).
_SCOPE: ContextVar[dict[str, TokenCounter] | None] = ContextVar("counting_scope", default=None)


@cache
def _shared(encoding: str) -> TokenCounter:
    return TokenCounter(get_tokenizer(encoding), cache=TOKEN_CACHE)


def counter_for(encoding: str) -> TokenCounter:
    """The shared counter of ``encoding``, or the scope's within a :func:`counting_scope`."""
    scope = _SCOPE.get()
    if scope is None:
        return _shared(encoding)
    counter = scope.get(encoding)
    if counter is None:
        counter = scope[encoding] = _shared(encoding).scoped()
    return counter


@contextmanager
def counting_scope(kept: dict[str, TokenCounter] | None = None) -> Iterator[None]:
    """Count one job (a turn's ingest) with scoped counters (:meth:`TokenCounter.scoped`): a
    text or message object counted again within it costs a dictionary lookup. What they encode
    is added to the shared counters' ``encoded_tokens`` when the scope closes; the memos go with
    it. Scopes do not nest: an inner one reuses the outer one's counters. ``kept``: the counters
    of a scope closed before (:func:`counting_kept`), for the rest of its job (a turn's
    attribution after its answer)."""
    if _SCOPE.get() is not None:
        yield
        return
    scope: dict[str, TokenCounter] = kept if kept is not None else {}
    token = _SCOPE.set(scope)
    try:
        yield
    finally:
        _SCOPE.reset(token)
        for encoding, counter in scope.items():
            _shared(encoding).encoded_tokens += counter.encoded_tokens
            counter.encoded_tokens = 0


def counting_kept() -> dict[str, TokenCounter] | None:
    """The counters of the open :func:`counting_scope` (None: none is open), to go on with after
    it closes."""
    return _SCOPE.get()


def encoding_for(model: str | None) -> tuple[str, bool]:
    """The encoding to count ``model`` with, and whether that count is approximate."""
    choice = encoding_for_model(model)
    return choice.encoding, choice.approximate
