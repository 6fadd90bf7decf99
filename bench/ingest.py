"""Ingest benchmark: time per turn, tokens encoded and bytes stored, on SQLite and PostgreSQL.

Usage: ``.venv/bin/python bench/ingest.py [--turns 1000] [--target-tokens 150000]
[--backends sqlite,postgresql] [--no-write]``

The report names the load average (1 minute) at the start and after each backend: on a shared
machine, what else ran meanwhile weighs on every time.

Each backend runs in a subprocess of this script against a throwaway database (a temporary SQLite
file; a ``ctxweb_bench`` database, or ``$BENCH_DB``, created on ``$BENCH_POSTGRES_URL``, default
``postgresql://postgres@127.0.0.1:5432/postgres``, and dropped afterwards). In each:

1. a generated coding session (:func:`ctxweb.contexts.demo.coding_session`) of ``--turns`` model
   calls growing to ``--target-tokens``: each body is decoded afresh from its JSON (untimed, as
   the view receives it), and the time of a turn is
   :func:`ctxweb.contexts.services.turn_request_parse` of the request body (incremental) plus
   :func:`ctxweb.contexts.services.turn_ingest` (with the body, for its idempotency hash), i.e.
   the ingest view minus DRF's JSON decoding and authentication. The baseline of a turn is the
   time tiktoken takes to encode the concatenated text of all its messages, uncached;
2. every real transcript under ``../shared/data/transcripts`` (or ``$CTXWEB_TRANSCRIPTS``),
   parsed with :mod:`compaction.transcripts` and ingested turn by turn (time: ``turn_ingest``);
3. tokens encoded (``TokenCounter.encoded_tokens``) against the tokens of the distinct messages,
   and bytes of the ``contexts_*`` tables (SQLite ``dbstat``, PostgreSQL
   ``pg_total_relation_size``) against the bytes of distinct content (canonical JSON);
4. end to end through HTTP (:mod:`endtoend`): a session of ``--http-turns`` growing to
   ``--http-tokens`` posted to a live uvicorn on the backend, each late turn's latency at the
   client against ``json.loads`` of the same bytes in the same run, in ``--http-runs`` runs on
   fresh servers, the median run reported with every run's ratio (``--profile-http``: where the
   server's time goes, sampled by py-spy in the first run); then one more run on
   :mod:`timed_app`, each step of each late turn timestamped, client and server on one clock
   (``--no-phases`` skips it).

Results go to ``docs/benchmarks.md`` under ``## Ingest`` (the other sections are kept).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from record import DOCS, machine, write_section  # noqa: E402

from tests.support.transcripts import find_transcripts  # noqa: E402

BENCH_DB = os.environ.get("BENCH_DB", "ctxweb_bench")
#: The production shape's Redis (channel layer, cache) for the HTTP row.
BENCH_REDIS = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/12")
LATE = 100
#: Statements the database runs that are no query of a turn's (SQLite sends BEGIN as one).
TRANSACTION_CONTROL = ("BEGIN", "SAVEPOINT", "RELEASE SAVEPOINT", "ROLLBACK", "COMMIT")
SECTION = "## Ingest"


# --- the parent: runs each backend in a subprocess and writes the report ------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=1_000)
    parser.add_argument("--target-tokens", type=int, default=150_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--no-transcripts", action="store_true")
    parser.add_argument("--no-write", action="store_true", help="print, do not touch docs/")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--profile", help="write a cProfile of the session's turns to this file")
    parser.add_argument("--http-turns", type=int, default=260)
    parser.add_argument(
        "--http-runs",
        type=int,
        default=5,
        help="runs of the bare session through HTTP, each on a fresh server (the median is kept)",
    )
    parser.add_argument("--http-tokens", type=int, default=180_000)
    parser.add_argument("--no-http", action="store_true")
    parser.add_argument("--profile-http", action="store_true")
    parser.add_argument(
        "--no-phases",
        action="store_true",
        help="skip the extra HTTP run that times each step of a late turn (bench/timed_app.py)",
    )
    args = parser.parse_args()
    if args.worker:
        result = run_worker(args)
        print(json.dumps(result))
        return
    results = {}
    args.load = [os.getloadavg()[0]]
    for backend in args.backends.split(","):
        results[backend] = run_backend(backend, args)
        if not args.no_http:
            results[backend]["http"] = run_http(backend, args)
        args.load.append(os.getloadavg()[0])
    (Path(tempfile.gettempdir()) / "ctxweb-bench-ingest.json").write_text(json.dumps(results))
    report = render(results, args)
    print(report)
    if not args.no_write:
        write_section(SECTION, report)
        print(f"written to {DOCS.relative_to(ROOT)}", file=sys.stderr)


def postgres_admin_url() -> str:
    return os.environ.get("BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres")


def run_backend(backend: str, args: argparse.Namespace) -> dict[str, Any]:
    env = {**os.environ, "DEBUG": "0", "REDIS_URL": ""}
    with tempfile.TemporaryDirectory(prefix="ctxweb-bench-") as tmp:
        env["CTXWEB_DATA_DIR"] = tmp
        if backend == "sqlite":
            env["DATABASE_URL"] = f"sqlite:///{tmp}/bench.sqlite3"
        elif backend == "postgresql":
            import psycopg

            admin = postgres_admin_url()
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(f"DROP DATABASE IF EXISTS {BENCH_DB} WITH (FORCE)")
                conn.execute(f"CREATE DATABASE {BENCH_DB}")
            env["DATABASE_URL"] = admin.rsplit("/", 1)[0] + f"/{BENCH_DB}"
        else:
            raise SystemExit(f"unknown backend {backend!r}")
        command = [sys.executable, str(Path(__file__).resolve()), "--worker", backend]
        command += ["--turns", str(args.turns), "--target-tokens", str(args.target_tokens)]
        command += ["--seed", str(args.seed)]
        if args.no_transcripts:
            command.append("--no-transcripts")
        if args.profile:
            command += ["--profile", f"{args.profile}.{backend}"]
        try:
            done = subprocess.run(
                command, env=env, cwd=ROOT, check=True, stdout=subprocess.PIPE, text=True
            )
        finally:
            if backend == "postgresql":
                with psycopg.connect(postgres_admin_url(), autocommit=True) as conn:
                    conn.execute(f"DROP DATABASE IF EXISTS {BENCH_DB} WITH (FORCE)")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def run_http(backend: str, args: argparse.Namespace) -> dict[str, Any]:
    """The late turns of a session through a live server on ``backend``."""
    from endtoend import late_turns_over_http

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ctxweb.settings")
    from ctxweb.contexts.demo import coding_session

    bodies = [
        json.dumps(b).encode()
        for b in coding_session(args.http_turns, seed=args.seed, target_tokens=args.http_tokens)
    ]
    url = None
    if backend == "postgresql":
        url = postgres_admin_url().rsplit("/", 1)[0] + f"/{BENCH_DB}"

    def fresh() -> None:  # each server run on an empty database
        if url is not None:
            _recreate_bench_db()

    try:
        runs = []
        for run in range(max(1, args.http_runs)):
            progress(f"[{backend}] through HTTP, run {run + 1}: {len(bodies)} turns")
            fresh()
            runs.append(
                late_turns_over_http(
                    bodies, late=LATE, database_url=url, profile=args.profile_http and run == 0
                )
            )
        # This machine's speed drifts between runs by more than the target's margin: the run
        # with the median ratio is reported, beside every run's ratio.
        result = sorted(runs, key=lambda r: r["ratio"])[len(runs) // 2]
        result["hottest"] = runs[0]["hottest"]
        result["run_ratios"] = [r["ratio"] for r in runs]
        if not args.no_phases:
            progress(f"[{backend}] through HTTP, each step timed: {len(bodies)} turns")
            fresh()
            timed = late_turns_over_http(bodies, late=LATE, database_url=url, phases=True)
            result["phases"] = timed["phases"]
        progress(f"[{backend}] through HTTP, with a coding agent's tool list: {len(bodies)} turns")
        tooled = [_with_tools(body) for body in bodies]
        fresh()
        result["tools"] = late_turns_over_http(tooled, late=LATE, database_url=url)
        result["tools"]["tools_kb"] = len(json.dumps(agent_tools())) / 1e3
        if url is not None:
            progress(f"[{backend}] through HTTP, the production shape: {len(bodies)} turns")
            fresh()
            result["production"] = late_turns_over_http(
                bodies, late=LATE, database_url=url, redis_url=BENCH_REDIS, rate_limits=True
            )
        return result
    finally:
        if url is not None:
            _recreate_bench_db(create=False)


def _runs(result: dict[str, Any]) -> str:
    """The ratio of every run of a row measured in several, as "(runs: 2.91, 3.05, 2.87)"."""
    ratios = result.get("run_ratios") or []
    if len(ratios) < 2:
        return ""
    return " (runs: " + ", ".join(f"{r:.2f}" for r in ratios) + ")"


def _cpu_cell(result: dict[str, Any]) -> str:
    """A row's CPU time a late turn: the server process's, and PostgreSQL's backends' (on
    SQLite the database works in the server process)."""
    server = result.get("server_cpu_ms")
    if server is None:
        return "-"
    database = result.get("database_cpu_ms")
    return f"{server:.1f} / " + (f"{database:.1f} ms" if database is not None else "(in it)")


def _recreate_bench_db(*, create: bool = True) -> None:
    import psycopg

    with psycopg.connect(postgres_admin_url(), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {BENCH_DB} WITH (FORCE)")
        if create:
            conn.execute(f"CREATE DATABASE {BENCH_DB}")


def agent_tools() -> list[dict[str, Any]]:
    """Tool definitions the size a coding agent sends with every call (tens of KB: 20 tools,
    each with a long description and a JSON schema of 12 parameters)."""
    parameters = {
        "type": "object",
        "properties": {
            f"p{i}": {
                "type": "string",
                "description": "A parameter that does something useful. " * 3,
                "enum": [f"v{j}" for j in range(5)],
            }
            for i in range(12)
        },
        "required": ["p0", "p1"],
    }
    return [
        {
            "type": "function",
            "function": {
                "name": f"tool_{k}",
                "description": "Does one thing of the agent's work. " * 40,
                "parameters": parameters,
            },
        }
        for k in range(20)
    ]


def _with_tools(body: bytes) -> bytes:
    data = json.loads(body)
    data["request"]["tools"] = agent_tools()
    return json.dumps(data).encode()


# --- the worker: one backend, in its own process -------------------------------------------


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def run_worker(args: argparse.Namespace) -> dict[str, Any]:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ctxweb.settings")
    import django

    from ctxweb.datadir import prepare

    prepare()  # this process is an entry point: its data folder and secret
    django.setup()
    from django.core.management import call_command
    from django.db import connection

    call_command("migrate", verbosity=0)
    result: dict[str, Any] = {"backend": args.worker, "database": database_version(connection)}
    result["session"] = bench_session(args)
    result["session"]["storage"] = storage(connection, project_name="bench-session")
    if not args.no_transcripts:
        result["transcripts"] = bench_transcripts()
        result["transcripts"]["storage"] = storage(connection, project_name=None)
    return result


def database_version(connection: Any) -> str:
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("select sqlite_version()")
            return f"SQLite {cursor.fetchone()[0]}"
        cursor.execute("show server_version")
        return f"PostgreSQL {cursor.fetchone()[0]}"


def context_text(context: Any) -> str:
    """The concatenated text of every message of a context (what a naive counter would encode)."""
    from compaction.messages import ReasoningPart, TextPart, ToolCallPart, ToolResultPart

    pieces: list[str] = []

    def add(part: Any) -> None:
        if isinstance(part, TextPart | ReasoningPart):
            pieces.append(part.text or "")
        elif isinstance(part, ToolCallPart):
            pieces.append(part.name)
            pieces.append(part.arguments)
        elif isinstance(part, ToolResultPart):
            for inner in part.content:
                add(inner)

    for part in context.system:
        add(part)
    for message in context.messages:
        for part in message.parts:
            add(part)
    return "\n".join(pieces)


def transaction_control(sql: str) -> bool:
    """Whether an ``execute`` only controls the transaction (the first batch of a turn on
    PostgreSQL opens it: ``BEGIN; ...`` is one of the turn's calls)."""
    return sql.startswith(TRANSACTION_CONTROL) and ";" not in sql


def summarize(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {
        "median_ms": statistics.median(ordered) * 1000,
        "p95_ms": p95 * 1000,
        "mean_ms": statistics.fmean(ordered) * 1000,
        "count": len(ordered),
    }


def encoding_stats(project: Any) -> dict[str, int]:
    """Tokens of the project's distinct messages, system prompts and tool sets (less the fixed
    per-message wrapper, which is never encoded)."""
    from compaction.tokens import MESSAGE_OVERHEAD, TOOLS_OVERHEAD
    from ctxweb.contexts.models import Message, ToolSet

    distinct = 0
    content_bytes = 0
    for counts, size in Message.objects.filter(project=project).values_list("counts", "size"):
        for value in counts.values():
            distinct += value["total"] - MESSAGE_OVERHEAD
        content_bytes += size
    for counts, data in ToolSet.objects.filter(project=project).values_list("counts", "data"):
        for value in counts.values():
            distinct += value - TOOLS_OVERHEAD
        content_bytes += len(json.dumps(data, ensure_ascii=False).encode())
    return {"distinct_tokens": distinct, "distinct_content_bytes": content_bytes}


def bench_session(args: argparse.Namespace) -> dict[str, Any]:
    from django.db import connection

    from compaction.messages import parse
    from compaction.tokens import get_tokenizer
    from ctxweb.accounts.models import Project
    from ctxweb.contexts import services
    from ctxweb.contexts.demo import coding_session
    from ctxweb.contexts.models import Session
    from ctxweb.contexts.services.counting import TOKEN_CACHE, counter_for

    project = Project.objects.create(name="bench-session")
    bodies = coding_session(args.turns, seed=args.seed, target_tokens=args.target_tokens)
    progress(f"[{args.worker}] session: {len(bodies)} turns generated")
    TOKEN_CACHE.clear()
    counters = {name: counter_for(name) for name in ("o200k_base", "cl100k_base")}
    for counter in counters.values():
        counter.encoded_tokens = 0
    times: list[float] = []
    parse_times: list[float] = []
    totals: list[int] = []
    executes: list[int] = []
    sent: list[str] = []

    def record(execute: Any, sql: str | bytes, *args: Any) -> Any:
        # a batch whose values ctxweb bound itself (``_sql._bound``) is sent as bytes
        sent.append(sql.decode() if isinstance(sql, bytes) else sql)
        return execute(sql, *args)

    profiler = None
    if args.profile:
        import cProfile

        profiler = cProfile.Profile()
    for index, generated in enumerate(bodies):
        # Fresh objects, as the view gets them from DRF's JSON decoding (no sharing with the
        # previous turn's body that the generator's bodies have).
        body = json.loads(json.dumps(generated))
        if profiler is not None and index >= len(bodies) - LATE:
            profiler.enable()
        sent.clear()
        started = time.perf_counter()
        context = services.turn_request_parse(
            project=project, external_id="bench", format=body["format"], request=body["request"]
        )
        parsed = time.perf_counter()
        with connection.execute_wrapper(record):
            result = services.turn_ingest(
                project=project,
                external_id="bench",
                context=context,
                model=body["model"],
                usage=body["usage"],
                turn_id=body["turn_id"],
                body=body,
                context_window=200_000,
            )
        times.append(time.perf_counter() - started)
        executes.append(sum(1 for sql in sent if not transaction_control(sql)))
        parse_times.append(parsed - started)
        if profiler is not None:
            profiler.disable()
        totals.append(result.turn.total_tokens)
        if index % 100 == 99:
            progress(f"[{args.worker}] session: turn {index + 1}, {totals[-1]} tokens")
    if profiler is not None:
        profiler.dump_stats(args.profile)
    session = Session.objects.get(project=project, external_id="bench")
    tokenizer = get_tokenizer(session.encoding)
    baseline: list[float] = []
    baseline_tokens: list[int] = []
    for body in bodies[-LATE:]:
        text = context_text(parse(body["format"], body["request"]))
        started = time.perf_counter()
        tokens = tokenizer.encode(text)
        baseline.append(time.perf_counter() - started)
        baseline_tokens.append(len(tokens))
    encoded = sum(c.encoded_tokens for c in counters.values())
    stats = encoding_stats(project)
    late = summarize(times[-LATE:])
    naive_bytes = sum(len(json.dumps(b["request"], ensure_ascii=False).encode()) for b in bodies)
    return {
        "turns": len(bodies),
        "encoding": session.encoding,
        "final_tokens": totals[-1],
        "all": summarize(times),
        "late": late,
        "baseline": summarize(baseline),
        "baseline_tokens_median": statistics.median(baseline_tokens),
        "late_ratio": late["median_ms"] / summarize(baseline)["median_ms"],
        "late_parse": summarize(parse_times[-LATE:]),
        "late_ingest": summarize([t - p for t, p in zip(times, parse_times, strict=True)][-LATE:]),
        "late_executes": statistics.median(executes[-LATE:]),
        "encoded_tokens": encoded,
        **stats,
        "encoded_ratio": encoded / max(1, stats["distinct_tokens"]),
        "cache_hits": TOKEN_CACHE.hits,
        "cache_misses": TOKEN_CACHE.misses,
        "naive_bytes": naive_bytes,
    }


def bench_transcripts() -> dict[str, Any]:
    from compaction.messages import message_to_dict
    from compaction.tokens import get_tokenizer
    from compaction.transcripts import parse_transcript
    from ctxweb.accounts.models import Project
    from ctxweb.contexts import services
    from ctxweb.contexts.models import Session
    from ctxweb.contexts.services.counting import TOKEN_CACHE, counter_for

    folder = find_transcripts()
    if folder is None:
        progress("transcripts not found: skipped")
        return {"files": 0}
    project = Project.objects.create(name="bench-transcripts")
    TOKEN_CACHE.clear()
    counters = {name: counter_for(name) for name in ("o200k_base", "cl100k_base")}
    for counter in counters.values():
        counter.encoded_tokens = 0
    times: list[float] = []
    baseline: list[float] = []
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.name != "README.md")
    sessions = 0
    for path in files:
        imported = parse_transcript(path.read_bytes(), name=path.name)
        for number, item in enumerate(imported):
            sessions += 1
            external_id = f"{path.stem}/{number}/{item.external_id}"[:200]
            for turn in item.turns:
                response = [message_to_dict(m) for m in turn.response] or None
                started = time.perf_counter()
                services.turn_ingest(
                    project=project,
                    external_id=external_id,
                    context=turn.context,
                    model=item.model,
                    response=response,
                    usage=turn.usage,
                    unknown=sorted(turn.unknown),
                    events=turn.events,
                    source=item.source,
                )
                times.append(time.perf_counter() - started)
            progress(f"transcripts: {path.name} #{number}: {len(item.turns)} turns")
    # The baseline: encoding each turn's whole context, for the same turns.
    encodings = dict(Session.objects.filter(project=project).values_list("external_id", "encoding"))
    for path in files:
        for number, item in enumerate(parse_transcript(path.read_bytes(), name=path.name)):
            tokenizer = get_tokenizer(encodings[f"{path.stem}/{number}/{item.external_id}"[:200]])
            for turn in item.turns:
                text = context_text(turn.context)
                started = time.perf_counter()
                tokenizer.encode(text)
                baseline.append(time.perf_counter() - started)
    encoded = sum(c.encoded_tokens for c in counters.values())
    stats = encoding_stats(project)
    return {
        "files": len(files),
        "sessions": sessions,
        "all": summarize(times),
        "baseline": summarize(baseline),
        "ingest_total_s": sum(times),
        "baseline_total_s": sum(baseline),
        "encoded_tokens": encoded,
        **stats,
        "encoded_ratio": encoded / max(1, stats["distinct_tokens"]),
    }


def storage(connection: Any, *, project_name: str | None) -> dict[str, Any]:
    """Bytes of the contexts tables (with indexes and TOAST) against distinct content bytes."""
    from ctxweb.accounts.models import Project

    projects = Project.objects.all()
    if project_name is not None:
        projects = projects.filter(name=project_name)
    content = sum(encoding_stats(p)["distinct_content_bytes"] for p in projects)
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute(
                "select sum(d.pgsize) from dbstat d join sqlite_master m on d.name = m.name"
                " where m.tbl_name like 'contexts\\_%' escape '\\'"
            )
        else:
            cursor.execute(
                "select sum(pg_total_relation_size(c.oid)) from pg_class c"
                " join pg_namespace n on n.oid = c.relnamespace"
                " where c.relkind = 'r' and n.nspname = 'public' and c.relname like 'contexts\\_%'"
            )
        stored = int(cursor.fetchone()[0] or 0)
    return {
        "database_bytes": stored,
        "content_bytes": content,
        "bytes_per_content_byte": stored / max(1, content),
    }


# --- the report ------------------------------------------------------------------------------


def render(results: dict[str, dict[str, Any]], args: argparse.Namespace) -> str:
    import django
    import tiktoken

    versions = [f"Django {django.__version__}", f"tiktoken {tiktoken.__version__}"]
    versions += [r["database"] for r in results.values()]
    lines = [
        SECTION,
        "",
        f"Run {datetime.date.today().isoformat()} with `bench/ingest.py` on {machine(*versions)}.",
        "",
        "Load average (1 minute) at the start and after each backend: "
        + ", ".join(f"{load:.1f}" for load in getattr(args, "load", []))
        + " (the machine is shared: other processes ran meanwhile).",
        "",
        f"**Session**: `coding_session({args.turns}, seed={args.seed}, "
        f"target_tokens={args.target_tokens})`, openai-chat. Time per turn = "
        "`services.turn_request_parse` of the request (incremental: only the messages the "
        "previous body lacks are parsed) + `services.turn_ingest` (with the body's idempotency "
        "hash), in process, each body decoded afresh from JSON (untimed): the ingest view minus "
        "DRF's JSON decoding and authentication. Late turns = the last "
        f"{LATE}. Baseline = tiktoken encoding the late turn's whole context (the concatenated "
        "text "
        "of all its messages, uncached). Database calls: the `execute`s of a turn's queries "
        "(one may carry several statements), less transaction control.",
        "",
        "| backend | final tokens | all turns median / p95 | late median / p95 | baseline median "
        "| late / baseline (target < 0.33) | of which parse / turn_ingest (medians) "
        "| database calls per late turn | encoded / distinct tokens (target ≤ 1.1) "
        "| db bytes / content byte |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results.values():
        s = r["session"]
        lines.append(
            f"| {r['database']} | {s['final_tokens']:,} | {s['all']['median_ms']:.1f} / "
            f"{s['all']['p95_ms']:.1f} ms | {s['late']['median_ms']:.1f} / "
            f"{s['late']['p95_ms']:.1f} ms | {s['baseline']['median_ms']:.1f} ms "
            f"({s['baseline_tokens_median']:,.0f} tokens) | **{s['late_ratio']:.2f}** | "
            f"{s['late_parse']['median_ms']:.1f} / {s['late_ingest']['median_ms']:.1f} ms | "
            f"{s['late_executes']:g} | "
            f"{s['encoded_tokens']:,} / {s['distinct_tokens']:,} = **{s['encoded_ratio']:.2f}** | "
            f"{s['storage']['database_bytes'] / 1e6:.1f} MB / "
            f"{s['storage']['content_bytes'] / 1e6:.1f} MB = "
            f"{s['storage']['bytes_per_content_byte']:.2f} |"
        )
    first = next(iter(results.values()))["session"]
    lines += [
        "",
        f"Storing every turn's request whole would take {first['naive_bytes'] / 1e6:,.0f} MB of "
        "JSON for this session; ctxweb stores each distinct message once and each turn as a delta "
        "of message ids.",
    ]
    if all("http" in r for r in results.values()):
        lines += [
            "",
            f"**Through HTTP**: `coding_session({args.http_turns}, seed={args.seed}, "
            f"target_tokens={args.http_tokens})` posted turn after turn to one live "
            "`python -m ctxweb.server` (uvicorn) over a keep-alive connection (the embedded shape "
            "on SQLite; on PostgreSQL the same server with `DATABASE_URL`), rate limits off; the "
            "production shape adds Redis (`REDIS_URL`: channels-redis, every turn publishing "
            "`turn.created`, and the Redis cache of API keys and rate-limit counters) and the "
            "default rate limits. Latency "
            f"of the last {LATE} turns at the client, against `json.loads` of the same bytes "
            "timed in the same loop (target: median latency ≤ 3 × json.loads). The session is "
            f"posted in {args.http_runs} runs, each to a fresh server and database: the row is "
            "the run with the median ratio, and the ratio of every run follows it. CPU: the time "
            "the server process (all its threads) and PostgreSQL's backends used over the late "
            "turns, a turn's share: what the load of other processes on the machine changes "
            "least.",
            "",
            "| backend | final tokens | body | late turn median / p95 | json.loads median "
            "| latency / json.loads | CPU a late turn: server / database "
            "| the same sent as zstd: body, late turn median |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in results.values():
            h = r["http"]
            lines.append(
                f"| {r['database']} | {h['tokens']:,} | {h['body_mb']:.2f} MB | "
                f"{h['late_median_ms']:.1f} / {h['late_p95_ms']:.1f} ms | "
                f"{h['json_loads_ms']:.2f} ms | **{h['ratio']:.2f}×**{_runs(h)} | "
                f"{_cpu_cell(h)} | "
                f"{h['zstd_body_kb']:.0f} KB, {h['zstd_late_median_ms']:.1f} ms |"
            )
        for r in results.values():
            p = r["http"].get("production")
            if p:
                lines.append(
                    f"| {r['database']} + Redis, default rate limits (the production shape) | "
                    f"{p['tokens']:,} | {p['body_mb']:.2f} MB | "
                    f"{p['late_median_ms']:.1f} / {p['late_p95_ms']:.1f} ms | "
                    f"{p['json_loads_ms']:.2f} ms | **{p['ratio']:.2f}×** | "
                    f"{_cpu_cell(p)} | "
                    f"{p['zstd_body_kb']:.0f} KB, {p['zstd_late_median_ms']:.1f} ms |"
                )
        tooled = [r for r in results.values() if "tools" in r["http"]]
        if tooled:
            kb = tooled[0]["http"]["tools"]["tools_kb"]
            lines += [
                "",
                f"The same session with a coding agent's tool list ({kb:.0f} KB of tool"
                " definitions, the same in every call, as agents send them; `agent_tools` in"
                " `bench/ingest.py`), same run:",
                "",
                "| backend | final tokens | body | late turn median / p95 | json.loads median "
                "| latency / json.loads |",
                "|---|---|---|---|---|---|",
            ]
            for r in tooled:
                t = r["http"]["tools"]
                lines.append(
                    f"| {r['database']} | {t['tokens']:,} | {t['body_mb']:.2f} MB | "
                    f"{t['late_median_ms']:.1f} / {t['late_p95_ms']:.1f} ms | "
                    f"{t['json_loads_ms']:.2f} ms | **{t['ratio']:.2f}×** |"
                )
        for r in results.values():
            if r["http"].get("phases"):
                lines += [
                    "",
                    f"Where a late turn's time goes ({r['database']}): an extra run of the same"
                    " session, each step of each turn timestamped on the clock the client reads"
                    " (`bench/timed_app.py`: uvicorn's methods wrapped; that run's"
                    " latencies are not in the rows above). Medians of the last"
                    f" {LATE} turns, so they do not add up exactly:",
                    "",
                    "| step | median | × json.loads |",
                    "|---|---|---|",
                ]
                lines += [
                    f"| {what} | {ms:.3f} ms | {times:.2f}× |"
                    for what, ms, times in r["http"]["phases"]
                ]
        for r in results.values():
            if r["http"]["hottest"]:
                lines += [
                    "",
                    f"Where the server process's busy time goes during the late turns"
                    f" ({r['database']}; py-spy samples, each counted once, in the most specific"
                    " of these; the database server's own time is not in it):",
                    "",
                ]
                lines += [f"- {share:.0%} {what}" for what, share in r["http"]["hottest"]]
    transcripts = next(iter(results.values())).get("transcripts") or {}
    if transcripts.get("files"):
        t = transcripts
        lines += [
            "",
            f"**Real transcripts**: {t['files']} files, {t['sessions']} sessions, "
            f"{t['all']['count']:,} turns, imported with `compaction.transcripts` and ingested "
            "turn "
            "by turn (time = `services.turn_ingest`; baseline = tiktoken encoding each turn's "
            "whole context).",
            "",
            "| backend | median / p95 per turn | baseline median / p95 | total ingest / total "
            "baseline | encoded / distinct tokens | db bytes / content byte |",
            "|---|---|---|---|---|---|",
        ]
        for r in results.values():
            t = r["transcripts"]
            lines.append(
                f"| {r['database']} | {t['all']['median_ms']:.1f} / {t['all']['p95_ms']:.1f} ms | "
                f"{t['baseline']['median_ms']:.2f} / {t['baseline']['p95_ms']:.2f} ms | "
                f"{t['ingest_total_s']:.1f} s / {t['baseline_total_s']:.1f} s | "
                f"{t['encoded_tokens']:,} / {t['distinct_tokens']:,} = "
                f"{t['encoded_ratio']:.2f} | {t['storage']['database_bytes'] / 1e6:.1f} MB / "
                f"{t['storage']['content_bytes'] / 1e6:.1f} MB = "
                f"{t['storage']['bytes_per_content_byte']:.2f} (both projects) |"
            )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
