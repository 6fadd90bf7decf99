"""Shared fixtures for the strategy tests: a cl100k counter and message builders."""

from __future__ import annotations

import pytest

from compaction.tokens import REQUEST_OVERHEAD, TokenCounter, get_tokenizer


class Counter(TokenCounter):
    """The cl100k counter with the request overhead :mod:`compaction.regions` reads from it."""

    REQUEST_OVERHEAD = REQUEST_OVERHEAD


COUNTER = Counter(get_tokenizer("cl100k_base"))


@pytest.fixture
def counter() -> Counter:
    return COUNTER
