"""Fixtures for the strategy tests: the cl100k counter."""

from __future__ import annotations

import pytest

from tests.support.messages import COUNTER, Counter


@pytest.fixture
def counter() -> Counter:
    return COUNTER
