"""Pages benchmark: server time and SQL queries of the session page, chart data and turn inspector.

Usage: ``.venv/bin/python bench/pages.py [--turns 1000] [--small-turns 100] [--requests 10]
[--no-write]``

In a throwaway ``CTXWEB_DATA_DIR`` (SQLite, ``DEBUG`` off, migrated), a generated coding session
(``coding_session(turns, seed=1, target_tokens=150000)``, each body parsed with
:func:`compaction.messages.parse` and stored with :func:`ctxweb.contexts.services.turn_ingest`)
is requested through Django's test ``Client`` by a logged-in member of its project: the session
page, the chart data API (``/api/v1/sessions/{id}/turns``) and the turn inspector of an early, a
middle and the last turn, and of the last turn largest first (which orders every message), and
the preview page of two strategies on the session's latest context (load, plan, render). Each
URL is requested once to warm up, then ``--requests`` times; the median is reported with the
number of SQL queries of one request. The same is done for a session of ``--small-turns`` turns,
to show the number of queries does not grow with turns or messages.

Results go to ``docs/benchmarks.md`` under ``## Pages`` (the other sections are kept).
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

from record import DOCS, machine, write_section  # noqa: E402

SECTION = "## Pages"
TARGET_MS = 200
#: docs/design.md section 8's bar for a strategy preview (the plan alone, measured by
#: bench/strategies.py); the preview page rows are read against it, page and all.
PREVIEW_TARGET_MS = 250


def setup(data_dir: str) -> None:
    os.environ["CTXWEB_DATA_DIR"] = data_dir
    os.environ["DATABASE_URL"] = f"sqlite:///{data_dir}/bench.sqlite3"
    os.environ["DEBUG"] = "0"
    os.environ["REDIS_URL"] = ""
    os.environ["ALLOWED_HOSTS"] = "testserver"  # the test Client's host
    os.environ["DJANGO_SETTINGS_MODULE"] = "ctxweb.settings"
    sys.path.insert(0, str(ROOT))
    import django
    from django.core.management import call_command

    from ctxweb.datadir import prepare

    prepare()  # this process is an entry point: its data folder and secret
    django.setup()
    call_command("migrate", verbosity=0)


def ingest(project: Any, external_id: str, turns: int) -> float:
    from compaction.messages import parse
    from ctxweb.contexts import services
    from ctxweb.contexts.demo import coding_session

    started = time.perf_counter()
    for body in coding_session(turns, seed=1, target_tokens=150_000):
        services.turn_ingest(
            project=project,
            external_id=external_id,
            context=parse(body["format"], body["request"]),
            model=body["model"],
            usage=body["usage"],
            turn_id=body["turn_id"],
            context_window=200_000,
        )
    return time.perf_counter() - started


def measure(client: Any, url: str, requests: int) -> dict[str, Any]:
    from django.db import connection

    queries: list[str] = []

    def count(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        queries.append(sql)
        return execute(sql, params, many, context)

    # An execute wrapper rather than the query log, which request_started resets.
    with connection.execute_wrapper(count):
        response = client.get(url)
    if response.status_code != 200:
        raise SystemExit(f"GET {url}: HTTP {response.status_code}")
    times = []
    for _ in range(requests):
        started = time.perf_counter()
        response = client.get(url)
        times.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200
    return {
        "median_ms": statistics.median(times),
        "max_ms": max(times),
        "queries": len(queries),
        "bytes": len(response.content),
    }


def urls(external_id: str, turns: int) -> dict[str, str]:
    return {
        "session page": f"/sessions/{external_id}/",
        "chart data API": f"/api/v1/sessions/{external_id}/turns",
        "turn inspector, first turn": f"/sessions/{external_id}/turns/0/",
        "turn inspector, middle turn": f"/sessions/{external_id}/turns/{turns // 2}/",
        "turn inspector, last turn": f"/sessions/{external_id}/turns/{turns - 1}/",
        "turn inspector, last turn, largest first": (
            f"/sessions/{external_id}/turns/{turns - 1}/?order=size"
        ),
        # the strategy preview end to end: load the managed context, plan, render the page
        "preview page, ctxweb-auto on the latest context": (
            f"/sessions/{external_id}/preview/?strategy=ctxweb-auto"
        ),
        "preview page, codex-compact on the latest context": (
            f"/sessions/{external_id}/preview/?strategy=codex-compact"
        ),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    from django.test import Client

    from ctxweb.accounts.services import membership_set, project_create, user_get_or_create
    from ctxweb.contexts.models import Session

    user = user_get_or_create(username="bench-viewer")
    project = project_create(name="bench-pages")
    membership_set(project=project, user=user, role="viewer")
    sizes = {"big": args.turns, "small": args.small_turns}
    ingest_s = {}
    for name, turns in sizes.items():
        ingest_s[name] = ingest(project, f"bench-{name}", turns)
        print(f"ingested {turns} turns in {ingest_s[name]:.1f} s", file=sys.stderr)
    client = Client()
    client.force_login(user)
    results: dict[str, Any] = {}
    for name, turns in sizes.items():
        session = Session.objects.get(project=project, external_id=f"bench-{name}")
        last = session.turns.order_by("-index").first()
        assert last is not None, f"bench-{name} has no turn"
        results[name] = {
            "turns": turns,
            "messages": last.message_count,
            "tokens": last.total_tokens,
            "pages": {
                label: measure(client, url, args.requests)
                for label, url in urls(f"bench-{name}", turns).items()
            },
        }
        for label, row in results[name]["pages"].items():
            print(
                f"{name:5} {label:41} {row['median_ms']:7.1f} ms  {row['queries']:3} queries",
                file=sys.stderr,
            )
    return results


def _machine() -> str:
    import sqlite3

    import django

    return machine(f"Django {django.__version__}", f"SQLite {sqlite3.sqlite_version}")


def render(results: dict[str, Any], args: argparse.Namespace) -> str:
    big, small = results["big"], results["small"]
    lines = [
        SECTION,
        "",
        f"Run {datetime.date.today().isoformat()} with `bench/pages.py` on {_machine()}.",
        "",
        f"**Session**: `coding_session({big['turns']}, seed=1, target_tokens=150000)` ingested"
        f" with `services.turn_ingest` (last turn: {big['messages']:,} messages,"
        f" {big['tokens']:,} tokens) into a throwaway SQLite database, `DEBUG` off. Requests"
        " through Django's test `Client` as a logged-in viewer of the project (middleware,"
        " session auth, template rendering and JSON included; no network). Median of"
        f" {args.requests} requests after one warm-up; queries = SQL queries of one request. The"
        f" same pages of a {small['turns']}-turn session show the query count does not grow"
        f" with turns or messages. Target < {TARGET_MS} ms and a constant number of queries;"
        f" the preview pages are read against the preview's own {PREVIEW_TARGET_MS} ms (which"
        " `bench/strategies.py` measures for the plan alone): here they also load the managed"
        " context from the database and render the page. Maxima above ~150 ms on the fast"
        " pages are full garbage collections of the bench's large heap during a request.",
        "",
        f"| page | {big['turns']:,} turns: median / max | queries | response size |"
        f" {small['turns']:,} turns: median | queries |",
        "|---|---|---|---|---|---|",
    ]
    for label, row in big["pages"].items():
        other = small["pages"][label]
        median = f"{row['median_ms']:.1f} ms"
        target = PREVIEW_TARGET_MS if label.startswith("preview page") else TARGET_MS
        if row["median_ms"] >= target:
            median = f"**{median}**"
        same = "" if other["queries"] == row["queries"] else " (**differs**)"
        lines.append(
            f"| {label} | {median} / {row['max_ms']:.1f} ms | {row['queries']}{same} |"
            f" {row['bytes'] / 1024:,.0f} KB | {other['median_ms']:.1f} ms | {other['queries']} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=1_000)
    parser.add_argument("--small-turns", type=int, default=100)
    parser.add_argument("--requests", type=int, default=10)
    parser.add_argument("--no-write", action="store_true", help="print, do not touch docs/")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ctxweb-bench-pages-") as tmp:
        setup(tmp)
        results = run(args)
    section = render(results, args)
    print(section)
    if not args.no_write:
        write_section(SECTION, section)
        print(f"written to {DOCS.relative_to(ROOT)}: {SECTION}", file=sys.stderr)


if __name__ == "__main__":
    main()
