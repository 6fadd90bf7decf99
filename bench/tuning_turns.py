"""Tuning aid: ctxweb-auto on many turns of the tuning half, not only each session's largest.

Usage: ``.venv/bin/python bench/tuning_turns.py [--fraction 0.2] [--every 2]``

The facts benchmark (``bench/strategies.py``) plans one context per session: 17 in the tuning
half, too few to find what fails. This plans every ``--every``-th turn of every tuning session
(2,000 tokens or more) at ``--fraction`` of its tokens and lists the turns where the fact floor
(see ``strategies.fact_floor``) allows 95% of the facts to stay visible but ctxweb-auto keeps
fewer. It reads the tuning half only (``bench/heldout.py``); the held-out half stays unseen.
Prints; writes nothing.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ctxweb.settings")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fraction", type=float, default=0.2)
    parser.add_argument("--every", type=int, default=2)
    args = parser.parse_args()
    import django

    django.setup()
    from aiming import aim
    from facts import visible_share
    from heldout import half_of
    from strategies import MIN_TOKENS, counter_for, fact_floor

    from compaction.regions import context_regions
    from compaction.tokens import encoding_for_model
    from compaction.transcripts import parse_transcript
    from tests.support.transcripts import find_transcripts

    root = find_transcripts()
    if root is None or not root.is_dir():
        raise SystemExit("real transcripts not found (set CTXWEB_TRANSCRIPTS)")
    planned = allowed = 0
    under = []
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path.name == "README.md":
            continue
        if half_of(str(path.relative_to(root))) != "tuning":
            continue
        for session in parse_transcript(path.read_bytes(), name=path.name):
            for k in range(0, len(session.turns), args.every):
                context = session.turns[k].context
                model = context.extra.get("model") or session.model
                encoding = encoding_for_model(model if isinstance(model, str) else None).encoding
                counter = counter_for(encoding)
                tokens = int(context_regions(context, counter).total)
                if tokens < MIN_TOKENS:
                    continue
                planned += 1
                target = int(tokens * args.fraction)
                if fact_floor(context, counter) > target:
                    continue
                allowed += 1
                run = aim("ctxweb-auto", context, counter, target)
                kept, facts = visible_share(context, run.plan.context)
                if facts and kept < 0.95 * facts:
                    name = f"{path.name}:{session.external_id}:turn {k}"
                    landed = run.plan.after.total / target
                    under.append((kept / facts, name, tokens, landed, kept, facts))
    print(
        f"fraction {args.fraction}, one turn in {args.every}: {planned} contexts, the fact floor"
        f" allows 95% on {allowed}, ctxweb-auto keeps under 95% on {len(under)}"
    )
    for share, name, tokens, landed, kept, facts in sorted(under):
        print(f"  {share:4.0%} {name}: {tokens} tokens, landed at {landed:.2f}× ({kept}/{facts})")


if __name__ == "__main__":
    main()
