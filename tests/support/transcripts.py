"""Where the real agent transcripts are (``../shared/data/transcripts``): tests and benchmarks."""

from __future__ import annotations

import os
from pathlib import Path

MISSING = (
    "real transcripts not found: ../shared/data/transcripts is absent (set CTXWEB_TRANSCRIPTS)"
)


def find_transcripts() -> Path | None:
    """The shared transcripts folder: ``$CTXWEB_TRANSCRIPTS``, else ``shared/data/transcripts``
    beside the project's root or one of its parents."""
    if os.environ.get("CTXWEB_TRANSCRIPTS"):
        return Path(os.environ["CTXWEB_TRANSCRIPTS"])
    for parent in Path(__file__).resolve().parents[2:]:
        candidate = parent / "shared" / "data" / "transcripts"
        if candidate.is_dir():
            return candidate
    return None
