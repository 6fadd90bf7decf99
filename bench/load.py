"""Load benchmark: sustained ingestion over HTTP against several uvicorn processes on PostgreSQL.

Usage: ``.venv/bin/python bench/load.py [--servers 3] [--clients 12] [--readers 4]
[--turns 200] [--target-tokens 150000] [--redis-url redis://127.0.0.1:6379/14] [--rounds 2]
[--no-write]``

Creates a throwaway database ``ctxweb_load`` on ``$BENCH_POSTGRES_URL`` (default
``postgresql://postgres@127.0.0.1:5432/postgres``), migrates it, creates a project and an ingest
key, and starts ``--servers`` uvicorn processes (``python -m ctxweb.server``, what ctxweb
ships) on loopback ports, in the production shape: PostgreSQL, and with ``--redis-url`` the
channels-redis layer (every turn publishes ``turn.created``) and the Redis cache. No proxy: the
clients spread their requests over the ports themselves. The rate limits are switched off
(``CTXWEB_RATE_LIMIT=""``): one key drives all the load, which a real limit would cap.

``--clients`` threads each play a coding agent: a session of ``--turns`` model calls
(:func:`ctxweb.contexts.demo.coding_session`, growing to ``--target-tokens``), posted one after
the other with keep-alive connections, each phase the same sessions under new ids:

1. **ingest, round robin**: the posts of all clients go to the servers in one rotation, as a
   load balancer's round robin sends them: a turn's previous turn was usually written by
   another process (which remembers an earlier turn of the session);
2. **ingest, each client rotating**: each client sends its posts to the servers in a rotation of
   its own (the servers' share of the posts in flight then drifts apart);
3. **ingest, sticky**: each client keeps to one server (what a proxy with session affinity does:
   the process remembers the previous turn);
4. **ingest + chart**: phase 1 again while ``--readers`` threads fetch the chart data
   (``GET /api/v1/sessions/{id}/turns``) of random live sessions as fast as they can.

Phases 1-3 run ``--rounds`` times, in the order above and then reversed, and each is reported
over its rounds (the machine's speed drifts during a run: no routing always runs first).

Latency is measured by the client (loopback, whole request). The database is dropped afterwards.
Results go to ``docs/benchmarks.md`` under ``## Load`` (the other sections are kept).
"""

from __future__ import annotations

import argparse
import datetime
import http.client
import itertools
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from record import DOCS, machine, write_section  # noqa: E402

from tests.support.servers import LiveServer  # noqa: E402

SECTION = "## Load"
LOAD_DB = "ctxweb_load"


def admin_url() -> str:
    return os.environ.get("BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres")


def load_url() -> str:
    base = admin_url().rsplit("/", 1)[0]
    return f"{base}/{LOAD_DB}".replace("postgresql://", "postgres://", 1)


def progress(message: str) -> None:
    print(f"[load] {message}", file=sys.stderr, flush=True)


# --- the throwaway database ----------------------------------------------------------------------


