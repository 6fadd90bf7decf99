"""Attribution at scale (issue 36): the project overview, a session's attribution, the sessions
list and a late turn through live HTTP, on PostgreSQL, over a project of ``--sessions`` sessions
and about ``--turns`` turns of the project's own generator, every table ingest writes populated;
and ingest's late turn on that database.

Usage: ``.venv/bin/python bench/attribution_scale.py [--sessions 10000] [--turns 1000000]
[--no-write] [--keep]``

Ingesting a million turns through :func:`~ctxweb.contexts.services.turn_ingest` would take hours
on this machine. Ingest is deterministic: the same bodies under another session id of the same
project write the same rows but for ids and the recording clock (its messages and tool sets are
stored once per project by content hash, so they are the template's). So the project is built in
a throwaway database (``ctxweb_bench_scale`` on ``$BENCH_POSTGRES_URL``, dropped afterwards unless
``--keep``) in three steps:

1. **Templates, through ingest**: ``--templates`` sessions of
   :func:`ctxweb.contexts.demo.coding_session` (a seed each; both formats; two models a format;
   four sources; 50, 100 and 150 turns; a compaction in some), ingested turn by turn with their
   calls' moments (``occurred_at``), and the first ``--big-turns`` minus 100 turns of the
   session of ``--big-turns`` whose attribution and late turn are timed.
2. **Copies, in bulk**: the other sessions are copies of the templates, written with one
   ``INSERT ... SELECT`` a table a batch of copies (server side: no row passes through Python),
   from a mapping table written with ``COPY`` (the copy's id, its template, its id string, its
   day): its :class:`~ctxweb.contexts.models.Session` row, and its template's rows of every table
   ingest writes per session (:class:`~ctxweb.contexts.models.Turn` with its message ids,
   :class:`~ctxweb.contexts.models.AttributionItem`,
   :class:`~ctxweb.contexts.models.AttributionLabel`,
   :class:`~ctxweb.contexts.models.AttributionEntry`,
   :class:`~ctxweb.contexts.models.ToolUse`, :class:`~ctxweb.contexts.models.AttributionDay`),
   its moments moved to the copy's day (one among the last ``--days``); a copy's recording clock
   (a turn's ``created_at``, the session's ``created_at`` and ``last_activity_at``) is its calls'
   moments, as if recorded as they happened.
3. **The check**: ``--check`` copies, sampled, are ingested again for real, turn by turn with the
   same moments, into a second project; each of their rows (every table above, the session row,
   and the messages and tool sets they point at, compared by content hash) must equal the copy's,
   ids mapped (session, project, message and tool set ids, including those inside a turn's
   message list and a position entry's ``ref``), the recording clock left out. A difference
   stops the bench.

Then ``VACUUM ANALYZE``, and **ingest's late turn** as ``bench/ingest.py`` measures it: the
1,000-turn session's last 100 turns (each body decoded afresh from JSON, ``turn_request_parse`` +
``turn_ingest`` with the body) against tiktoken encoding each late context's text, into the big
database, and in the same sitting into an empty one holding only that session's first turns
(``ctxweb_bench_scale_small``), alternating ``--late-runs`` times (each run a session of its own).

Last, a live server (``python -m ctxweb.server`` on the big database) answers, over one
keep-alive connection (an operator key for the API, a logged-in owner for the pages),
``--runs`` requests of each (after two untimed ones): the overview over the last 30 days (and
filtered by a model, a source, a session id substring), the 1,000-turn session's attribution and
a typical one's, the sessions list, a late turn of the 1,000-turn session. Median and p95 at the
client; the target is 300 ms.

Results go to ``docs/benchmarks.md`` under ``## Attribution at scale`` (other sections kept).
"""

from __future__ import annotations

import argparse
import datetime
import http.client
import io
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path
from typing import Any, Literal

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from record import machine, write_section  # noqa: E402

from tests.support.servers import create_key, embedded_env, live_server  # noqa: E402

