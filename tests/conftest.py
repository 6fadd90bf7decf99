"""Fixtures shared by every test: where the real agent transcripts are."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.transcripts import MISSING, find_transcripts


@pytest.fixture
def transcripts() -> Path:
    """The real transcripts folder; skips with a reason when it is absent (a user's clone).

    Under ``CI=true`` a missing folder is a failure, never a skip.
    """
    found = find_transcripts()
    if found is None or not found.is_dir():
        if os.environ.get("CI") == "true":
            pytest.fail(MISSING)
        pytest.skip(MISSING)
    return found
