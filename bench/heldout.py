"""The fixed split of the shared real transcripts into a tuning half and a held-out half.

By source: every session of one transcript file falls in the same half, so a strategy tuned on
the tuning half has never seen a turn of the held-out one. Paths are relative to the transcripts
folder (``../shared/data/transcripts`` or ``$CTXWEB_TRANSCRIPTS``). The held-out half gets the
formats that are thin in the tuning half (OpenAI chat, Anthropic Messages) and one file of every
other format, so each half has agent sessions of every shape. Tune only on :data:`TUNING`;
report both. A file in neither list is refused, so a new transcript must be placed first.
"""

from __future__ import annotations

TUNING = (
    "claude-code/agentcmd-session-five.jsonl",
    "claude-code/agentcmd-session-two.jsonl",
    "claude-code/image-message.jsonl",
    "claude-code/sniffly-ai-music-ba79134d.jsonl",
    "claude-code/viewer-sample-fe5e1c67.jsonl",
    "codex/agentcmd-rollout-0924-1922.jsonl",
    "codex/agentcmd-rollout-0925-0949.jsonl",
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
