"""What a turn's attribution costs beside counting its regions, on the largest real turns.

For the last turn of the largest session of each transcript folder (``../shared/data/transcripts``),
in one run: ``context_regions`` (what ingest's split costs, the baseline) and ``context_items``
(the attribution), each with a cold counter (a fresh cache: every text tokenized, as the first
view of a turn in a process) and a warm one (the same counter again: as a later view, or the
previous turn's texts when the page attributes two turns). Medians of 5 runs.

Run: ``.venv/bin/python bench/attribution.py``; the result goes into docs/benchmarks.md by hand.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from compaction.attribution import context_items  # noqa: E402
from compaction.messages.model import Context  # noqa: E402
from compaction.regions import context_regions  # noqa: E402
from compaction.tokens import TokenCounter, get_tokenizer  # noqa: E402
from compaction.transcripts import parse_transcript  # noqa: E402
from tests.support.transcripts import find_transcripts  # noqa: E402

RUNS = 5


def largest_turns(folder: Path) -> list[tuple[str, Context]]:
    """The last turn of each folder's largest session (by messages)."""
    found = []
    for sub in sorted(p for p in folder.iterdir() if p.is_dir()):
        best: tuple[int, str, Context] | None = None
        for path in sorted(sub.iterdir()):
            for session in parse_transcript(path.read_bytes(), name=path.name):
                if not session.turns:
                    continue
                context = session.turns[-1].context
                if best is None or len(context.messages) > best[0]:
                    best = (len(context.messages), f"{sub.name}/{path.name}", context)
        if best is not None:
            found.append((best[1], best[2]))
    return found


def median_ms(run: Callable[[], object]) -> float:
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        run()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def row(name: str, context: Context, tokenizer: Any) -> str:
    """One table row: the four timings of one context."""
    warm = TokenCounter(tokenizer)
    total = context_regions(context, warm).total
    regions_cold = median_ms(lambda: context_regions(context, TokenCounter(tokenizer)))
    items_cold = median_ms(lambda: context_items(context, TokenCounter(tokenizer)))
    regions_warm = median_ms(lambda: context_regions(context, warm))
    items_warm = median_ms(lambda: context_items(context, warm))
    return (
        f"| {name} | {len(context.messages)} | {total:,} | {regions_cold:.1f} ms "
        f"| {items_cold:.1f} ms | {regions_warm:.1f} ms | {items_warm:.1f} ms "
        f"| {items_warm / regions_warm:.1f}x |"
    )


def main() -> int:
    folder = find_transcripts()
    if folder is None:
        print("transcripts not found (../shared/data/transcripts)", file=sys.stderr)
        return 1
    tokenizer = get_tokenizer("cl100k_base")
    print(
        "| turn | messages | tokens | regions cold | items cold | regions warm | items warm "
        "| items / regions (warm) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, context in largest_turns(folder):
        print(row(name, context, tokenizer))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
