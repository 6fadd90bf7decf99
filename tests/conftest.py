"""Fixtures shared by every test: where the real agent transcripts are."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def find_transcripts() -> Path | None:
    """The shared transcripts folder: ``$CTXWEB_TRANSCRIPTS``, else ``shared/data/transcripts``
    beside the project's root or one of its parents."""
    if os.environ.get("CTXWEB_TRANSCRIPTS"):
        return Path(os.environ["CTXWEB_TRANSCRIPTS"])
    for parent in Path(__file__).resolve().parents[1:]:
        candidate = parent / "shared" / "data" / "transcripts"
        if candidate.is_dir():
            return candidate
    return None


TRANSCRIPTS = find_transcripts()


@pytest.fixture
def transcripts() -> Path:
    """The real transcripts folder; skips with a reason when it is absent (a user's clone).

    Under ``CI=true`` a missing folder is a failure, never a skip.
    """
    if TRANSCRIPTS is None or not TRANSCRIPTS.is_dir():
        reason = (
            "real transcripts not found: ../shared/data/transcripts is absent"
            " (set CTXWEB_TRANSCRIPTS)"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return TRANSCRIPTS
