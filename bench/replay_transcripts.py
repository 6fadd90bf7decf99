"""Replay of every real transcript: every file of ``../shared/data/transcripts`` imported into a
throwaway SQLite database, then every session replayed to its last turn under every preset and as
recorded, through the service a user's replay runs (``replays.replay_create``, its columns run
inline as the embedded shape's background thread runs them), timed, each column checked as
``tests/ctxweb/contexts/test_replays_transcripts.py`` checks it.

Usage: ``.venv/bin/python bench/replay_transcripts.py [--window tight|recorded|both] [--no-write]``

Two windows: ``recorded``, each session's own (what a user replaying it gets); ``tight``, the
session's window set just above its peak (5% over it, plus the output reserve), as the test does,
so that every preset's trigger fires on real content.

Per preset: sessions and turns replayed, the columns' walking time (``seconds`` of each column's
result, the load and stores left out) and the CPU time of the whole replay stage, compactions,
input tokens and cost against as recorded (cost over the sessions whose model has a price), facts
lost, turns over the window, and the problems the checks found (0 expected).

Results go to ``docs/benchmarks.md`` under ``## Replay of every real transcript`` (the other
sections are kept).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from record import embedded_django, report  # noqa: E402

SECTION = "## Replay of every real transcript"


def _money(value: float) -> str:
    return f"${value:,.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--window", choices=["tight", "recorded", "both"], default="both")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()

    from tests.support.replays import column_problems
    from tests.support.transcripts import MISSING, find_transcripts

    folder = find_transcripts()
    if folder is None or not folder.is_dir():
        sys.exit(MISSING)
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.name != "README.md")

    embedded_django("ctxweb-bench-replay-transcripts-")
    import django
    from django.conf import settings
    from django.db import transaction

    from ctxweb.accounts.services import project_create
    from ctxweb.contexts.models import Session, Turn
    from ctxweb.contexts.services import replays
    from ctxweb.contexts.services.imports import transcript_import

    settings.CTXWEB_TASKS_INLINE = True
    settings.CTXWEB_REPLAYS_ACTIVE_PER_PROJECT = 100
    project = project_create(name="bench-replay-transcripts")
    started = time.perf_counter()
    for path in files:
        transcript_import(
            project=project,
            data=path.read_bytes(),
            name=path.name,
            external_id_prefix=f"{path.relative_to(folder)}/",
        )
    import_seconds = time.perf_counter() - started
    sessions = list(Session.objects.filter(project=project).order_by("pk"))
    turns = sum(s.turn_count for s in sessions)
    print(f"imported {len(files)} files: {len(sessions)} sessions, {turns} turns", file=sys.stderr)

    windows = ["recorded", "tight"] if args.window == "both" else [args.window]
    rows: list[str] = []
    notes: list[str] = []
    for mode in windows:
        if mode == "tight":
            for session in sessions:
                peak = max(
                    Turn.objects.filter(session=session).values_list("total_tokens", flat=True)
                )
                window = peak * 21 // 20 + session.output_reserve
                Session.objects.filter(pk=session.pk).update(context_window=window)
                Turn.objects.filter(session=session).update(context_window=window)
        stats: dict[str, dict[str, Any]] = defaultdict(lambda: defaultdict(float))
        failed: list[str] = []
        cpu, wall = time.process_time(), time.perf_counter()
        for session in sessions:
            session.refresh_from_db()
            indexes = list(
                Turn.objects.filter(session=session)
                .order_by("index")
                .values_list("index", flat=True)
            )
            presets = replays.replay_presets(session=session)
            batches = [presets[: replays.MAX_POLICIES], presets[replays.MAX_POLICIES :]]
            for batch in batches:
                with transaction.atomic():
                    replay = replays.replay_create(session=session, policies=batch)
                replay.refresh_from_db()
                if replay.status != "succeeded":
                    failed.append(f"{session.external_id}: {replay.error}")
                    continue
                recorded = replay.results[0]
                for column in replay.results:
                    label = column["label"] if column["strategy"] else "as recorded"
                    if label == "as recorded" and batch is not batches[0]:
                        continue  # once a session
                    row = stats[label]
                    totals = column["totals"]
                    row["sessions"] += 1
                    row["turns"] += len(column["turns"])
                    row["seconds"] += column["seconds"]
                    row["compactions"] += totals["compactions"]
                    row["grew"] += sum(
                        1 for c in column["compactions"] if c["after"] >= c["before"]
                    )
                    row["compacting"] += 1 if totals["compactions"] else 0
                    row["input"] += totals["input_tokens"]
                    row["recorded_input"] += recorded["totals"]["input_tokens"]
                    if totals["cost"] is not None:
                        row["cost"] += totals["cost"]
                        row["recorded_cost"] += recorded["totals"]["cost"]
                    row["facts"] += totals["facts_lost"]
                    row["over"] += totals["turns_over_window"]
                    row["errors"] += len(column["errors"])
                    row["problems"] += len(column_problems(column, indexes=indexes))
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        print(f"{mode}: {cpu:.1f} s CPU, {wall:.1f} s wall", file=sys.stderr)
        notes.append(
            f"{mode} window: the replay stage took {cpu:.1f} s of CPU ({wall:.1f} s wall) for"
            f" {2 * len(sessions)} replays of {len(sessions)} sessions"
            + (f"; {len(failed)} failed: {'; '.join(failed[:3])}" if failed else "; none failed")
        )
        for label, row in stats.items():
            input_ratio = row["input"] / row["recorded_input"] if row["recorded_input"] else 0
            cost = (
                f"{_money(row['cost'])} vs {_money(row['recorded_cost'])}"
                if row["recorded_cost"]
                else "unpriced"
            )
            rows.append(
                f"| {mode} | {label} | {int(row['sessions'])} | {int(row['turns']):,} |"
                f" {row['seconds']:.2f} | {int(row['compactions'])} ({int(row['compacting'])}"
                f" sessions) | {int(row['grew'])} | {input_ratio:.1%} | {cost} |"
                f" {int(row['facts'])} | {int(row['over'])} | {int(row['errors'])} |"
                f" {int(row['problems'])} |"
            )
    description = (
        f"Every file of `../shared/data/transcripts` ({len(files)} files, {len(sessions)}"
        f" sessions, {turns:,} turns) imported into a fresh SQLite database"
        f" ({import_seconds:.0f} s), then every session replayed to its last turn under every"
        " preset (`replay_presets`) and as recorded, through `replays.replay_create` run inline"
        " (the embedded shape: two replays a session, six presets then five, each with as"
        " recorded as column 0). Windows: *recorded* is each session's own; *tight* sets it just"
        " above the session's peak (5% over, plus the output reserve) so that every trigger"
        " fires on real content. Seconds: the columns' walking time added up (each result's"
        " `seconds`; loads and stores left out). Input and cost: the preset's total against as"
        " recorded over the same sessions (cost over the sessions whose model has a list"
        " price, with the session's cache rule). Problems: what the test's checks"
        " (`tests/support/replays.py`) found in the columns: the last turn reached, cache reads"
        " within the input, costs not negative, compactions only above the trigger, totals and"
        " peak fill as the turns give them. Grew: compactions whose result was no smaller than"
        " the call they compacted (a summary longer than the few messages it replaced: tau-bench's"
        " sessions are 1,000 to 5,000 tokens, their windows a few hundred tokens above"
        " that under the tight window); turns over: calls above the usable limit, which as"
        " recorded never passes under the tight window, so every one is a policy's doing."
        " Facts lost: paths, names, errors and URLs gone for good (`compaction.facts`)."
        " OpenCode's prune drops tool outputs past the newest 40K tokens of them, and only when"
        " 20K can go: none of these sessions is long enough. "
        + ". ".join(notes)
        + ". One run, on a machine shared with other"
        " work (the CPU times are the steadier measure)."
    )
    report(
        SECTION,
        "replay_transcripts.py",
        description,
        [
            "window",
            "preset",
            "sessions",
            "turns",
            "seconds",
            "compactions",
            "grew",
            "input vs recorded",
            "cost vs recorded",
            "facts lost",
            "turns over",
            "errors",
            "problems",
        ],
        rows,
        versions=(f"Django {django.get_version()}", "SQLite"),
        write=not args.no_write,
    )


if __name__ == "__main__":
    main()
