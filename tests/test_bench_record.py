"""``bench/record.py`` writes a benchmark's section of docs/benchmarks.md: a re-run replaces the
section's table and keeps what people wrote under it (``bench/hostile.py --shape both`` used to
drop every experiment written below its table) and every other section."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import record  # noqa: E402

BEFORE = """# Benchmarks

Intro.

## Hostile load

`bench/hostile.py`, 2026-11-28, on an old machine.

What it measures.

| shape | measure |
|---|---|
| embedded | old figure |

**An experiment.** Its table:

| run | result |
|---|---|
| a | 1 |

The runs before.

## Ingest

| ingest | figure |
|---|---|
| kept | as it was |
"""

SECTION = """## Hostile load

`bench/hostile.py`, 2026-11-29, on a new machine.

What it measures.

| shape | measure |
|---|---|
| embedded | new figure |
"""


def test_a_rerun_replaces_the_table_and_keeps_the_notes_under_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = tmp_path / "benchmarks.md"
    docs.write_text(BEFORE)
    monkeypatch.setattr(record, "DOCS", docs)
    record.write_section("## Hostile load", SECTION)
    text = docs.read_text()
    assert "new figure" in text
    assert "old figure" not in text
    assert "2026-11-29, on a new machine" in text
    assert "old machine" not in text
    hostile = text.split("## Hostile load", 1)[1].split("## Ingest", 1)[0]
    assert hostile.index("new figure") < hostile.index("**An experiment.**")
    assert "| a | 1 |" in hostile
    assert "The runs before." in hostile
    assert text.endswith("## Ingest\n\n| ingest | figure |\n|---|---|\n| kept | as it was |\n")
    record.write_section("## Hostile load", SECTION)  # again: nothing doubled
    assert docs.read_text() == text


def test_a_first_run_adds_its_section(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    docs = tmp_path / "benchmarks.md"
    monkeypatch.setattr(record, "DOCS", docs)
    record.write_section("## Hostile load", SECTION)
    text = docs.read_text()
    assert text.startswith(record.INTRO)
    assert text.endswith(SECTION)
