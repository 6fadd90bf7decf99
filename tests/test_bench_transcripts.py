"""The real transcripts kept with the benchmarks (``bench/transcripts``) and the fixed split of
every transcript into a tuning half and a held-out half (``bench/heldout.py``)."""

from __future__ import annotations

import hashlib
import lzma
import re
import sys
from pathlib import Path

import pytest

from compaction.transcripts import parse_transcript

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))

from heldout import HELD_OUT, LOCAL, TUNING, half_of, transcript_files  # noqa: E402

LOCAL_FILES = sorted(LOCAL.rglob("*.xz"))


def _recorded_hashes() -> dict[str, str]:
    """Each file's sha256 as the folder's README records it (of the repository's blob)."""
    readme = (LOCAL / "README.md").read_text()
    rows = re.findall(r"^\| `([^`]+\.xz)` \|.*sha256 `([0-9a-f]{64})`", readme, re.MULTILINE)
    return dict(rows)


def test_each_kept_transcript_is_the_blob_its_readme_names() -> None:
    recorded = _recorded_hashes()
    assert LOCAL_FILES
    assert sorted(recorded) == sorted(str(p.relative_to(LOCAL)) for p in LOCAL_FILES)
    for path in LOCAL_FILES:
        data = lzma.decompress(path.read_bytes())
        assert hashlib.sha256(data).hexdigest() == recorded[str(path.relative_to(LOCAL))]


@pytest.mark.parametrize("path", LOCAL_FILES, ids=lambda p: p.name)
def test_each_kept_transcript_reads_as_openai_chat_sessions_with_tool_calls(path: Path) -> None:
    sessions = parse_transcript(lzma.decompress(path.read_bytes()), name=path.name[:-3])
    assert len(sessions) >= 100
    calls = results = 0
    for session in sessions:
        assert session.turns, session.external_id
        messages = session.turns[-1].context.messages
        calls += sum(len(m.tool_calls) for m in messages)
        results += sum(len(m.tool_results) for m in messages)
    # hundreds of tool calls (the README counts them in the raw file), each one answered
    assert calls == results >= 700


def test_the_kept_transcripts_are_in_the_tuning_half() -> None:
    for path in LOCAL_FILES:
        assert half_of(str(path.relative_to(LOCAL)).removesuffix(".xz")) == "tuning"
    assert not set(TUNING) & set(HELD_OUT)


def test_every_transcript_is_in_one_half_and_every_listed_one_exists(transcripts: Path) -> None:
    found = [relative for relative, _ in transcript_files(transcripts)]
    assert len(found) == len(set(found))
    for relative in found:
        half_of(relative)  # refuses (SystemExit) a file in neither half
    assert sorted(found) == sorted([*TUNING, *HELD_OUT])
