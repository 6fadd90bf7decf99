"""Tuning aid: ctxweb-auto on many turns of the tuning half, not only each session's largest.

Usage: ``.venv/bin/python bench/tuning_turns.py [--fractions 0.2,0.3] [--every 2] [--held-out]
[--no-write]``

The facts benchmark (``bench/strategies.py``) plans one context per session: 17 in the tuning
half, too few to show what fails. This plans one turn in ``--every`` of every tuning session
(2,000 tokens or more) at each of ``--fractions`` of its tokens. On the turns where the fact
floor (``strategies.fact_floor``) allows 95% of the facts (``bench/facts.py``) to stay visible,
it counts the facts ctxweb-auto keeps visible (by kind too: paths, errors, URLs and names, and
the URLs written short) and lists the turns where it keeps under 95%. It reads the tuning half
only (``bench/heldout.py``): the held-out half stays unseen. Once the tuning is done,
``--held-out`` adds the same measure on the held-out half's turns, reported as it falls. The
result goes to ``docs/benchmarks.md`` under ``## Strategies: ctxweb-auto on the tuning half's
turns``.
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ctxweb.settings")

SECTION = "## Strategies: ctxweb-auto on the tuning half's turns"


def run(fraction: float, every: int, half: str = "tuning") -> dict[str, Any]:
    """ctxweb-auto at ``fraction`` on one turn in ``every`` of ``half`` (the tuning half)."""
    from aiming import aim
    from facts import KINDS, kept_by_kind, urls_written_short, visible_share
    from heldout import half_of, transcript_files
    from strategies import MIN_TOKENS, carrier_floor, counter_for, fact_floor

    from compaction.regions import context_regions
    from compaction.tokens import encoding_for_model
    from compaction.transcripts import parse_transcript
    from tests.support.transcripts import find_transcripts

    root = find_transcripts()
    if root is None or not root.is_dir():
        raise SystemExit("real transcripts not found (set CTXWEB_TRANSCRIPTS)")
    planned = allowed = carriable = kept_all = facts_all = short = 0
    kinds = {kind: [0, 0] for kind in KINDS}
    under = []
    for relative, data in transcript_files(root):
        if half_of(relative) != half:
            continue
        path = Path(relative)
        for session in parse_transcript(data, name=path.name):
            for k in range(0, len(session.turns), every):
                context = session.turns[k].context
                model = context.extra.get("model") or session.model
                encoding = encoding_for_model(model if isinstance(model, str) else None).encoding
                counter = counter_for(encoding)
                tokens = int(context_regions(context, counter).total)
                if tokens < MIN_TOKENS:
                    continue
                planned += 1
                target = int(tokens * fraction)
                floor = fact_floor(context, counter)
                if floor > target:
                    continue
                allowed += 1
                carried = carrier_floor(context, counter, floor) <= target
                carriable += carried
                plan = aim("ctxweb-auto", context, counter, target).plan
                kept, facts = visible_share(context, plan.context)
                kept_all += kept
                facts_all += facts
                for kind, (kept_kind, facts_kind) in kept_by_kind(context, plan.context).items():
                    kinds[kind][0] += kept_kind
                    kinds[kind][1] += facts_kind
                short += urls_written_short(context, plan.context)
                if facts and kept < 0.95 * facts:
                    name = f"{path.name}:{session.external_id}:turn {k}"
                    under.append((kept / facts, name, tokens, plan.after.total / target, carried))
    return {
        "fraction": fraction,
        "planned": planned,
        "allowed": allowed,
        "carriable": carriable,
        "kept": kept_all,
        "facts": facts_all,
        "kinds": kinds,
        "urls_short": short,
        "under": sorted(under),
    }


def _kind_cells(r: dict[str, Any]) -> list[str]:
    cells = []
    for kind in _KIND_NAMES:
        kept, facts = r["kinds"][kind]
        cell = f"{kept:,} of {facts:,}"
        if kind == "url":
            cell += f" (+{r['urls_short']} short)"
        cells.append(cell)
    return cells


_KIND_NAMES = {"path": "paths", "error": "errors", "url": "URLs", "id": "names"}


def _tables(results: list[dict[str, Any]], before: list[dict[str, Any]] | None = None) -> list[str]:
    """The turns' table, the facts by kind (and those of a run ``before`` a change), and the
    turns under 95%, for one half."""
    lines = [
        "| target | turns planned | fact floor allows 95% | facts kept visible there"
        " | turns under 95% | of which the carrier floor allows 95% |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        share = r["kept"] / max(1, r["facts"])
        carried = sum(1 for *_, allows in r["under"] if allows)
        lines.append(
            f"| {r['fraction']:.0%} | {r['planned']} | {r['allowed']} | {r['kept']:,} of"
            f" {r['facts']:,} ({share:.1%}) | {len(r['under'])} | {carried} (of"
            f" {r['carriable']} turns it allows) |"
        )
    lines += [
        "",
        "By kind, on the same turns (kept ÷ facts; a URL counts as kept only whole, `+n short` is"
        " how many more it wrote short, host and path or host and last segment)"
        + (", and as the code before the change planned them, same sitting:" if before else ":"),
        "",
        "| target | code | all facts; turns | " + " | ".join(_KIND_NAMES.values()) + " |",
        "|---|---|---|" + "---|" * len(_KIND_NAMES),
    ]
    for r in results:
        runs = [("this", r)]
        if before is not None:
            runs.insert(0, ("before", next(b for b in before if b["fraction"] == r["fraction"])))
        for label, run_ in runs:
            share = f"{run_['kept']:,} of {run_['facts']:,}; {len(run_['under'])} under 95%"
            lines.append(
                f"| {r['fraction']:.0%} | {label} | {share} | "
                + " | ".join(_kind_cells(run_))
                + " |"
            )
    for r in results:
        if r["under"]:
            # the turns the carrier floor allows first: there the plan, not the budget, fell short
            under = sorted(r["under"], key=lambda u: (not u[-1], u[0]))
            listed = ", ".join(
                f"`{name}` {share:.1%} (at {landed:.2f}× the target"
                + ("" if allows else "; carrier floor above it")
                + ")"
                for share, name, _tokens, landed, allows in under[:8]
            )
            lines += ["", f"Under 95% at {r['fraction']:.0%}: {listed}."]
    return lines


def render(
    results: list[dict[str, Any]],
    every: int,
    when: str,
    held_out: list[dict[str, Any]] | None = None,
    before: dict[str, list[dict[str, Any]]] | None = None,
) -> str:
    from record import machine

    lines = [
        SECTION,
        "",
        f"Run {when} with `bench/tuning_turns.py` on {machine()}.",
        "",
        f"One turn in {every} of every session of the **tuning half** (`bench/heldout.py`), 2,000"
        " tokens or more, planned by ctxweb-auto at a fraction of its tokens; counted on the"
        " turns where the fact floor (see the facts section) allows 95% of the facts to stay"
        " visible. What ctxweb-auto was tuned on: the held-out half is not read"
        + (" for it." if held_out else ".")
        + (
            " The same turns of the held-out half follow, planned by the finished code and"
            " reported as they fall (`--held-out`)."
            if held_out
            else ""
        ),
        "",
        *_tables(results, before["tuning"] if before else None),
    ]
    if held_out:
        lines += [
            "",
            "**Held-out half**, the same measure:",
            "",
            *_tables(held_out, before.get("held-out") if before else None),
        ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fractions", default="0.2,0.3")
    parser.add_argument("--every", type=int, default=2)
    parser.add_argument("--no-write", action="store_true", help="print, do not touch docs/")
    parser.add_argument(
        "--held-out",
        action="store_true",
        help="also report the held-out half's turns (once tuning is done: never tune on them)",
    )
    parser.add_argument("--save", type=Path, help="write the results as JSON here, no section")
    parser.add_argument(
        "--before",
        type=Path,
        help="JSON saved by --save from the code before a change (same sitting), shown by kind",
    )
    args = parser.parse_args()
    import json

    import django

    django.setup()
    from record import write_section

    fractions = [float(f) for f in args.fractions.split(",")]
    results = [run(f, args.every) for f in fractions]
    held_out = [run(f, args.every, "held-out") for f in fractions] if args.held_out else None
    if args.save is not None:
        args.save.write_text(json.dumps({"tuning": results, "held-out": held_out}))
        return
    before = json.loads(args.before.read_text()) if args.before is not None else None
    section = render(results, args.every, datetime.date.today().isoformat(), held_out, before)
    print(section)
    if not args.no_write:
        write_section(SECTION, section)


if __name__ == "__main__":
    main()
