"""Counted input tokens (cl100k, approximate for Claude) versus the usage Anthropic reported.

For each of the 64 requests in ``anthropic-messages/claude-trace-traffic.jsonl``: parse the
request body, count its regions as ingestion does, and divide by the reported input tokens
(``input_tokens + cache_read_input_tokens + cache_creation_input_tokens``; streamed responses
carry it in their ``message_start`` event, which the claude-trace parser reads).

Run: ``.venv/bin/python bench/token_ratio.py [--write]`` (``--write`` updates docs/benchmarks.md).
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from compaction.regions import context_regions  # noqa: E402
from compaction.tokens import TokenCounter, get_tokenizer  # noqa: E402
from compaction.transcripts import parse_transcript  # noqa: E402
from tests.support.transcripts import find_transcripts  # noqa: E402


def main() -> int:
    folder = find_transcripts()
    if folder is None:
        print("transcripts not found (../shared/data/transcripts)", file=sys.stderr)
        return 1
    counter = TokenCounter(get_tokenizer("cl100k_base"))
    path = folder / "anthropic-messages" / "claude-trace-traffic.jsonl"
    rows: list[tuple[int, int | None]] = []
    for session in parse_transcript(path.read_bytes(), name=path.name):
        for turn in session.turns:
            counted = context_regions(turn.context, counter).counted
            reported = turn.usage["input_tokens"] if turn.usage else None
            rows.append((counted, reported))
    lines = rows
    ratios = sorted(c / r for c, r in rows if r)
    summary = (
        f"{len(lines)} requests, {len(ratios)} with reported usage; counted/reported "
        f"min {ratios[0]:.3f}, median {statistics.median(ratios):.3f}, max {ratios[-1]:.3f}"
    )
    print(summary)
    for counted, reported in rows:
        print(f"  counted {counted:>7}  reported {reported if reported is not None else '-':>7}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