SECTION = "## Attribution at scale"
BENCH_DB = "ctxweb_bench_scale"
SMALL_DB = "ctxweb_bench_scale_small"
BIG = "bench/big"
#: The late turns timed (as bench/ingest.py's LATE).
LATE = 100
FORMATS: tuple[Literal["openai-chat", "anthropic-messages"], ...] = (
    "openai-chat",
    "anthropic-messages",
)
MODELS = {
    "openai-chat": ("gpt-4o", "gpt-4.1"),
    "anthropic-messages": ("claude-sonnet-4-5", "claude-opus-4-1"),
}
#: Stored sources: the API, the proxy, OTLP, and an import (its transcript's format).
SOURCES = ("api", "proxy", "otel", "claude-code")
SIZES = (50, 100, 150)
#: The tables ingest writes rows of per session (their ``session_id``), copied per copy.
COPIED = (
    "contexts_turn",
    "contexts_attributionitem",
    "contexts_attributionlabel",
    "contexts_attributionentry",
    "contexts_tooluse",
    "contexts_attributionday",
)
#: PostgreSQL's type oids of json and jsonb.
JSON_TYPES = (114, 3802)
#: Columns that are the recording clock, not what the call said: left out of the check.
CLOCK = {"created_at", "last_activity_at"}
OWNER, PASSWORD = "bench-owner", "bench-password-scale"
#: The target of issue 36: each answer under this, at the client.
TARGET_MS = 300.0
#: Seconds between a session's calls (their moments).
CALL_SECONDS = 20


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--turns", type=int, default=1_000_000)
    parser.add_argument("--big-turns", type=int, default=1000, help="the timed session's turns")
    parser.add_argument("--templates", type=int, default=24)
    parser.add_argument("--days", type=int, default=45)
    parser.add_argument("--check", type=int, default=6, help="copies ingested again and compared")
    parser.add_argument("--late-runs", type=int, default=2)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the databases afterwards")
    parser.add_argument("--worker", choices=("build", "head", "late"), help=argparse.SUPPRESS)
    parser.add_argument("--name", default=BIG, help=argparse.SUPPRESS)
    parser.add_argument("--today", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        _django()
        result = build(args) if args.worker == "build" else late(args, timed=args.worker == "late")
        print(json.dumps(result))
        return
    import psycopg

    admin = os.environ.get("BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
    today = datetime.datetime.now(datetime.UTC).date()
    load = [os.getloadavg()[0]]
    urls = {}
    with psycopg.connect(admin, autocommit=True) as conn:
        for name in (BENCH_DB, SMALL_DB):
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            conn.execute(f"CREATE DATABASE {name}")
            urls[name] = admin.rsplit("/", 1)[0] + f"/{name}"
    try:
        with (
            tempfile.TemporaryDirectory(prefix="ctxweb-scale-") as tmp,
            tempfile.TemporaryDirectory(prefix="ctxweb-scale-small-") as tmp_small,
        ):
            env = embedded_env(Path(tmp), DATABASE_URL=urls[BENCH_DB], CTXWEB_RATE_LIMIT="")
            small_env = embedded_env(
                Path(tmp_small), DATABASE_URL=urls[SMALL_DB], CTXWEB_RATE_LIMIT=""
            )
            key = create_key(env, project="p", role="operator", owner=OWNER, password=PASSWORD)
            create_key(small_env, project="p", role="operator")
            common = ["--today", today.isoformat(), "--big-turns", str(args.big_turns)]
            started = time.perf_counter()
            built = _worker(
                env,
                "build",
                *common,
                *(f"--sessions={args.sessions}", f"--turns={args.turns}"),
                *(f"--templates={args.templates}", f"--days={args.days}"),
                f"--check={args.check}",
            )
            built["build_s"] = time.perf_counter() - started
            load.append(os.getloadavg()[0])
            progress(f"built in {built['build_s']:.0f} s")
            lates: dict[str, list[dict[str, Any]]] = {"big": [], "small": []}
            for n in range(args.late_runs):
                # alternating, each run a session of its own (run n: seed 1 + n), its first
                # turns ingested by another process first (the big database's first run is the
                # timed session, its first turns ingested with the templates)
                name = BIG if n == 0 else f"{BIG}-{n}"
                for which, run_env in (("small", small_env), ("big", env)):
                    late_args = (*common, "--name", name, f"--seed={1 + n}")
                    if which == "small" or n > 0:
                        _worker(run_env, "head", *late_args)
                    lates[which].append(_worker(run_env, "late", *late_args))
                    progress(f"late turns, {which} database: {lates[which][-1]['ratio']:.2f}")
            load.append(os.getloadavg()[0])
            with live_server(env) as server:
                timed = measure(
                    server.url,
                    key,
                    args.runs,
                    built,
                    today,
                    server_pid=server.process.pid,
                    admin=admin,
                )
            load.append(os.getloadavg()[0])
    finally:
        if not args.keep:
            with psycopg.connect(admin, autocommit=True) as conn:
                for name in (BENCH_DB, SMALL_DB):
                    conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    section = render(built, lates, timed, load, args)
    print(section)
    if not args.no_write:
        write_section(SECTION, section)


def _worker(env: dict[str, str], phase: str, *extra: str) -> dict[str, Any]:
    command = [sys.executable, str(Path(__file__).resolve()), "--worker", phase, *extra]
    out = subprocess.run(command, env=env, cwd=ROOT, check=True, stdout=subprocess.PIPE, text=True)
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def _django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ctxweb.settings")
    import django

    from ctxweb.datadir import prepare

    prepare()
    django.setup()


# --- the sessions: templates, the timed session ---------------------------------------------------


def template_specs(count: int) -> list[dict[str, Any]]:
    """The templates' generator arguments: a seed each, both formats, two models a format,
    four sources, three sizes, a compaction in one of three."""
    specs = []
    for n in range(count):
        format = FORMATS[n % 2]
        turns = SIZES[n % len(SIZES)]
        specs.append(
            {
                "external_id": f"template/{n:02d}",
                "source": SOURCES[(n // 2) % len(SOURCES)],
                "day_back": 3 + n % 7,
                "generator": {
                    "turns": turns,
                    "seed": 100 + n,
                    "target_tokens": 12_000 + 250 * turns + 1_500 * (n % 5),
                    "format": format,
                    "model": MODELS[format][(n // 4) % 2],
                    "compact_at": turns // 2 if n % 3 == 1 else None,
                },
            }
        )
    return specs


def big_spec(turns: int, seed: int = 1) -> dict[str, Any]:
    """The timed session (seed 1), or another like it for a later run of the late turns."""
    return {
        "source": "api",
        "day_back": 1,
        "generator": {"turns": turns, "seed": seed, "target_tokens": 150_000, "model": "gpt-4o"},
    }


def bodies_of(spec: dict[str, Any]) -> list[dict[str, Any]]:
    from ctxweb.contexts.demo import coding_session

    generator = dict(spec["generator"])
    turns = generator.pop("turns")
    return coding_session(turns, **generator)


def moments(today: datetime.date, day_back: int, count: int) -> list[datetime.datetime]:
    """The calls' moments: from 08:00 UTC of the day ``day_back`` days before ``today``."""
    day = today - datetime.timedelta(days=day_back)
    start = datetime.datetime.combine(day, datetime.time(8), datetime.UTC)
    return [start + datetime.timedelta(seconds=CALL_SECONDS * i) for i in range(count)]


def ingest(
    project: Any,
    external_id: str,
    bodies: list[dict[str, Any]],
    at: list[datetime.datetime],
    *,
    source: str = "api",
    fresh: bool = False,
    cpu: list[float] | None = None,
) -> list[float]:
    """Each body through ``turn_request_parse`` and ``turn_ingest`` (with the body, as the view
    passes it); the seconds of each. ``fresh``: each body decoded afresh from its JSON
    (untimed), as bench/ingest.py does. ``cpu``: gets this thread's CPU seconds of each."""
    from ctxweb.contexts import services

    times = []
    for generated, moment in zip(bodies, at, strict=True):
        body = json.loads(json.dumps(generated)) if fresh else generated
        started, thread = time.perf_counter(), time.thread_time()
        context = services.turn_request_parse(
            project=project, external_id=external_id, format=body["format"], request=body["request"]
        )
        services.turn_ingest(
            project=project,
            external_id=external_id,
            context=context,
            model=body["model"],
            usage=body["usage"],
            turn_id=body["turn_id"],
            body=body,
            context_window=200_000,
            source=source,
            occurred_at=moment,
        )
        times.append(time.perf_counter() - started)
        if cpu is not None:
            cpu.append(time.thread_time() - thread)
    return times


# --- the worker: build --------------------------------------------------------------------------


def build(args: argparse.Namespace) -> dict[str, Any]:
    from django.db import connection

    from ctxweb.accounts.models import Project
    from ctxweb.accounts.services import project_create
    from ctxweb.contexts.models import Session

    today = datetime.date.fromisoformat(args.today)
    project = Project.objects.get(name="p")
    started = time.perf_counter()
    times: list[float] = []
    specs = template_specs(args.templates)
    for spec in specs:
        bodies = bodies_of(spec)
        at = moments(today, spec["day_back"], len(bodies))
        times += ingest(project, spec["external_id"], bodies, at, source=spec["source"])
        progress(f"{spec['external_id']}: {len(bodies)} turns ingested")
    big = big_spec(args.big_turns)
    bodies = bodies_of(big)[: args.big_turns - LATE]
    at = moments(today, big["day_back"], args.big_turns)[: len(bodies)]
    times += ingest(project, BIG, bodies, at, source=big["source"])
    ingested_s = time.perf_counter() - started
    progress(f"templates and {len(bodies)} turns of {BIG} ingested in {ingested_s:.0f} s")
    templates = {
        s.external_id: s
        for s in Session.objects.filter(
            project=project, external_id__in=[spec["external_id"] for spec in specs]
        )
    }
    for spec in specs:
        spec["id"] = templates[spec["external_id"]].pk
        spec["turns"] = templates[spec["external_id"]].turn_count
    copies = args.sessions - len(specs) - 1
    plan = copy_plan(specs, copies, today, args.days, args.turns - args.big_turns)
    started = time.perf_counter()
    copy_sessions(connection, plan)
    copy_s = time.perf_counter() - started
    progress(f"{len(plan):,} copies written in {copy_s:.0f} s")
    check = project_create(name="check")
    started = time.perf_counter()
    checked = check_copies(connection, project, check, specs, plan, args.check, today)
    check_s = time.perf_counter() - started
    progress(f"{len(checked)} copies ingested again and compared: identical ({check_s:.0f} s)")
    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
    vacuum_s = time.perf_counter() - started
    with connection.cursor() as cursor:
        counts = {}
        for table in ("contexts_session", "contexts_message", *COPIED):
            cursor.execute(f"SELECT count(*) FROM {table}")
            counts[table] = cursor.fetchone()[0]
        cursor.execute(
            "SELECT count(*), sum(turn_count) FROM contexts_session WHERE project_id = %s",
            [project.pk],
        )
        counts["sessions_p"], counts["turns_p"] = (int(v) for v in cursor.fetchone())
        cursor.execute("SELECT pg_database_size(current_database())")
        counts["bytes"] = cursor.fetchone()[0]
        cursor.execute("show server_version")
        version = cursor.fetchone()[0]
    typical = next(p for p in plan if p["turns"] == SIZES[1])
    return {
        "database": f"PostgreSQL {version}",
        "templates": len(specs),
        "big_turns": args.big_turns,
        "template_turns": sum(s["turns"] for s in specs),
        "ingested_s": ingested_s,
        "ingest_median_ms": statistics.median(times) * 1000,
        "copy_s": copy_s,
        "copies": len(plan),
        "checked": checked,
        "check_s": check_s,
        "vacuum_s": vacuum_s,
        "counts": counts,
        "typical": {"external_id": typical["external_id"], "turns": typical["turns"]},
    }


def copy_plan(
    specs: list[dict[str, Any]], copies: int, today: datetime.date, days: int, turns: int
) -> list[dict[str, Any]]:
    """The copies: each a template (in turn, so that the sizes average out; the last copies
    the smallest templates when the turns would run over ``turns``), an id string and a day."""
    rng = random.Random(7)
    left = turns - sum(s["turns"] for s in specs)
    smallest = min(s["turns"] for s in specs)
    small = [s for s in specs if s["turns"] == smallest]
    plan = []
    for n in range(copies):
        spec = specs[n % len(specs)]
        if left - spec["turns"] < smallest * (copies - n - 1):
            spec = small[n % len(small)]
        left -= spec["turns"]
        day_back = rng.randrange(days)
        plan.append(
            {
                "external_id": f"agent-{n:05d}-{rng.randrange(16**6):06x}",
                "template": spec["id"],
                "turns": spec["turns"],
                "spec": spec["external_id"],
                # the copy's moments: its template's moved by whole days
                "shift_days": spec["day_back"] - day_back,
            }
        )
    return plan


def _columns(cursor: Any, table: str) -> list[str]:
    cursor.execute(f"SELECT * FROM {table} LIMIT 0")
    return [c.name for c in cursor.description]


def copy_sessions(connection: Any, plan: list[dict[str, Any]], batch: int = 500) -> None:
    """Write the copies: the mapping table with ``COPY``, then per batch of copies one
    ``INSERT ... SELECT`` a table, each copy's rows its template's (``id`` new; ``session_id``
    the copy's; moments moved by the copy's days; the recording clock its calls' moments)."""
    with connection.cursor() as cursor:
        cursor.execute("SET synchronous_commit = off")
        cursor.execute("SET max_parallel_workers_per_gather = 0")  # one core
        cursor.execute("SELECT max(id) FROM contexts_session")
        first = cursor.fetchone()[0] + 1
        cursor.execute(
            "CREATE TEMPORARY TABLE bench_copy (id bigint PRIMARY KEY, template bigint,"
            " external_id varchar(200), shift interval, shift_days int)"
        )
        with cursor.cursor.copy("COPY bench_copy FROM STDIN") as copy:
            for n, row in enumerate(plan):
                row["id"] = first + n
                copy.write_row(
                    [
                        row["id"],
                        row["template"],
                        row["external_id"],
                        datetime.timedelta(days=row["shift_days"]),
                        row["shift_days"],
                    ]
                )
        # the template's calls' first and last moments: a copy's recording clock
        cursor.execute(
            "CREATE TEMPORARY TABLE bench_span AS SELECT session_id, min(occurred_at) AS first,"
            " max(occurred_at) AS last FROM contexts_turn"
            " WHERE session_id IN (SELECT DISTINCT template FROM bench_copy) GROUP BY session_id"
        )
        session_columns = _columns(cursor, "contexts_session")
        special = {
            "id": "m.id",
            "external_id": "m.external_id",
            "created_at": "s.first + m.shift",
            "last_activity_at": "s.last + m.shift",
        }
        session_sql = (
            f"INSERT INTO contexts_session ({', '.join(session_columns)}) SELECT "
            + ", ".join(special.get(c, f"t.{c}") for c in session_columns)
            + " FROM contexts_session t JOIN bench_copy m ON m.template = t.id"
            " JOIN bench_span s ON s.session_id = t.id WHERE m.id >= %s AND m.id < %s"
        )
        inserts = [session_sql]
        for table in COPIED:
            columns = [c for c in _columns(cursor, table) if c != "id"]
            moved = {
                "session_id": "m.id",
                "occurred_at": "t.occurred_at + m.shift",
                # the turn recorded when it happened
                "created_at": "t.occurred_at + m.shift",
                "day": "t.day + m.shift_days",
            }
            names = ", ".join(f'"{c}"' for c in columns)  # "group" is a keyword
            inserts.append(
                f"INSERT INTO {table} ({names}) SELECT "
                + ", ".join(moved.get(c, f't."{c}"') for c in columns)
                + f" FROM {table} t JOIN bench_copy m ON m.template = t.session_id"
                " WHERE m.id >= %s AND m.id < %s"
                + (" ORDER BY m.id, t.index" if table == "contexts_turn" else "")
            )
    last = first + len(plan)
    for lo in range(first, last, batch):
        hi = min(lo + batch, last)
        with connection.cursor() as cursor:  # autocommit: a statement a transaction
            for sql in inserts:
                cursor.execute(sql, [lo, hi])
        if (hi - first) % 2000 == 0 or hi == last:
            progress(f"copies: {hi - first:,} of {len(plan):,}")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT setval(pg_get_serial_sequence('contexts_session', 'id'),"
            " (SELECT max(id) FROM contexts_session))"
        )
        cursor.execute("DROP TABLE bench_copy, bench_span")


# --- the check: sampled copies ingested for real, compared row by row ---------------------------


class CopyDiffers(AssertionError):
    """A copied row is not what ingest writes."""


def check_copies(
    connection: Any,
    project: Any,
    check: Any,
    specs: list[dict[str, Any]],
    plan: list[dict[str, Any]],
    count: int,
    today: datetime.date,
) -> list[dict[str, Any]]:
    """Ingest ``count`` sampled copies (templates of different formats, sizes and compaction)
    into project ``check`` with their moments and source; compare every row with the copy's."""
    rng = random.Random(11)
    by_spec = {s["external_id"]: s for s in specs}
    picked: list[dict[str, Any]] = []
    seen: set[tuple[Any, ...]] = set()
    for row in rng.sample(plan, len(plan)):
        generator = by_spec[row["spec"]]["generator"]
        kind = (generator["format"], generator["turns"], generator["compact_at"] is not None)
        if kind not in seen:
            seen.add(kind)
            picked.append(row)
        if len(picked) == count:
            break
    out = []
    for row in picked:
        spec = by_spec[row["spec"]]
        bodies = bodies_of(spec)
        at = moments(today, spec["day_back"] - row["shift_days"], len(bodies))
        ingest(check, row["external_id"], bodies, at, source=spec["source"])
        compared = compare(connection, project.pk, check.pk, row["external_id"])
        progress(f"{row['external_id']} (a copy of {row['spec']}): {compared} rows identical")
        out.append({"copy": row["external_id"], "template": row["spec"], "rows": compared})
    return out


def _fetch(cursor: Any, sql: str, params: list[Any]) -> list[dict[str, Any]]:
    cursor.execute(sql, params)
    names = [c.name for c in cursor.description]
    # JSON columns come as their text (Django decodes them itself): decoded here
    decoded = [c.type_code in JSON_TYPES for c in cursor.description]
    return [
        {
            name: json.loads(value) if json_column and isinstance(value, str) else value
            for name, value, json_column in zip(names, values, decoded, strict=True)
        }
        for values in cursor.fetchall()
    ]


def compare(connection: Any, project_id: int, check_id: int, external_id: str) -> int:
    """Rows of session ``external_id`` in the copied project and ingested in ``check_id``:
    the same but for ids (mapped) and the recording clock; the rows compared."""
    with connection.cursor() as cursor:
        sessions = {}
        for pid in (project_id, check_id):
            found = _fetch(
                cursor,
                "SELECT * FROM contexts_session WHERE project_id = %s AND external_id = %s",
                [pid, external_id],
            )
            if len(found) != 1:
                raise CopyDiffers(f"{external_id}: {len(found)} sessions in project {pid}")
            sessions[pid] = found[0]
        # what the ingested session points at, by content hash, in the copied project
        messages: dict[int, int] = {}
        toolsets: dict[int, int] = {}
        for table, out in (("contexts_message", messages), ("contexts_toolset", toolsets)):
            real = _fetch(cursor, f"SELECT * FROM {table} WHERE project_id = %s", [check_id])
            copied = {
                r["hash"]: r
                for r in _fetch(
                    cursor,
                    f"SELECT * FROM {table} WHERE project_id = %s AND hash = ANY(%s)",
                    [project_id, [r["hash"] for r in real]],
                )
            }
            for r in real:
                twin = copied.get(r["hash"])
                if twin is None:
                    raise CopyDiffers(f"{table} {r['hash']}: not in the copied project")
                # a row stored once per project counts itself in every encoding that used it:
                # the copied project's may hold more encodings than the session's own
                real_counts, copied_counts = r.pop("counts"), twin.pop("counts")
                if any(copied_counts.get(k) != v for k, v in real_counts.items()):
                    raise CopyDiffers(
                        f"{table}.counts: ingested {real_counts}, copied {copied_counts}"
                    )
                _same(
                    table,
                    _strip(r, "id", "project_id", *CLOCK),
                    _strip(twin, "id", "project_id", *CLOCK),
                )
                out[r["id"]] = twin["id"]
        mapped = {
            "session_id": {sessions[check_id]["id"]: sessions[project_id]["id"]},
            "project_id": {check_id: project_id},
        }

        def normal(table: str, row: dict[str, Any], real: bool) -> dict[str, Any]:
            row = _strip(row, "id", *CLOCK)
            if real:
                for column, ids in mapped.items():
                    if column in row:
                        row[column] = ids[row[column]]
                if table == "contexts_turn":
                    row["tail"] = [messages[i] for i in row["tail"]]
                    row["system_id"] = messages.get(row["system_id"], row["system_id"])
                    row["toolset_id"] = toolsets.get(row["toolset_id"], row["toolset_id"])
                elif table == "contexts_attributionentry" and row["ref"]:
                    if row["position"] >= 0 or row["position"] == -2:  # a message, the system
                        row["ref"] = messages[row["ref"]]
                    elif row["position"] == -3:  # the tool set
                        row["ref"] = toolsets[row["ref"]]
            return row

        _same(
            "contexts_session",
            normal("contexts_session", sessions[check_id], True),
            normal("contexts_session", sessions[project_id], False),
        )
        compared = 1
        for table in COPIED:
            rows: dict[bool, list[dict[str, Any]]] = {}
            for pid, ingested in ((check_id, True), (project_id, False)):
                found = _fetch(
                    cursor, f"SELECT * FROM {table} WHERE session_id = %s", [sessions[pid]["id"]]
                )
                rows[ingested] = sorted((normal(table, r, ingested) for r in found), key=_key)
            if len(rows[True]) != len(rows[False]):
                raise CopyDiffers(
                    f"{table} of {external_id}: {len(rows[True])} rows ingested,"
                    f" {len(rows[False])} copied"
                )
            for a, b in zip(rows[True], rows[False], strict=True):
                _same(table, a, b)
            compared += len(rows[True])
    return compared


def _strip(row: dict[str, Any], *names: str) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k not in names}


def _key(row: dict[str, Any]) -> str:
    return json.dumps(row, sort_keys=True, default=str)


def _same(table: str, real: dict[str, Any], copied: dict[str, Any]) -> None:
    for column in sorted(set(real) | set(copied)):
        if real.get(column) != copied.get(column):
            raise CopyDiffers(
                f"{table}.{column}: ingested {real.get(column)!r:.300}, copied "
                f"{copied.get(column)!r:.300}"
            )


# --- the worker: ingest's late turn -------------------------------------------------------------


def late(args: argparse.Namespace, *, timed: bool) -> dict[str, Any]:
    """The timed session's last :data:`LATE` turns, measured as bench/ingest.py does; not
    ``timed``: its first turns only, untimed."""
    from django.db import connection
    from ingest import context_text, summarize

    from compaction.messages import parse
    from compaction.tokens import get_tokenizer
    from ctxweb.accounts.models import Project
    from ctxweb.contexts.models import Session

    today = datetime.date.fromisoformat(args.today)
    project = Project.objects.get(name="p")
    spec = big_spec(args.big_turns, seed=args.seed)
    bodies = bodies_of(spec)
    at = moments(today, spec["day_back"], len(bodies))
    head = len(bodies) - LATE
    if not timed:
        ingest(project, args.name, bodies[:head], at[:head], source=spec["source"])
        return {}
    done = Session.objects.get(project=project, external_id=args.name).turn_count
    assert done == head, f"{args.name}: {done} turns, not {head}"
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = cursor.fetchone()[0]
    database_cpu = _cpu_seconds(backend)
    cpu: list[float] = []
    times = ingest(
        project, args.name, bodies[head:], at[head:], source=spec["source"], fresh=True, cpu=cpu
    )
    # CPU a late turn: this thread's (median) and its database backend's (mean)
    cpu_ms = (
        statistics.median(cpu) * 1000,
        (_cpu_seconds(backend) - database_cpu) / LATE * 1000,
    )
    session = Session.objects.get(project=project, external_id=args.name)
    tokenizer = get_tokenizer(session.encoding)
    baseline = []
    baseline_cpu = []
    for body in bodies[head:]:
        text = context_text(parse(body["format"], body["request"]))
        started, thread = time.perf_counter(), time.thread_time()
        tokenizer.encode(text)
        baseline.append(time.perf_counter() - started)
        baseline_cpu.append(time.thread_time() - thread)
    baseline_cpu_ms = statistics.median(baseline_cpu) * 1000
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM contexts_turn")
        turn_rows = cursor.fetchone()[0]
    summary = summarize(times)
    base = summarize(baseline)
    return {
        "session": args.name,
        "turn_rows": turn_rows,
        "late": summary,
        "baseline": base,
        "ratio": summary["median_ms"] / base["median_ms"],
        "cpu_ms": cpu_ms,
        "baseline_cpu_ms": baseline_cpu_ms,
    }


# --- the parent: live HTTP -----------------------------------------------------------------------


class Client:
    """One keep-alive connection; an operator key for the API, a login's cookie for pages."""

    def __init__(self, url: str, key: str) -> None:
        host, port = url.rsplit("//", 1)[1].split(":")
        self.conn = http.client.HTTPConnection(host, int(port), timeout=120)
        self.key = key
        self.cookies: dict[str, str] = {}

    def get(self, path: str, *, page: bool = False) -> tuple[int, bytes]:
        headers = {"Cookie": self._cookie()} if page else {"Authorization": f"Bearer {self.key}"}
        self.conn.request("GET", path, headers=headers)
        return self._read()

    def _cookie(self) -> str:
        return "; ".join(f"{k}={v}" for k, v in self.cookies.items())

    def _read(self) -> tuple[int, bytes]:
        answer = self.conn.getresponse()
        body = answer.read()
        for header in answer.headers.get_all("Set-Cookie") or []:
            name, _, rest = header.partition("=")
            self.cookies[name.strip()] = rest.split(";", 1)[0]
        return answer.status, body

    def login(self) -> None:
        self.conn.request("GET", "/accounts/login/")
        status, body = self._read()
        token = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', body)
        if status != 200 or token is None:
            raise RuntimeError(f"login page: {status}")
        form = urllib.parse.urlencode(
            {"csrfmiddlewaretoken": token[1].decode(), "username": OWNER, "password": PASSWORD}
        )
        self.conn.request(
            "POST",
            "/accounts/login/",
            body=form,
            headers={
                "Cookie": self._cookie(),
                "Content-Type": "application/x-www-form-urlencoded",
            },
        )
        status, body = self._read()
        if status != 302 or "sessionid" not in self.cookies:
            raise RuntimeError(f"login: {status} {body[:300]!r}")


def requests_timed(built: dict[str, Any], today: datetime.date, big_turns: int) -> dict[str, Any]:
    start = (today - datetime.timedelta(days=29)).isoformat()
    window = f"start={start}&end={today.isoformat()}"
    typical = built["typical"]
    late_turn = big_turns - 10
    quoted = urllib.parse.quote(BIG)
    return {
        "API: overview, 30 days": (f"/api/v1/overview?{window}", False),
        "API: overview, 30 days, model filter": (
            f"/api/v1/overview?{window}&model=claude-sonnet-4-5",
            False,
        ),
        "API: overview, 30 days, source filter": (f"/api/v1/overview?{window}&source=proxy", False),
        "API: overview, 30 days, session filter": (
            f"/api/v1/overview?{window}&session=agent-01",
            False,
        ),
        f"API: session attribution, {big_turns:,} turns": (
            f"/api/v1/sessions/{quoted}/attribution",
            False,
        ),
        f"API: session attribution, {typical['turns']} turns": (
            f"/api/v1/sessions/{typical['external_id']}/attribution",
            False,
        ),
        "API: sessions list": ("/api/v1/sessions", False),
        f"API: turn {late_turn} of {big_turns:,}": (
            f"/api/v1/sessions/{quoted}/turns/{late_turn}",
            False,
        ),
        f"API: turn {late_turn}'s attribution": (
            f"/api/v1/sessions/{quoted}/turns/{late_turn}/attribution",
            False,
        ),
        "page: overview, 30 days": (f"/overview/?{window}", True),
        f"page: session attribution, {big_turns:,} turns": (
            f"/sessions/{quoted}/attribution/",
            True,
        ),
        "page: sessions list": ("/", True),
        f"page: turn {late_turn} of {big_turns:,}": (
            f"/sessions/{quoted}/turns/{late_turn}/",
            True,
        ),
    }


def _cpu_seconds(pid: int) -> float:
    """utime + stime of process ``pid`` (all its threads), in seconds; 0 once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _group_cpu(group: int) -> float:
    """CPU seconds of the processes of process group ``group`` (the server)."""
    total = 0.0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == group:
                total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def _database_cpu(admin: str) -> float:
    """CPU seconds of the PostgreSQL backends serving the big database (the server's)."""
    import psycopg

    with psycopg.connect(admin, autocommit=True) as conn:
        pids = [
            row[0]
            for row in conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                [BENCH_DB],
            )
        ]
    return sum(_cpu_seconds(pid) for pid in pids)


def measure(
    url: str,
    key: str,
    runs: int,
    built: dict[str, Any],
    today: datetime.date,
    *,
    server_pid: int,
    admin: str,
) -> dict[str, dict[str, Any]]:
    """Each request ``runs`` times after two untimed: the client's times, and the CPU the
    server's processes and its database backends spent per request (steadier than the clock on
    a shared machine)."""
    client = Client(url, key)
    client.login()
    out: dict[str, dict[str, Any]] = {}
    for name, (path, page) in requests_timed(built, today, built["big_turns"]).items():
        times = []
        size = 0
        body = b""
        cpu = (0.0, 0.0)
        for n in range(runs + 2):
            if n == 2:
                cpu = (_group_cpu(server_pid), _database_cpu(admin))
            started = time.perf_counter()
            status, body = client.get(path, page=page)
            elapsed = (time.perf_counter() - started) * 1000
            if status != 200:
                raise RuntimeError(f"{path}: {status} {body[:300]!r}")
            if n >= 2:
                times.append(elapsed)
            size = len(body)
        server_cpu = (_group_cpu(server_pid) - cpu[0]) / runs * 1000
        database_cpu = (_database_cpu(admin) - cpu[1]) / runs * 1000
        ordered = sorted(times)
        out[name] = {
            "path": path,
            "median_ms": statistics.median(ordered),
            "p95_ms": ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))],
            "server_cpu_ms": server_cpu,
            "database_cpu_ms": database_cpu,
            "bytes": size,
            "rows": "" if page else _summary(json.loads(body)),
        }
        progress(
            f"{name}: {out[name]['median_ms']:.0f} ms, CPU {server_cpu:.0f} + "
            f"{database_cpu:.0f} ms, {out[name]['rows']}"
        )
    client.conn.close()
    return out


def _summary(data: dict[str, Any]) -> str:
    if "days" in data:
        sessions = sum(d["sessions"] for d in data["days"])
        turns = sum(d["turns"] for d in data["days"])
        return f"{len(data['days'])} days, {sessions:,} session-days, {turns:,} turns"
    if "items" in data and "turns" in data:
        return f"{data['turns']:,} turns, {len(data['items'])} items listed"
    if "results" in data:
        return f"{len(data['results'])} of {data.get('count', '?'):,} sessions"
    if "messages" in data:
        return f"{len(data['messages']):,} messages"
    return ", ".join(sorted(data)[:6])


def render(
    built: dict[str, Any],
    lates: dict[str, list[dict[str, Any]]],
    timed: dict[str, dict[str, Any]],
    load: list[float],
    args: Any,
) -> str:
    counts = built["counts"]
    buffer = io.StringIO()
    w = buffer.write
    w(f"{SECTION}\n\n")
    w(
        f"`bench/attribution_scale.py`, {datetime.date.today()}, on "
        f"{machine(built['database'])}; load average (1 minute) "
        f"{', '.join(f'{v:.1f}' for v in load)} at the start, after the build, after the late "
        "turns and after the requests.\n\n"
    )
    checked = built["checked"]
    w(
        f"**The database**: project `p` holds {counts['sessions_p']:,} sessions and "
        f"{counts['turns_p']:,} turns of the project's generator (`coding_session`), every table "
        "ingest writes populated: "
        + ", ".join(
            f"{counts[t]:,} {t.removeprefix('contexts_')}"
            for t in ("contexts_turn", "contexts_message", *COPIED[1:])
        )
        + f" rows ({counts['bytes'] / 1e9:.1f} GB). Through `turn_ingest`, turn by turn: "
        f"{built['templates']} template sessions ({built['template_turns']:,} turns: one seed "
        f"each, both formats, two models a format, four sources, 50, 100 and 150 turns, a "
        f"compaction in a third of them) and the first {built['big_turns'] - LATE} turns of the "
        f"{built['big_turns']:,}-turn session ({built['ingested_s']:.0f} s, median turn "
        f"{built['ingest_median_ms']:.1f} ms). Then {built['copies']:,} copies of the templates "
        f"({built['copy_s']:.0f} s, one core): a mapping table written with `COPY`, then one "
        "`INSERT ... SELECT` a table a batch of 500 copies, each copy's session row and its "
        "template's rows of every per-session table (turns with their message lists, items, "
        "labels, position entries, tool uses, session-days) under the copy's own id and id "
        f"string, moved to its own day (one among the last {args.days}); their messages and tool "
        "sets are the template's, as ingest stores them once per project by content hash. "
        "**The check**: "
        f"{len(checked)} sampled copies ("
        + ", ".join(f"of `{c['template']}`" for c in checked)
        + ") ingested again for real, turn by turn with the same moments, into a second project "
        f"({built['check_s']:.0f} s): their {sum(c['rows'] for c in checked):,} rows (session, "
        "turns, items, labels, position entries, tool uses, session-days) equal the copies', "
        "ids mapped (session, project, and message and tool set ids, inside turns' message "
        "lists and entries' refs too), and the messages and tool sets they point at equal the "
        "copied project's of the same hash; only the recording clock (`created_at`, "
        "`last_activity_at`: a copy's are its calls' moments) is left out. A difference stops "
        f"the bench. Then `VACUUM ANALYZE` ({built['vacuum_s']:.0f} s).\n\n"
    )
    w(
        "**Ingest's late turn at that scale** (`bench/ingest.py`'s measure: the last "
        f"{LATE} turns of `coding_session({built['big_turns']}, seed, target_tokens=150000)`, "
        "each body decoded afresh from JSON, `turn_request_parse` + `turn_ingest` with the body, "
        "in process; baseline: tiktoken encoding each late context's text; target < 0.33), "
        "into the big database and, alternating in the same sitting, into an empty database "
        "holding only that session's first turns; run n is a session of seed 1 + n (the first: "
        "the timed session). CPU: the ingesting thread's (median) and its database backend's "
        "(mean, from `/proc`), against the encoding thread's; on this shared machine the "
        "steadier measure.\n\n"
    )
    w(
        "| database | turn rows | run | late median / p95 | baseline median | late / baseline | "
        "CPU a late turn: ingest + database | baseline CPU | CPU late / baseline |\n"
    )
    w("|---|---|---|---|---|---|---|---|---|\n")
    for n in range(len(lates["big"])):
        for which in ("small", "big"):
            r = lates[which][n]
            ingest_cpu, database_cpu = r["cpu_ms"]
            w(
                f"| {which} | {r['turn_rows']:,} | {n + 1} (`{r['session']}`) | "
                f"{r['late']['median_ms']:.1f} / {r['late']['p95_ms']:.1f} ms | "
                f"{r['baseline']['median_ms']:.1f} ms | **{r['ratio']:.2f}** | "
                f"{ingest_cpu:.1f} + {database_cpu:.1f} ms | {r['baseline_cpu_ms']:.1f} ms | "
                f"**{(ingest_cpu + database_cpu) / r['baseline_cpu_ms']:.2f}** |\n"
            )
    w(
        f"\n**Pages and API** through a live server (`python -m ctxweb.server` on the big "
        "database, one keep-alive connection: an operator key for the API, a logged-in owner "
        f"for the pages), {args.runs} requests each after two untimed; target: under "
        f"{TARGET_MS:.0f} ms. The typical session is `{built['typical']['external_id']}` (a "
        "copy).\n\n"
    )
    w(
        "| request | median | p95 | CPU a request: server + database | response | "
        "what it covered |\n|---|---|---|---|---|---|\n"
    )
    for name, row in timed.items():
        w(
            f"| {name} | {row['median_ms']:.0f} ms | {row['p95_ms']:.0f} ms | "
            f"{row['server_cpu_ms']:.0f} + {row['database_cpu_ms']:.0f} ms | "
            f"{row['bytes'] / 1000:.0f} kB | {row['rows']} |\n"
        )
    w(f"\n{NOTES}\n")
    return buffer.getvalue()


NOTES = """\
How the answers stay flat: a session's attribution reads its items and its tool uses, four \
queries whatever its turns; the overview adds up the range's session-day rows in the database \
and ranks the labels (one narrow row per session and name) of the sessions in range; the \
sessions list reads one page of sessions and their turns' totals. A turn's page and its \
attribution API read that turn and the one before it (2,121 and 2,120 messages here, by id) \
and attribute both from their messages: the database's size does not enter, the session's \
does. In this bench's first run at this scale (load average about 7), the turn's attribution \
read every message row whole (counts and secrets decoded too) and attributed both turns from \
scratch: its API answered in 346 ms (median) and the turn page in 573 ms. Each message is now \
read once, its data only, and the items and regions of the messages the two \
turns share from the first are computed once (`compaction.attribution.PrefixMemo`): in \
process, same sitting, alternating, `turn_attribution` of turn 990 took 257 and 257 ms of CPU \
before, 157 and 161 ms after (same answer). Limits: the copies share their templates' \
messages (stored once per project by content hash, as ingest would), so the message table \
holds the templates' distinct messages, not the millions 10,000 distinct sessions would \
bring; the pages read messages by id only (the turn's), ingest looks them up by hash in a \
unique index. Times at the client on this shared 2-core machine move with its load (the load \
averages above): the CPU columns are the steadier measure. For the record, a run of the same \
code at load average 6 to 10 (2026-11-28 04:42) answered every request above under 300 ms at \
the client (medians: overview 134 ms, 153 ms as a page; turn 990's attribution 252 ms; the \
turn page 225 ms), with the same CPU a request as here. The sessions list counts 10,001 \
sessions: the late turns' second run added one."""


if __name__ == "__main__":
    main()
