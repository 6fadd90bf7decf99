"""Tuning aid: ctxweb-auto's facts kept where its floor allows, on the tuning half.

Usage: ``.venv/bin/python bench/tuning_turns.py [--fractions 0.3,0.5,0.7] [--every 2]
[--only sessions|turns] [--held-out] [--no-write] [--save F] [--before F] [--results F]
[--change TEXT]``

Two sets of contexts of the tuning half (``bench/heldout.py``), 2,000 tokens or more: each
session's largest turn (the contexts of ``bench/strategies.py``'s facts section), and one turn in
``--every`` of every session. Each is planned by ctxweb-auto at each of ``--fractions`` of its
tokens where **its floor allows** (:class:`Room`): ctxweb-auto's own fixed floor (its plan at a
1-token target, summaries counted bare) plus the cheapest facts that floor no longer shows
needed for 95% of the facts (``bench/facts.py``, URLs counted) to be visible, each in its
shortest form on a line of its own, fit within the target. It counts the contexts where the
floor allows and where it does not, the contexts of the first kind where ctxweb-auto keeps 95%
of the facts visible, the facts kept by kind (paths, errors, URLs, names, and the URLs written
short), and lists those under 95%. It reads the tuning half only: the held-out half stays
unseen. Once the tuning is done, ``--held-out`` adds the same measure on the held-out half,
reported as it falls. The result goes to ``docs/benchmarks.md`` under ``## Strategies:
ctxweb-auto on the tuning half's turns``.

Before and after a change, in one sitting: ``--save before.json`` from the code before it, then
``--before before.json`` here: the tables by kind show both. ``--save after.json`` then
``--results after.json`` renders (and writes) what was measured without planning it again, so
the paragraph of ``--change`` can say what the run found.
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ctxweb.settings")

SECTION = "## Strategies: ctxweb-auto on the tuning half's turns"


#: The share of a context's facts ctxweb-auto must keep visible where its floor allows.
KEEP = 0.95


@dataclass(frozen=True)
class Room:
    """What keeping :data:`KEEP` of a context's facts visible costs ctxweb-auto at the least.

    ``floor``: ctxweb-auto's fixed floor, its plan at a target of 1 token (every step taken
    as far as it goes), each summary counted bare (its header and pointer, what it is cut to
    when only that fits). ``lines``: the facts that plan no longer shows, the fewest and
    cheapest needed for :data:`KEEP` of the context's facts (``bench/facts.py``) to be
    visible, each written in its own shortest form (its text; a dotted call with ``()``) on a
    line of its own. The floor **allows** a target when ``floor + lines`` fits within it:
    there is room, in theory, for the facts beside what ctxweb-auto cannot take out."""

    floor: int
    lines: int

    @property
    def need(self) -> int:
        return self.floor + self.lines

    def allows(self, target: int) -> bool:
        return self.need <= target


def fact_room(context: Any, counter: Any) -> Room:
    """The :class:`Room` of ``context`` (see there), counted with ``counter``."""
    from dataclasses import replace

    from facts import context_facts

    from compaction.regions import context_regions
    from compaction.strategies import get_strategy
    from compaction.strategies.ctxweb_auto import SUMMARY_HEADER
    from compaction.strategies.ctxweb_auto._summaries import bare_summary
    from compaction.summarizers import FactSummarizer

    plan = get_strategy("ctxweb-auto").plan(
        context, {"target_tokens": 1}, counter=counter, summarizer=FactSummarizer()
    )
    messages = tuple(
        bare_summary(m) if m.text.startswith(SUMMARY_HEADER) else m for m in plan.context.messages
    )
    least = replace(plan.context, messages=messages)
    floor = int(context_regions(least, counter).total)
    wanted = context_facts(context)
    missing = wanted - context_facts(least, shown=True)
    need = math.ceil(KEEP * len(wanted)) - (len(wanted) - len(missing))
    if need <= 0:
        return Room(floor, 0)
    costs = sorted(int(counter.count_text("\n" + _shortest(fact))) for fact in missing)
    return Room(floor, sum(costs[:need]))


def _shortest(fact: str) -> str:
    """A fact (``kind:text``) as the fewest characters ``bench/facts.py`` finds it in."""
    kind, text = fact.split(":", 1)
    return f"{text}()" if kind == "id" and "." in text else text


def _contexts(half: str, every: int | None) -> Iterator[tuple[str, Any, Any, int]]:
    """(name, context, counter, tokens) of every context of ``half`` measured: one turn in
    ``every`` of each session, or (``every`` None) each session's largest turn, 2,000 tokens or
    more."""
    from heldout import half_of, transcript_files
    from strategies import MIN_TOKENS, counter_for, load_cases

    from compaction.regions import context_regions
    from compaction.tokens import encoding_for_model
    from compaction.transcripts import parse_transcript
    from tests.support.transcripts import find_transcripts

    if every is None:
        for case in load_cases((half,)):
            yield case.name, case.context, counter_for(case.encoding), case.tokens
        return
    root = find_transcripts()
    if root is None or not root.is_dir():
        raise SystemExit("real transcripts not found (set CTXWEB_TRANSCRIPTS)")
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
                if tokens >= MIN_TOKENS:
                    yield f"{path.name}:{session.external_id}:turn {k}", context, counter, tokens


def run(fractions: list[float], every: int | None, half: str = "tuning") -> list[dict[str, Any]]:
    """ctxweb-auto at each of ``fractions`` on the contexts of ``half`` (:func:`_contexts`),
    counted where its floor allows (:class:`Room`)."""
    from aiming import aim
    from facts import KINDS, kept_by_kind, urls_written_short, visible_share

    results: list[dict[str, Any]] = [
        {
            "fraction": fraction,
            "planned": 0,
            "allowed": 0,
            "reached": 0,
            "kept": 0,
            "facts": 0,
            "kinds": {kind: [0, 0] for kind in KINDS},
            "urls_short": 0,
            "under": [],
        }
        for fraction in fractions
    ]
    for name, context, counter, tokens in _contexts(half, every):
        room = fact_room(context, counter)
        for r in results:
            r["planned"] += 1
            target = int(tokens * r["fraction"])
            if not room.allows(target):
                continue
            r["allowed"] += 1
            plan = aim("ctxweb-auto", context, counter, target).plan
            kept, facts = visible_share(context, plan.context)
            r["kept"] += kept
            r["facts"] += facts
            for kind, (kept_kind, facts_kind) in kept_by_kind(context, plan.context).items():
                r["kinds"][kind][0] += kept_kind
                r["kinds"][kind][1] += facts_kind
            r["urls_short"] += urls_written_short(context, plan.context)
            if facts and kept < KEEP * facts:
                landed = plan.after.total / target
                r["under"].append((kept / facts, name, kept, facts, landed, room.need / target))
            else:
                r["reached"] += 1
        print(
            f"{half} {name[:70]:70} {tokens:>7} floor {room.floor} lines {room.lines}",
            file=sys.stderr,
        )
    for r in results:
        r["under"].sort()
    return results


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
    """The contexts' table, the facts by kind (and those of a run ``before`` a change), and the
    contexts under 95%, for one half."""
    lines = [
        "| target | contexts | floor allows | floor does not | ≥ 95% of facts where it allows"
        " | facts kept visible there |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        share = r["kept"] / max(1, r["facts"])
        lines.append(
            f"| {r['fraction']:.0%} | {r['planned']} | {r['allowed']} |"
            f" {r['planned'] - r['allowed']} | **{r['reached']} of {r['allowed']}** |"
            f" {r['kept']:,} of {r['facts']:,} ({share:.1%}) |"
        )
    lines += [
        "",
        "By kind, where the floor allows (kept ÷ facts; a URL counts as kept only whole, `+n short`"
        " is how many more it wrote short, host and path or host and last segment)"
        + (", and as the code before the change planned them, same sitting:" if before else ":"),
        "",
        "| target | code | all facts; under 95% | " + " | ".join(_KIND_NAMES.values()) + " |",
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
            listed = ", ".join(
                f"`{name}` {share:.1%} ({kept}/{facts}; at {landed:.2f}× the target, its floor"
                f" and lines at {need:.2f}×)"
                for share, name, kept, facts, landed, need in r["under"][:8]
            )
            more = f"… ({len(r['under'])} in all)" if len(r["under"]) > 8 else ""
            lines += ["", f"Under 95% at {r['fraction']:.0%}: {listed}{more}."]
    return lines


_DEFINITION = (
    "**Where the floor allows** (`Room` in `bench/tuning_turns.py`): ctxweb-auto's fixed floor"
    " (its own plan at a target of 1 token, every step taken as far as it goes, each summary"
    " counted bare: header and pointer) plus the facts that plan no longer shows, the fewest and"
    " cheapest needed for 95% of the context's facts (`bench/facts.py`: paths, errors, URLs and"
    " names, **URLs counted**) to be visible, each in its shortest form (its own text) on a line"
    " of its own, fit within the target. Where they do, ctxweb-auto must keep ≥ 95%; where they"
    " do not, no plan that keeps ctxweb-auto's floor can."
)


def render(
    results: dict[str, list[dict[str, Any]]],
    every: int,
    when: str,
    held_out: dict[str, list[dict[str, Any]]] | None = None,
    before: dict[str, dict[str, list[dict[str, Any]]]] | None = None,
    change: str | None = None,
) -> str:
    from record import machine

    lines = [
        SECTION,
        "",
        f"Run {when} with `bench/tuning_turns.py` on {machine()}.",
        "",
        "ctxweb-auto at a fraction of each context's tokens, on two sets of contexts of the"
        " **tuning half** (`bench/heldout.py`), 2,000 tokens or more: each session's largest turn"
        f" (the contexts of the facts section), and one turn in {every} of every session."
        " What ctxweb-auto was tuned on: the held-out half is not read"
        + (" for it." if held_out else ".")
        + (
            " The same measure on the held-out half follows, planned by the finished code and"
            " reported as it falls (`--held-out`)."
            if held_out
            else ""
        ),
        "",
        _DEFINITION,
    ]
    if change:
        lines += ["", change]
    halves = [("tuning", "Tuning half", results)]
    if held_out:
        halves.append(("held-out", "Held-out half", held_out))
    for half, title, found in halves:
        for unit, label in (
            ("sessions", "each session's largest turn"),
            ("turns", f"one turn in {every}"),
        ):
            earlier = before[half][unit] if before and before.get(half) else None
            lines += ["", f"**{title}, {label}**:", "", *_tables(found[unit], earlier)]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fractions", default="0.3,0.5,0.7")
    parser.add_argument("--every", type=int, default=2)
    parser.add_argument("--no-write", action="store_true", help="print, do not touch docs/")
    parser.add_argument(
        "--held-out",
        action="store_true",
        help="also report the held-out half (once tuning is done: never tune on it)",
    )
    parser.add_argument(
        "--only", choices=("sessions", "turns"), help="measure one set of contexts only"
    )
    parser.add_argument("--save", type=Path, help="write the results as JSON here, no section")
    parser.add_argument(
        "--before",
        type=Path,
        help="JSON saved by --save from the code before a change (same sitting), shown by kind",
    )
    parser.add_argument("--change", help="a paragraph on the change measured, after the definition")
    parser.add_argument(
        "--results",
        type=Path,
        help="JSON saved by --save from this code: render (and write) it, plan nothing",
    )
    args = parser.parse_args()
    import json

    import django

    django.setup()
    from record import write_section

    fractions = [float(f) for f in args.fractions.split(",")]
    units = {"sessions": None, "turns": args.every}
    if args.only:
        units = {args.only: units[args.only]}

    def measure(half: str) -> dict[str, list[dict[str, Any]]]:
        return {unit: run(fractions, every, half) for unit, every in units.items()}

    if args.results is not None:
        saved = json.loads(args.results.read_text())
        results, held_out = saved["tuning"], saved["held-out"]
    else:
        results = measure("tuning")
        held_out = measure("held-out") if args.held_out else None
    if args.save is not None:
        args.save.write_text(json.dumps({"tuning": results, "held-out": held_out}))
        return
    if args.only:
        print(json.dumps({"tuning": results, "held-out": held_out}, indent=1))
        return
    before = json.loads(args.before.read_text()) if args.before is not None else None
    when = datetime.date.today().isoformat()
    section = render(results, args.every, when, held_out, before, args.change)
    print(section)
    if not args.no_write:
        write_section(SECTION, section)


if __name__ == "__main__":
    main()
