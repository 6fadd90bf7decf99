"""The fixed split of the shared real transcripts into a tuning half and a held-out half.

By source: every session of one transcript file falls in the same half, so a strategy tuned on
the tuning half has never seen a turn of the held-out one. Paths are relative to the transcripts
folder (``../shared/data/transcripts`` or ``$CTXWEB_TRANSCRIPTS``). The held-out half gets the
formats that are thin in the tuning half (OpenAI chat, Anthropic Messages) and one file of every
other format, so each half has agent sessions of every shape. Tune only on :data:`TUNING`;
report both. A file in neither list is refused, so a new transcript must be placed first.

The shared set has no OpenAI-chat session that could go in the tuning half, so real ones kept with
the benchmarks (``bench/transcripts``, xz-compressed, sources and licence in its README) join it:
:func:`transcript_files` reads both folders.
"""

from __future__ import annotations

import lzma
from collections.abc import Iterator
from pathlib import Path

TUNING = (
    "claude-code/agentcmd-session-five.jsonl",
    "claude-code/agentcmd-session-two.jsonl",
    "claude-code/image-message.jsonl",
    "claude-code/sniffly-ai-music-ba79134d.jsonl",
    "claude-code/viewer-sample-fe5e1c67.jsonl",
    "codex/agentcmd-rollout-0924-1922.jsonl",
    "codex/agentcmd-rollout-0925-0949.jsonl",
    "openai-chat/tau-bench-retail-avaljotsingh.json",  # bench/transcripts
    "openai-chat/tau-bench-retail-gpt41-madhavkanda.json",  # bench/transcripts
    "openhands/multi-swe-bench-output.jsonl",
    "swe-agent/ctf-crypto-katy.traj",
    "swe-agent/marshmallow-1867-function-calling.traj",
)

HELD_OUT = (
    "anthropic-messages/claude-trace-traffic.jsonl",
    "claude-code/agentcmd-session-four.jsonl",
    "claude-code/sniffly-ai-music-d3ad4cdc.jsonl",
    "claude-code/sniffly-ai-music-fed8ce56.jsonl",
    "claude-code/viewer-sample-1af7fc5e.jsonl",
    "claude-code/viewer-sample-5c0375b4.jsonl",
    "codex/agentcmd-rollout-0924-2012.jsonl",
    "openai-chat/tau-bench-gpt-4o-airline.json",
    "openhands/resolver-output.jsonl",
    "swe-agent/ctf-web-i-got-id.traj",
    "swe-agent/pydicom-1458.traj",
)

HALVES = {"tuning": TUNING, "held-out": HELD_OUT}


def half_of(relative: str) -> str:
    """``tuning`` or ``held-out`` for a transcript path relative to the transcripts folder."""
    for name, files in HALVES.items():
        if relative in files:
            return name
    raise SystemExit(f"{relative}: in neither half; add it to bench/heldout.py first")


#: Real transcripts kept with the benchmarks (``<format>/<name>.xz``).
LOCAL = Path(__file__).resolve().parent / "transcripts"


def transcript_files(shared: Path) -> Iterator[tuple[str, bytes]]:
    """Every transcript of both halves, as (path relative to its folder, bytes), sorted by path:
    the shared folder's files and :data:`LOCAL`'s, decompressed and named without ``.xz``."""
    found: dict[str, Path] = {}
    for root in (shared, LOCAL):
        for path in root.rglob("*"):
            if path.is_file() and path.name != "README.md":
                relative = str(path.relative_to(root)).removesuffix(".xz")
                if relative in found:
                    raise SystemExit(f"{relative}: in both {found[relative].parent} and {root}")
                found[relative] = path
    for relative in sorted(found):
        path = found[relative]
        data = path.read_bytes()
        yield relative, lzma.decompress(data) if path.suffix == ".xz" else data