def database_create() -> None:
    import psycopg

    with psycopg.connect(admin_url(), autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {LOAD_DB} WITH (FORCE)")
        admin.execute(f"CREATE DATABASE {LOAD_DB}")


def database_drop() -> None:
    import psycopg

    with psycopg.connect(admin_url(), autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {LOAD_DB} WITH (FORCE)")


def postgres_version() -> str:
    import psycopg

    with psycopg.connect(admin_url()) as conn:
        row = conn.execute("SHOW server_version").fetchone()
    return str(row[0]).split(" ")[0] if row else "?"


def server_env(args: argparse.Namespace, data_dir: Path) -> dict[str, str]:
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "ctxweb.settings",
        "DATABASE_URL": load_url(),
        "REDIS_URL": args.redis_url,
        "CTXWEB_DATA_DIR": str(data_dir),
        "SECRET_KEY": "load-bench-" + "x" * 40,
        "DEBUG": "0",
        "CTXWEB_RATE_LIMIT": "",
        "CTXWEB_RATE_LIMIT_COSTLY": "",
        "PYTHONUNBUFFERED": "1",
    }


def setup_project(env: dict[str, str]) -> str:
    """Migrate the load database; create a project and an ingest key; return the key."""
    python = sys.executable
    subprocess.run([python, "manage.py", "migrate", "--noinput"], cwd=ROOT, env=env, check=True)
    subprocess.run([python, "manage.py", "create_project", "load"], cwd=ROOT, env=env, check=True)
    made = subprocess.run(
        [python, "manage.py", "create_api_key", "--project", "load", "--role", "ingest"],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return made.stdout.strip().splitlines()[-1]


# --- clients -------------------------------------------------------------------------------------


@dataclass
class Tally:
    latencies: list[float] = field(default_factory=list)
    #: Bytes of each answered request's body, in step with ``latencies``.
    sizes: list[int] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def ok(self, seconds: float, size: int = 0) -> None:
        with self.lock:
            self.latencies.append(seconds)
            self.sizes.append(size)

    def error(self, what: str) -> None:
        with self.lock:
            self.errors[what] = self.errors.get(what, 0) + 1


class Connections:
    """Keep-alive connections of one thread, one per server port."""

    def __init__(self, ports: list[int]) -> None:
        self.ports = ports
        self.open: dict[int, http.client.HTTPConnection] = {}

    def request(
        self, port: int, method: str, path: str, body: bytes | None, key: str
    ) -> tuple[int, bytes]:
        headers = {"Authorization": f"Bearer {key}"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        for attempt in range(2):  # a keep-alive connection the server closed: reconnect once
            conn = self.open.get(port)
            if conn is None:
                conn = self.open[port] = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            try:
                conn.request(method, path, body=body, headers=headers)
                response = conn.getresponse()
                return response.status, response.read()
            except (http.client.HTTPException, ConnectionError):
                conn.close()
                del self.open[port]
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def close(self) -> None:
        for conn in self.open.values():
            conn.close()


@dataclass
class Shared:
    """What the threads of one phase share."""

    key: str
    ports: list[int]
    stop: threading.Event
    bodies: list[list[bytes]]
    live: list[str] = field(default_factory=list)
    ingest: Tally = field(default_factory=Tally)
    chart: Tally = field(default_factory=Tally)
    sessions: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    #: Round robin's rotation, one for all clients (``next`` on a count is atomic).
    rotation: itertools.count[int] = field(default_factory=itertools.count)


def sessions_serialized(args: argparse.Namespace) -> list[list[bytes]]:
    """The sessions the agents replay (each under a new id), serialized once before the phases:
    the client threads share one interpreter with the bench, and encoding a 150K-token body in
    Python per post would make them, not the servers, the bottleneck."""
    from ctxweb.contexts.demo import coding_session

    count = args.clients
    progress(f"generating {count} sessions of {args.turns} turns ({args.target_tokens:,} tokens)")
    return [
        [
            json.dumps(body).encode()
            for body in coding_session(
                args.turns, seed=seed, target_tokens=args.target_tokens, compact_at=None
            )[args.from_turn :]
        ]
        for seed in range(1, count + 1)
    ]


#: How clients pick a server for each post (see the module's docstring).
ROUTINGS = ("round robin", "each client rotating", "sticky")


def agent(shared: Shared, args: argparse.Namespace, client: int, phase: str, routing: str) -> None:
    """Post client ``client``'s session once, turn after turn: every phase replays the same
    sessions, so phases compare the same work."""
    connections = Connections(shared.ports)
    posts = itertools.count(client)
    external_id = f"{re.sub(r'[^a-z0-9]+', '-', phase)}-{client}"
    shared.live.append(external_id)
    try:
        for payload in shared.bodies[client % len(shared.bodies)]:
            if shared.stop.is_set():
                return
            if routing == "sticky":
                turn = client
            elif routing == "round robin":
                turn = next(shared.rotation)
            else:  # each client rotating
                turn = next(posts)
            port = shared.ports[turn % len(shared.ports)]
            started = time.perf_counter()
            try:
                status, _ = connections.request(
                    port, "POST", f"/api/v1/sessions/{external_id}/turns", payload, shared.key
                )
            except OSError as error:
                shared.ingest.error(type(error).__name__)
                continue
            if status == 201:
                shared.ingest.ok(time.perf_counter() - started, len(payload))
            else:  # 200 too: a retry of a stored turn, not an ingested one
                shared.ingest.error(str(status))
    finally:
        connections.close()


def reader(shared: Shared, seed: int) -> None:
    chooser = random.Random(seed)
    connections = Connections(shared.ports)
    try:
        while not shared.stop.is_set():
            if not shared.live:
                time.sleep(0.05)
                continue
            external_id = chooser.choice(shared.live[-32:])
            port = chooser.choice(shared.ports)
            started = time.perf_counter()
            try:
                status, _ = connections.request(
                    port, "GET", f"/api/v1/sessions/{external_id}/turns", None, shared.key
                )
            except OSError as error:
                shared.chart.error(type(error).__name__)
                continue
            if status == 200:
                shared.chart.ok(time.perf_counter() - started)
            elif status != 404:  # a session whose first turn is still in flight
                shared.chart.error(str(status))
    finally:
        connections.close()


def percentiles(values: list[float]) -> dict[str, float]:
    if len(values) < 2:
        return {"p50": float("nan"), "p95": float("nan"), "p99": float("nan")}
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return {"p50": cuts[49] * 1000, "p95": cuts[94] * 1000, "p99": cuts[98] * 1000}


def run_phase(
    args: argparse.Namespace,
    key: str,
    ports: list[int],
    name: str,
    *,
    routing: str,
    readers: int,
    bodies: list[list[bytes]],
) -> dict[str, Any]:
    progress(f"phase {name}: {args.clients} clients, {readers} chart readers")
    shared = Shared(key=key, ports=ports, stop=threading.Event(), bodies=bodies)
    agents = [
        threading.Thread(target=agent, args=(shared, args, c, name, routing), daemon=True)
        for c in range(args.clients)
    ]
    readers_ = [
        threading.Thread(target=reader, args=(shared, r), daemon=True) for r in range(readers)
    ]
    started = time.perf_counter()
    for thread in agents + readers_:
        thread.start()
    for thread in agents:
        thread.join(timeout=1800)
    with shared.ingest.lock, shared.chart.lock:
        elapsed = time.perf_counter() - started
        ingest = list(shared.ingest.latencies)
        sent = sum(shared.ingest.sizes)
        chart = list(shared.chart.latencies)
    shared.stop.set()
    for thread in readers_:
        thread.join(timeout=180)
    result = {
        "phase": name,
        "clients": args.clients,
        "readers": readers,
        "seconds": elapsed,
        "turns": len(ingest),
        "turns_per_second": len(ingest) / elapsed,
        "megabytes_per_second": sent / elapsed / 1e6,
        "mean_body_kb": sent / max(1, len(ingest)) / 1e3,
        "ingest": percentiles(ingest),
        "ingest_errors": dict(shared.ingest.errors),
        "charts": len(chart),
        "charts_per_second": len(chart) / elapsed,
        "chart": percentiles(chart),
        "chart_errors": dict(shared.chart.errors),
        "sessions": len(shared.live),
    }
    progress(json.dumps(result))
    result["latencies"] = ingest
    return result


def merged(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """One phase's rounds as one: turns over the rounds' seconds, latencies pooled."""
    first = rounds[0]
    if len(rounds) == 1:
        return {**first, "rounds": [first["turns_per_second"]]}
    seconds = sum(r["seconds"] for r in rounds)
    turns = sum(r["turns"] for r in rounds)
    sent = sum(r["megabytes_per_second"] * r["seconds"] for r in rounds)
    errors: dict[str, int] = {}
    for r in rounds:
        for what, count in r["ingest_errors"].items():
            errors[what] = errors.get(what, 0) + count
    return {
        **first,
        "seconds": seconds,
        "turns": turns,
        "turns_per_second": turns / seconds,
        "megabytes_per_second": sent / seconds,
        "ingest": percentiles([x for r in rounds for x in r["latencies"]]),
        "ingest_errors": errors,
        "rounds": [r["turns_per_second"] for r in rounds],
    }


# --- the report ----------------------------------------------------------------------------------


def versions() -> list[str]:
    import django
    import uvicorn

    return [f"Django {django.get_version()}", f"uvicorn {uvicorn.__version__}"]


def ms(values: dict[str, float]) -> str:
    return f"{values['p50']:.0f} / {values['p95']:.0f} / {values['p99']:.0f} ms"


def report(args: argparse.Namespace, results: list[dict[str, Any]], pg: str) -> str:
    today = datetime.date.today().isoformat()
    redis = (
        f"Redis at `{args.redis_url}` (channels-redis layer: every turn publishes"
        " `turn.created`; Redis cache)"
        if args.redis_url
        else "no Redis (in-memory layer)"
    )
    lines = [
        SECTION,
        "",
        f"Run {today} with `bench/load.py` on {machine(*versions(), f'PostgreSQL {pg}')}."
        f" Everything on one machine: {args.servers} uvicorn processes,"
        f" PostgreSQL, Redis and the client threads share its cores.",
        "",
        f"**Setup**: {args.servers} × `python -m ctxweb.server` on loopback ports (no proxy:"
        f" clients spread requests over the ports), PostgreSQL database `{LOAD_DB}` (created,"
        f" migrated, dropped after), {redis}, default `CONN_MAX_AGE` and"
        f" `CTXWEB_HTTP_THREADS`, rate limits off. {args.clients}"
        f" client threads each play a coding agent: `coding_session({args.turns},"
        f" target_tokens={args.target_tokens:,})`"
        + (f" from its turn {args.from_turn}" if args.from_turn else "")
        + " posted turn after turn (keep-alive HTTP; the bodies serialized before the phases);"
        f" bodies grow to ~{args.target_tokens // 1000}K tokens. Every phase replays the same"
        " sessions under new ids (the same work: turns/s and MB/s compare), after an unreported"
        f" warm-up of {args.warmup_turns} turns per client; latency is the client's (whole"
        " request on loopback); p50 / p95 / p99.",
        "",
        "| phase | ingest turns/s | bodies MB/s (mean body) | ingest p50 / p95 / p99"
        " | ingest errors | chart GETs/s | chart p50 / p95 / p99 | chart errors |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        chart = (
            f"{r['charts_per_second']:.1f} | {ms(r['chart'])} | {sum(r['chart_errors'].values())}"
            if r["readers"]
            else "– | – | –"
        )
        lines.append(
            f"| {r['phase']} ({r['clients']} clients"
            + (f", {r['readers']} chart readers" if r["readers"] else "")
            + f") | **{r['turns_per_second']:.1f}** ({r['turns']:,} turns"
            + (
                "; rounds " + ", ".join(f"{x:.1f}" for x in r["rounds"])
                if len(r.get("rounds", [])) > 1
                else ""
            )
            + ")"
            f" | {r['megabytes_per_second']:.1f} ({r['mean_body_kb']:.0f} KB) | {ms(r['ingest'])}"
            f" | {sum(r['ingest_errors'].values())} | {chart} |"
        )
    by_phase = {r["phase"]: r for r in results}
    robin, sticky = by_phase.get("ingest, round robin"), by_phase.get("ingest, sticky")
    if robin and sticky and sticky["turns_per_second"]:
        each = [a / b for a, b in zip(robin["rounds"], sticky["rounds"], strict=True) if b]
        lines += [
            "",
            f"Round robin / sticky: {robin['turns_per_second']:.1f} /"
            f" {sticky['turns_per_second']:.1f} turns/s ="
            f" **{robin['turns_per_second'] / sticky['turns_per_second']:.0%}** (target: within"
            " 10%)."
            + (
                f" Each routing ran {args.rounds} times, in alternating order; the figures are"
                " turns over the rounds' seconds, latencies pooled; round by round, round robin"
                " / sticky = " + ", ".join(f"{x:.0%}" for x in each) + "."
                if args.rounds > 1
                else ""
            ),
        ]
    lines += [
        "",
        "Round robin sends the posts of all clients to the processes in one rotation, as a load"
        " balancer does, so the previous turn of a session was usually written by another"
        " process: that process remembers an earlier turn of the session and takes what it"
        " knows from there (the messages stored since are looked up and the turns since read"
        " in the session lock's round trip); sticky keeps a client on one process, as a proxy"
        " with session affinity would (see `docs/deploy.md`). With each client rotating on its"
        " own, the processes' shares of the posts in flight drift apart: a process serving more"
        " than its share is held to one core by its interpreter lock while another idles, so"
        " that phase measures the spread of the load more than the cost of a turn."
        " The chart readers fetch whole sessions of up to"
        f" {args.turns} turns while they grow.",
        "",
        "Each client waits for its answer before posting again, so by Little's law the latency is"
        " the clients over the throughput ("
        + ", ".join(
            f"{r['clients']} / {r['turns_per_second']:.1f}"
            f" = {r['clients'] / r['turns_per_second']:.2f} s"
            for r in results
            if r["turns_per_second"]
        )
        + f" mean): with {os.cpu_count()} cores shared by the servers, PostgreSQL and the clients,"
        " that is mostly time spent queued for a core. Each client has its own session, so no"
        " request waits on another's session lock.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, default=3)
    parser.add_argument("--clients", type=int, default=12)
    parser.add_argument("--readers", type=int, default=4)
    parser.add_argument("--warmup-turns", type=int, default=10)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--target-tokens", type=int, default=150_000)
    parser.add_argument(
        "--from-turn",
        type=int,
        default=0,
        help="agents start each session at this turn (its first post holds the context so far)",
    )
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/14")
    parser.add_argument(
        "--rounds", type=int, default=2, help="runs of each ingest routing (orders alternate)"
    )
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()

    pg = postgres_version()
    database_create()
    servers: list[LiveServer] = []
    try:
        with tempfile.TemporaryDirectory(prefix="ctxweb-load-") as data:
            env = server_env(args, Path(data))
            key = setup_project(env)
            # This process generates the bodies with ctxweb's demo module: Django set up, no DB use.
            os.environ.update({k: env[k] for k in ("DJANGO_SETTINGS_MODULE", "DATABASE_URL")})
            os.environ["CTXWEB_DATA_DIR"] = data
            import django

            django.setup()
            servers = [LiveServer(env, keep_lines=2000) for _ in range(args.servers)]
            for server in servers:
                server.wait_ready()
            ports = [s.port for s in servers if s.port is not None]
            bodies = sessions_serialized(args)
            run_phase(  # warm-up, not reported: imports, first connections, caches
                args,
                key,
                ports,
                "warm up",
                routing="round robin",
                readers=0,
                bodies=[session[: args.warmup_turns] for session in bodies],
            )
            # Each routing once per round, the order reversed every other round: the machine's
            # speed drifts (and the database grows) during a run, and no routing keeps one place.
            rounds: dict[str, list[dict[str, Any]]] = {routing: [] for routing in ROUTINGS}
            for number in range(args.rounds):
                order = ROUTINGS if number % 2 == 0 else ROUTINGS[::-1]
                for routing in order:
                    rounds[routing].append(
                        run_phase(
                            args,
                            key,
                            ports,
                            f"ingest, {routing}" + (f" {number + 1}" if args.rounds > 1 else ""),
                            routing=routing,
                            readers=0,
                            bodies=bodies,
                        )
                    )
            results = [
                {**merged(rounds[routing]), "phase": f"ingest, {routing}"} for routing in ROUTINGS
            ]
            results.append(
                run_phase(
                    args,
                    key,
                    ports,
                    "ingest + chart",
                    routing="round robin",
                    readers=args.readers,
                    bodies=bodies,
                )
            )
            for server in servers:
                server.stop()
            errors = [line for s in servers for line in s.lines if "Error" in line]
            if errors:
                progress(f"server errors ({len(errors)}), first: {errors[:5]}")
    finally:
        for server in servers:
            server.stop()
        database_drop()
    text = report(args, results, pg)
    print(text)
    if not args.no_write:
        write_section(SECTION, text)
        progress(f"wrote {DOCS.relative_to(ROOT)} ({SECTION})")


if __name__ == "__main__":
    main()
