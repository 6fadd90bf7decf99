"""Hostile load benchmark: well-behaved agents through the proxy while others misbehave (issue 33).

Usage: ``.venv/bin/python bench/hostile.py [--shape embedded|production|both] [--seconds 60]
[--kill-at SECONDS] [--callers 32] [--no-write]``

One run per shape, on one ctxweb server (``python -m ctxweb.server``, uvicorn) and a loopback
upstream (:mod:`hostile_upstream`, uvicorn, two workers) that streams a chat completion over
200 ms:

1. setup: a project and an operator key; a managed session of four proxied calls with long tool
   outputs and ``ctxweb-auto`` applied to it through the API; a calibration session of two calls
   (the size of a turn tells which call of a caller it is: every caller sends the same calls);
2. baseline (same run): ``--callers`` streaming callers straight to the upstream for
   ``--baseline-seconds``;
3. idle: the server's resident memory (``VmRSS``) at rest;
4. load, ``--seconds``: the same callers through the proxy, each its own session, and
   ``--control`` callers straight to the upstream (what the machine's load costs a call that
   does not go through ctxweb), with 8 hanging
   calls (headers then nothing, or nothing), 8 clients that ask for a 512 MB answer and never
   read it, 3 managed calls of ``--big-mb`` MB to the managed session, 4 threads posting OTLP
   exports back to back and, a quarter in, one gzip bomb of ``--bomb-mb`` MB of empty spans;
   ``/api/v1/health`` every 50 ms; the server's memory every 200 ms; the callers' sessions' turn
   counts every 250 ms. At ``--kill-at`` the server's process group is killed (SIGKILL) and
   started again on the same port and data; callers send a failed call again;
5. afterwards (up to ``--drain`` seconds for the recorders to catch up, waited for while turns
   still come or the recording queue holds the callers' calls): every call a caller read whole
   must be a turn of its session; the recorders' CPU and memory over the load and the drain.

Each part of the load runs in its own process (:mod:`hostile_load`). Shapes: ``embedded``
(SQLite, recorder processes beside the web process) and ``production`` (a
``ctxweb_bench_hostile`` database created on ``$BENCH_POSTGRES_URL`` and dropped afterwards,
Redis database 13, a Celery worker ``-c 2``; ``$BENCH_HOSTILE_DB`` and
``$BENCH_HOSTILE_REDIS_URL`` name others). Results go to ``docs/benchmarks.md`` under
``## Hostile load``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(BENCH))
from hostile_load import chat_body, conversation, managed_history, run_role  # noqa: E402
from record import report  # noqa: E402

from tests.support.servers import (  # noqa: E402
    LiveServer,
    create_key,
    embedded_env,
    free_port,
    manage,
)

SECTION = "## Hostile load"
#: The production shape's database and Redis (runs side by side on one machine: name others).
BENCH_DB = os.environ.get("BENCH_HOSTILE_DB", "ctxweb_bench_hostile")
REDIS = os.environ.get("BENCH_HOSTILE_REDIS_URL", "redis://127.0.0.1:6379/13")
CALLERS = "hostile-caller-"
CALM = "hostile-calm-"
MANAGED = "hostile-managed"
#: The recorder is taken to have stopped when no caller's session gained a turn for this long.
STALLED = 20.0
TARGET_ADDED = 0.10
#: Seconds after the server is back that the callers' p99 "outside the restart" leaves out.
RECOVERY = 10.0
TARGET_HEALTH_MS = 100.0
TARGET_MEMORY_MB = 500.0
TARGET_RECORDED_S = 10.0


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(len(ordered) * fraction + 0.5) - 1))]


# --- processes ----------------------------------------------------------------------------------


class Upstream:
    """The loopback stand-in upstream: uvicorn, two workers, in its own process group."""

    def __init__(self) -> None:
        self.port = free_port()
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "uvicorn",
                "hostile_upstream:app",
                "--app-dir",
                str(BENCH),
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--workers",
                "2",
                "--loop",
                "uvloop",
                "--http",
                "httptools",
                "--log-level",
                "warning",
                "--no-access-log",
                "--timeout-keep-alive",
                "30",
            ],
            cwd=ROOT,
            start_new_session=True,
        )
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                httpx.post(f"{self.url}/v1/chat/completions", content=b"{}", timeout=5)
                return
            except httpx.HTTPError:
                time.sleep(0.2)
        raise RuntimeError("the upstream stand-in did not start")

    def stop(self) -> None:
        stop_group(self.process)


def stop_group(process: subprocess.Popen[Any]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=15)


class Role:
    """One part of the load (:mod:`hostile_load`) in its own process."""

    def __init__(self, role: str, config: dict[str, Any], folder: Path) -> None:
        self.out = folder / f"{role}.json"
        path = folder / f"{role}.config.json"
        path.write_text(json.dumps(config))
        self.process = subprocess.Popen(
            [
                sys.executable,
                str(BENCH / "hostile.py"),
                "--role",
                role,
                "--config",
                str(path),
                "--out",
                str(self.out),
            ],
            cwd=ROOT,
        )

    def result(self, timeout: float = 600) -> dict[str, Any]:
        self.process.wait(timeout=timeout)
        loaded: dict[str, Any] = json.loads(self.out.read_text())
        return loaded


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of process ``pid`` so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


#: The server's helper processes, which serve its requests (counted in its memory): its preparers
#: and its capturers, ``manage.py <command> --parent <its pid>``.
HELPERS = (b"prepare_calls", b"receive_telemetry")


def helpers(parent: int) -> list[int]:
    """The pids of ``parent``'s helper processes (:data:`HELPERS`)."""
    return list(helpers_by_kind(parent))


def helpers_by_kind(parent: int) -> dict[int, str]:
    """``parent``'s helper processes (:data:`HELPERS`): each pid's command."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        kind = next((name for name in HELPERS if name in argv), None)
        if kind is not None and b"--parent" in argv:
            at = argv.index(b"--parent") + 1
            if at < len(argv) and argv[at] == str(parent).encode():
                found[int(entry.name)] = kind.decode()
    return found


def helpers_cpu(parent: int) -> dict[str, float]:
    """CPU seconds so far of ``parent``'s helper processes, summed by command."""
    summed: dict[str, float] = {}
    for pid, kind in helpers_by_kind(parent).items():
        try:
            summed[kind] = summed.get(kind, 0.0) + cpu_seconds(pid)
        except (OSError, IndexError, ValueError):
            continue
    return summed


class Memory:
    """The server's memory: its web process's ``VmRSS`` and its helper processes' (preparers,
    capturers), summed, every 200 ms, and their summed ``VmHWM`` when asked (each process's own
    peak: at least the peak of the sum)."""

    def __init__(self) -> None:
        self.pid = 0
        self.samples: list[tuple[float, float]] = []
        self.peaks: list[float] = []
        self.running = True
        self.thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def read(pid: int, field: str) -> float:
        """``field`` of ``/proc/<pid>/status`` in MB (0 when the process is gone)."""
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024
        except OSError:
            pass
        return 0.0

    def _run(self) -> None:
        found: list[int] = []
        scanned = 0.0
        while self.running:
            if time.monotonic() - scanned > 1:  # helpers started again after a kill
                found, scanned = helpers(self.pid), time.monotonic()
            rss = self.read(self.pid, "VmRSS")
            if rss:
                rss += sum(self.read(pid, "VmRSS") for pid in found)
                self.samples.append((time.time(), rss))
            time.sleep(0.2)

    def high_water(self) -> None:
        pids = [self.pid, *helpers(self.pid)]
        self.peaks.append(sum(self.read(pid, "VmHWM") for pid in pids))


class Recorders:
    """The recorder processes (the embedded shape's ``manage.py record_calls`` children of the
    server, the production shape's Celery worker and its children): their CPU seconds and
    summed ``VmRSS`` every 500 ms. A process's CPU is its last sample's (one that ends between
    samples loses at most 500 ms of it)."""

    def __init__(self, server_pid: Any, worker: subprocess.Popen[Any] | None) -> None:
        self.server_pid = server_pid  # () -> the web process's pid now
        self.worker = worker
        self.parents: set[int] = set()
        self.cpu: dict[int, float] = {}
        self.samples: list[tuple[float, float]] = []
        self.running = True
        self.thread = threading.Thread(target=self._run, daemon=True)

    def pids(self) -> list[int]:
        self.parents.add(self.server_pid())
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                if self.worker is not None:
                    stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                    if int(stat[2]) == self.worker.pid:  # its process group
                        found.append(int(entry.name))
                    continue
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except (OSError, IndexError, ValueError):
                continue
            if b"record_calls" in argv and b"--parent" in argv:
                at = argv.index(b"--parent") + 1
                if at < len(argv) and argv[at].isdigit() and int(argv[at]) in self.parents:
                    found.append(int(entry.name))
        return found

    def sample(self) -> None:
        rss = 0.0
        for pid in self.pids():
            try:
                self.cpu[pid] = cpu_seconds(pid)
            except (OSError, IndexError, ValueError):
                continue
            rss += Memory.read(pid, "VmRSS")
        self.samples.append((time.time(), rss))

    def _run(self) -> None:
        while self.running:
            self.sample()
            time.sleep(0.5)

    def cpu_total(self) -> float:
        return sum(self.cpu.values())

    def rss_between(self, start: float, end: float) -> list[float]:
        return [rss for at, rss in self.samples if start <= at <= end]


# --- the API ------------------------------------------------------------------------------------


def api(url: str, key: str, method: str, path: str, body: Any = None) -> Any:
    answer = httpx.request(
        method,
        f"{url}/api/v1/{path}",
        json=body,
        timeout=60,
        headers={"Authorization": f"Bearer {key}"},
    )
    answer.raise_for_status()
    return answer.json()


def wait_for(check: Any, what: str, seconds: float = 120) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            value = check()
        except httpx.HTTPStatusError as error:
            if error.response.status_code != 404:
                raise
            value = None
        if value:
            return value
        time.sleep(0.2)
    raise RuntimeError(f"{what}: not within {seconds:.0f} s")


def turns_of(url: str, key: str, session: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    while True:
        page = api(url, key, "GET", f"sessions/{session}/turns?limit=500&offset={len(found)}")
        items = page["results"] if isinstance(page, dict) else page
        found += items
        if not isinstance(page, dict) or not page.get("next"):
            return found


class Queue:
    """The server's recording queue, read straight from its database (the bench's own
    connection, read-only on SQLite): how many relayed calls wait to be recorded, and how many
    of them are in lanes of sessions named with ``prefix``."""

    def __init__(self, env: dict[str, str]) -> None:
        self.url = env.get("DATABASE_URL") or ""
        self.sqlite = Path(env["CTXWEB_DATA_DIR"]) / "db.sqlite3"

    def waiting(self, prefix: str) -> tuple[int, int]:
        query = (
            "SELECT count(*), coalesce(sum(CASE WHEN lane LIKE %s THEN 1 ELSE 0 END), 0)"
            " FROM contexts_pendingcall"
        )
        pattern = f"%:s:{prefix}%"
        try:
            if self.url:
                import psycopg

                with psycopg.connect(self.url.replace("postgres://", "postgresql://")) as conn:
                    row = conn.execute(query, (pattern,)).fetchone()
            else:
                import sqlite3

                lite = sqlite3.connect(f"file:{self.sqlite}?mode=ro", uri=True, timeout=20)
                try:
                    row = lite.execute(query.replace("%s", "?"), (pattern,)).fetchone()
                finally:
                    lite.close()
        except Exception as error:  # the table is not there yet, or the server is restarting
            progress(f"the recording queue could not be read: {error}")
            return -1, -1
        return (int(row[0]), int(row[1])) if row else (0, 0)


def caught_up(
    url: str, key: str, prefix: str, done: dict[str, Any], seconds: float, queue: Queue
) -> dict[str, Any]:
    """Wait until every call in ``done`` is a turn of its session, or the recorders have
    stopped, or ``seconds`` passed: a backlog still being drained is waited for (a call recorded
    late is late, not lost). The recorders have stopped when no session gained a turn for
    :data:`STALLED` seconds while the queue holds none of these sessions' calls. When (wall
    clock) that was, and how many calls the queue still held then (in all, of these
    sessions)."""
    completed = {s: len(c) for s, c in done["calls"].items()}
    deadline = time.time() + seconds
    last: dict[str, int] = {}
    changed = time.time()
    waiting = (-1, -1)
    while time.time() < deadline:
        counts = {
            s["external_id"]: s["turn_count"]
            for s in api(url, key, "GET", f"sessions?q={prefix}&limit=500")["results"]
        }
        waiting = queue.waiting(prefix)
        if all(counts.get(s, 0) >= n for s, n in completed.items()):
            break
        if counts != last:
            last, changed = counts, time.time()
        elif time.time() - changed > STALLED and waiting[1] == 0:
            break
        time.sleep(0.25)
    return {"at": time.time(), "queued": waiting[0], "queued_here": waiting[1]}


def set_up(url: str, key: str) -> tuple[int, int]:
    """The managed session (four calls, ``ctxweb-auto`` applied) and the calibration: the
    counted tokens of a caller's first call and what each further call adds."""
    proxy = f"{url}/proxy/openai/v1/chat/completions"
    headers = {"Authorization": "Bearer sk-bench", "X-Ctxweb-Key": key}
    for messages in managed_history():
        body = json.dumps({"model": "gpt-4o", "messages": messages}).encode()
        answer = httpx.post(
            proxy, content=body, timeout=60, headers={**headers, "X-Ctxweb-Session": MANAGED}
        )
        answer.raise_for_status()
    wait_for(lambda: api(url, key, "GET", f"sessions/{MANAGED}")["turn_count"] == 4, "4 turns")
    created = api(
        url,
        key,
        "POST",
        f"sessions/{MANAGED}/operations",
        {"strategy": "ctxweb-auto", "params": {"target_tokens": 4000, "latest_turn": "outputs"}},
    )
    operation = wait_for(
        lambda: (lambda o: o if o["status"] in ("succeeded", "failed") else None)(
            api(url, key, "GET", f"operations/{created['id']}")
        ),
        "the operation",
    )
    if operation["status"] != "succeeded":
        raise RuntimeError(f"the managed session's operation failed: {operation}")
    for k in (1, 2):
        with httpx.stream(
            "POST",
            proxy,
            content=chat_body(conversation(k)),
            timeout=60,
            headers={**headers, "X-Ctxweb-Session": "hostile-calibration"},
        ) as r:
            r.raise_for_status()
            r.read()
    turns = wait_for(
        lambda: (lambda t: t if len(t) == 2 else None)(turns_of(url, key, "hostile-calibration")),
        "the calibration's 2 turns",
    )
    first, second = (t["counted_tokens"] for t in turns)
    return first, second - first


# --- one shape ----------------------------------------------------------------------------------


def shape_env(
    shape: str, data: Path, upstream: str, extra: list[str] | None = None
) -> dict[str, str]:
    env = embedded_env(
        data,
        CTXWEB_UPSTREAM_OPENAI=f"{upstream}/v1",
        CTXWEB_RATE_LIMIT="",
        CTXWEB_RATE_LIMIT_COSTLY="",
    )
    for setting in extra or ():
        name, _, value = setting.partition("=")
        env[name] = value
    if shape == "production":
        admin = postgres_admin_url()
        env["DATABASE_URL"] = admin.rsplit("/", 1)[0] + f"/{BENCH_DB}"
        env["REDIS_URL"] = REDIS
    return env


def postgres_admin_url() -> str:
    return os.environ.get("BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres")


def recreate_database(*, create: bool) -> None:
    import psycopg

    with psycopg.connect(postgres_admin_url(), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {BENCH_DB} WITH (FORCE)")
        if create:
            conn.execute(f"CREATE DATABASE {BENCH_DB}")


def flush_redis() -> None:
    import redis

    redis.Redis.from_url(REDIS).flushdb()


def start_worker(env: dict[str, str], concurrency: int = 2) -> subprocess.Popen[Any]:
    return subprocess.Popen(
        [
            str(Path(sys.executable).with_name("celery")),
            "-A",
            "ctxweb",
            "worker",
            "-c",
            str(concurrency),
            "--loglevel=WARNING",
            "--without-gossip",
            "--without-mingle",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )


def run_shape(shape: str, upstream: Upstream, args: argparse.Namespace) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix=f"ctxweb-hostile-{shape}-"))
    if shape == "production":
        recreate_database(create=True)
        flush_redis()
    env = shape_env(shape, folder / "data", upstream.url, args.set)
    worker = None
    server: LiveServer | None = None
    dead: LiveServer | None = None  # the server killed mid-load
    try:
        progress(f"[{shape}] migrating, creating a key")
        key = create_key(env, role="operator")
        # The misbehaving clients are another agent: their own key (a key's limits are its own).
        rogue = manage(env, "create_api_key", "--project", "p", "--role", "ingest")
        rogue = rogue.strip().splitlines()[-1].strip()
        if shape == "production":
            worker = start_worker(env, args.worker_concurrency)
        server = LiveServer(env).wait_ready()
        url, port = server.url, server.port
        progress(f"[{shape}] setting up the managed session and the calibration")
        first, step = set_up(url, key)

        progress(f"[{shape}] baseline: {args.callers} callers straight to the upstream")
        now = time.time()
        common = {"callers": args.callers, "stop": str(folder / "stop")}
        (folder / "b").mkdir()
        baseline = Role(
            "callers",
            {**common, "url": f"{upstream.url}/v1", "until": now + args.baseline_seconds},
            folder / "b",
        )
        direct = baseline.result()

        memory = Memory()
        memory.pid = server.process.pid
        memory.thread.start()
        queue = Queue(env)
        recorders = Recorders(lambda: memory.pid, worker)
        recorders.thread.start()
        time.sleep(3)
        idle = statistics.median(rss for _, rss in memory.samples)
        recorders_idle = statistics.median(rss for _, rss in recorders.samples)

        progress(
            f"[{shape}] calm: the callers through ctxweb, nothing else, {args.calm_seconds:.0f} s"
        )
        (folder / "calm").mkdir()
        ended = time.time() + args.calm_seconds
        calm_config = {
            **common,
            "url": f"{url}/proxy/openai/v1",
            "until": ended,
            "headers": {"X-Ctxweb-Key": key},
            "session_prefix": CALM,
        }
        calm = Role("callers", calm_config, folder / "calm").result()
        calm["caught_up"] = caught_up(url, key, CALM, calm, args.drain, queue)["at"] - ended
        progress(
            f"[{shape}] load for {args.seconds:.0f} s, the server killed at {args.kill_at:.0f} s"
        )
        cpu = -cpu_seconds(server.process.pid)
        helpers_before = helpers_cpu(server.process.pid)
        recorders.sample()
        recorders_cpu = -recorders.cpu_total()
        start = time.time()
        until = start + args.seconds
        load_average = os.getloadavg()[0]
        load = folder / "load"
        load.mkdir()
        watchers = {
            "health": Role("health", {**common, "url": url, "until": until + 3600}, load),
            "watch": Role(
                "watch",
                {**common, "url": url, "key": key, "q": CALLERS, "until": until + 3600},
                load,
            ),
        }
        callers = Role(
            "callers",
            {
                **common,
                "url": f"{url}/proxy/openai/v1",
                "until": until,
                "headers": {"X-Ctxweb-Key": key},
                "session_prefix": CALLERS,
            },
            load,
        )
        # The control group: callers straight to the upstream during the same load, in a
        # process of their own. What they lose against the baseline is the machine's (its
        # cores shared with the load), not ctxweb's.
        (folder / "control").mkdir()
        control = (
            Role(
                "callers",
                {**common, "callers": args.control, "url": f"{upstream.url}/v1", "until": until},
                folder / "control",
            )
            if args.control
            else None
        )
        hostile = Role(
            "hostile",
            {
                **common,
                "until": until,
                "proxy": f"{url}/proxy/openai/v1",
                "server": url,
                "key": rogue,
                "headers": {"X-Ctxweb-Key": rogue},
                "managed_session": MANAGED,
                "hanging": 8,
                "hang_seconds": 20,
                "unread": 8,
                "hold_seconds": 20,
                "big": 3,
                "big_mb": args.big_mb,
                "otlp": 4,
                "bomb_at": start + args.seconds / 4,
                "bomb_mb": args.bomb_mb,
            },
            load,
        )
        while time.time() < start + args.kill_at:
            time.sleep(0.1)
        memory.high_water()
        cpu += cpu_seconds(server.process.pid)
        # the helpers' share until the kill (the new server's helpers start with it)
        helpers_share = {
            kind: (seconds - helpers_before.get(kind, 0.0)) / (time.time() - start)
            for kind, seconds in helpers_cpu(server.process.pid).items()
        }
        killed = time.time()
        os.killpg(server.process.pid, signal.SIGKILL)
        server.process.wait()
        # Started again at once, as a supervisor would. The killed server's output is read
        # whole at the end: its recorders (sessions of their own, which outlive it by design)
        # keep its pipe open, and waiting for that here (as this benchmark did until
        # 2026-11-29) added 5 s to every embedded restart.
        dead, server = server, LiveServer(env, port=port or 0).wait_ready()
        memory.pid = server.process.pid
        back = time.time()
        progress(f"[{shape}] killed and back in {back - killed:.1f} s")
        through = callers.result()
        load_ended = time.time()
        controlled = control.result() if control is not None else {"calls": {}}
        cpu += cpu_seconds(server.process.pid)
        load_average = max(load_average, os.getloadavg()[0])
        progress(f"[{shape}] callers done; waiting for the hostile clients")
        misbehaved = hostile.result()
        memory.high_water()
        drain = caught_up(url, key, CALLERS, through, args.drain, queue)
        recorders.sample()
        recorders_cpu += recorders.cpu_total()
        drained = drain["at"] - load_ended
        completed = {s: len(c) for s, c in through["calls"].items()}
        time.sleep(1)
        (folder / "stop").write_text("")
        health = watchers["health"].result()
        seen = watchers["watch"].result()
        memory.running = False
        recorders.running = False
        memory.high_water()
        recorded = {s: turns_of(url, key, s) for s in completed}
        # Unread calls on the callers' sessions: every call of theirs can be read, so each is
        # a false failure shown to the user (a call queued twice once was one).
        unread = sum(api(url, key, "GET", f"sessions/{s}")["unread_calls"] for s in completed)
        misbehaved["managed_turns"] = sum(
            any(event.get("type") == "managed" for event in turn["events"])
            for turn in turns_of(url, key, MANAGED)
        )
        managed = api(url, key, "GET", f"sessions/{MANAGED}")
        misbehaved["managed_session"] = {k: managed[k] for k in ("turn_count", "unread_calls")}
        # the raw timeline, to see when the slow calls came (the kill, a big call, ...)
        (folder / "timeline.json").write_text(
            json.dumps(
                {
                    "start": start,
                    "killed": killed,
                    "back": back,
                    "calls": through["calls"],
                    "health": health["checks"],
                }
            )
        )
        return analyse(
            shape=shape,
            direct=direct,
            through=through,
            controlled=controlled,
            health=health,
            seen=seen,
            memory=memory,
            idle=idle,
            recorded=recorded,
            unread=unread,
            first=first,
            step=step,
            killed=killed,
            back=back,
            start=start,
            load_ended=load_ended,
            hostile=misbehaved,
            cpu=cpu,
            helpers_share=helpers_share,
            calm=calm,
            drained=drained,
            queued=(drain["queued"], drain["queued_here"]),
            recorders_cpu=recorders_cpu,
            recorders_idle=recorders_idle,
            recorders_rss=recorders.rss_between(start, drain["at"]),
            load_average=load_average,
            args=args,
        )
    finally:
        if dead is not None:
            dead.reader.join(timeout=5)
            (folder / "server-killed.log").write_text(dead.log)
        if server is not None:
            server.stop()
            (folder / "server.log").write_text(server.log)
            progress(f"[{shape}] the server's output: {folder}/server*.log")
        if worker is not None:
            stop_group(worker)
        if shape == "production":
            recreate_database(create=False)


# --- results ------------------------------------------------------------------------------------


def latencies(role: dict[str, Any], outside: tuple[float, float] | None = None) -> list[float]:
    """A callers role's call latencies; with ``outside`` (from, to), only the calls not sent
    within it."""
    return [
        c[1]
        for calls in role["calls"].values()
        for c in calls
        if outside is None or not outside[0] <= c[2] - c[1] <= outside[1]  # c[2] - c[1]: sent
    ]


def analyse(**run: Any) -> dict[str, Any]:
    direct = latencies(run["direct"])
    through = latencies(run["through"])
    # The calls sent from a second before the kill (in flight when it came) until RECOVERY
    # seconds after the server was back: the rest say what the hostile traffic costs apart from
    # the restart's
    restart = (run["killed"] - 1, run["back"] + RECOVERY)
    steady = latencies(run["through"], restart)
    control = latencies(run["controlled"])
    control_steady = latencies(run["controlled"], restart)
    calm = latencies(run["calm"])
    killed, back = run["killed"], run["back"]
    checks = run["health"]["checks"]
    # The restart window: from the kill until the new server answered its first health check.
    outside = [(at, ms) for at, ms in checks if not killed - 0.1 <= at <= back + 0.5]
    answered = [ms for _, ms in outside if ms is not None]
    slowest = max((ms, at) for at, ms in outside if ms is not None)
    delays: list[float] = []
    stored: list[float] = []  # by the turns' own created_at, not through the API's polling
    timeline: list[tuple[float, float]] = []  # (when the call ended, into the load; its delay)
    never = lost = twice = unmatched = 0
    for session, calls in run["through"]["calls"].items():
        counts = run["seen"]["counts"].get(session, [])
        for k, _, ended, _ in calls:
            visible = next((at for at, count in counts if count >= k), None)
            if visible is None:
                never += 1
            else:
                delays.append(max(0.0, visible - ended))
                timeline.append((ended - run["start"], delays[-1]))
        indices: dict[int, int] = {}
        stored_at: dict[int, float] = {}  # when each call's (first) turn was stored
        for turn in run["recorded"][session]:
            offset = turn["counted_tokens"] - run["first"]
            if run["step"] <= 0 or offset % run["step"]:
                unmatched += 1
                continue
            index = offset // run["step"] + 1
            indices[index] = indices.get(index, 0) + 1
            if turn.get("created_at"):
                at = datetime.fromisoformat(turn["created_at"].replace("Z", "+00:00")).timestamp()
                stored_at[index] = min(at, stored_at.get(index, at))
        stored += [max(0.0, stored_at[k] - ended) for k, _, ended, _ in calls if k in stored_at]
        twice += sum(1 for n in indices.values() if n > 1)
        lost += sum(1 for k, *_ in calls if k not in indices)
    rss = [value for _, value in run["memory"].samples]
    peak = max([*rss, *run["memory"].peaks])
    peak_at = max(run["memory"].samples, key=lambda sample: sample[1])[0]
    return {
        "shape": run["shape"],
        "direct": direct,
        "through": through,
        "steady": steady,
        "control": control,
        "control_steady": control_steady,
        "calm": calm,
        "calm_caught_up": run["calm"]["caught_up"],
        "drained": run["drained"],
        "queued": run["queued"],
        "recorders_cpu": run["recorders_cpu"],
        "recorders_idle_mb": run["recorders_idle"],
        "recorders_peak_mb": max(run["recorders_rss"], default=0.0),
        "retried": sum(c[3] > 1 for calls in run["through"]["calls"].values() for c in calls),
        "health": answered,
        "health_failed": sum(1 for _, ms in outside if ms is None),
        "health_count": len(checks),
        "health_max_at": slowest[1] - run["start"],
        "peak_at": peak_at - run["start"],
        "cpu": run["cpu"] / (run["load_ended"] - run["start"]),
        "client_cpu": run["through"]["cpu_seconds"] / (run["load_ended"] - run["start"]),
        "helpers_share": run["helpers_share"],
        "failures": run["through"]["failures"],
        "load_average": run["load_average"],
        "restart_s": back - killed,
        "idle_mb": run["idle"],
        "peak_mb": peak,
        "delays": delays,
        "stored": stored,
        "timeline": sorted(timeline),
        "never": never,
        "lost": lost,
        "twice": twice,
        "unmatched": unmatched,
        "unread": run["unread"],
        "hostile": run["hostile"],
        "seconds": run["load_ended"] - run["start"],
    }


def verdict(ok: bool) -> str:
    return "pass" if ok else "**fail**"


def rows_of(result: dict[str, Any]) -> list[str]:
    shape = result["shape"]
    d50, d99 = percentile(result["direct"], 0.5), percentile(result["direct"], 0.99)
    t50, t99 = percentile(result["through"], 0.5), percentile(result["through"], 0.99)
    added = t99 / d99 - 1
    o99 = percentile(result["steady"], 0.99)
    health = result["health"]
    h99, hmax = percentile(health, 0.99), max(health)
    grown = result["peak_mb"] - result["idle_mb"]
    delays = result["delays"] or [float("inf")]
    r50, r99, rmax = (percentile(delays, 0.5), percentile(delays, 0.99), max(delays))
    stored = result.get("stored") or [float("inf")]
    s50, s99, smax = (percentile(stored, 0.5), percentile(stored, 0.99), max(stored))
    hostile = result["hostile"]
    c50, c99 = percentile(result["calm"], 0.5), percentile(result["calm"], 0.99)

    def tally(kind: str) -> str:
        statuses = hostile[kind]["statuses"]
        return ", ".join(f"{n} {status}" for status, n in sorted(statuses.items())) or "none"

    bomb = hostile["bomb"]
    waiting, here = result["queued"]
    queued = (
        "(unread)"
        if waiting < 0
        else f"{waiting} calls ({here} of the callers')"
        if waiting
        else "nothing"
    )
    span = result["seconds"] + result["drained"]
    failures = ", ".join(f"{n} {why}" for why, n in sorted(result["failures"].items()))
    big = hostile["big_managed"]["seconds"]
    otlp = hostile["otlp"]["seconds"]
    return [
        f"| {shape} | well-behaved callers, added at p99 (median) | under 10% |"
        f" {added:+.1%} ({t50 / d50 - 1:+.1%}): direct {d50 * 1000:.0f} / {d99 * 1000:.0f} ms,"
        f" through {t50 * 1000:.0f} / {t99 * 1000:.0f} ms (p50 / p99), {len(result['through'])}"
        f" calls, {result['retried']} sent again ({failures}); the calls sent outside the"
        f" restart (from a second before the kill to {RECOVERY:.0f} s after the server was back):"
        f" p99 {o99 * 1000:.0f} ms ({o99 / d99 - 1:+.1%}); the server busy {result['cpu']:.0%}"
        f" of a core{helpers_text(result)}, the callers {result['client_cpu']:.0%}; load average"
        f" {result['load_average']:.1f}"
        f" | {verdict(added < TARGET_ADDED)} |",
        *control_row(result),
        f"| {shape} | the same callers through ctxweb alone, before the load (no target) | |"
        f" {c99 / d99 - 1:+.1%} at p99 ({c50 / d50 - 1:+.1%} at p50): {c50 * 1000:.0f} /"
        f" {c99 * 1000:.0f} ms, {len(result['calm'])} calls in {result['calm_seconds']:.0f} s,"
        f" every one a turn {result['calm_caught_up']:.1f} s after the last ended | |",
        f"| {shape} | `/api/v1/health` p99 / max | under 100 ms | {h99:.1f} / {hmax:.1f} ms,"
        f" {len(health)} checks, the slowest at {result['health_max_at']:.0f} s;"
        f" {result['health_failed']} unanswered outside the restart ({result['restart_s']:.1f} s)"
        f" | {verdict(hmax < TARGET_HEALTH_MS and not result['health_failed'])} |",
        f"| {shape} | server memory, peak above idle | at most 500 MB | +{grown:.0f} MB"
        f" ({result['idle_mb']:.0f} MB idle, {result['peak_mb']:.0f} MB peak, sampled at"
        f" {result['peak_at']:.0f} s; the gzip bomb sent at {result['bomb_s']:.0f} s) |"
        f" {verdict(grown <= TARGET_MEMORY_MB)} |",
        f"| {shape} | recorded after the call's end, p50 / p99 / max | within 10 s |"
        f" {r50:.2f} / {r99:.2f} / {rmax:.2f} s seen through the API, {result['never']} never"
        f" seen; {s50:.2f} / {s99:.2f} / {smax:.2f} s by the turns' created_at |"
        f" {verdict(smax <= TARGET_RECORDED_S and not result['never'])} |",
        f"| {shape} | calls read whole but not recorded (server killed at"
        f" {result['kill_at']:.0f} s) | none | {result['lost']} lost, {result['twice']} recorded"
        f" twice, {result['unmatched']} turns unmatched, {result.get('unread', 0)} unread calls"
        f" on the callers' sessions; the callers' calls all turns (or the recorders stopped)"
        f" {result['drained']:.1f} s after the load, the queue then holding {queued} |"
        f" {verdict(not result['lost'] and not result.get('unread'))} |",
        f"| {shape} | the recorders (no target) | | {result['recorders_cpu']:.0f} CPU s from the"
        f" load's start to the drain's end ({result['recorders_cpu'] / span:.0%} of a core),"
        f" {result['recorders_idle_mb']:.0f} MB idle, {result['recorders_peak_mb']:.0f} MB peak"
        f" (summed VmRSS) | |",
        f"| {shape} | hostile traffic (no target) | | hanging: {tally('hanging')}; never reading:"
        f" {tally('unread')}; big managed ({result['big_mb']} MB): {tally('big_managed')}"
        f" ({hostile['managed_turns']} recorded as managed turns; the session has"
        f" {hostile['managed_session']['turn_count']} turns, 4 before the load, and"
        f" {hostile['managed_session']['unread_calls']} unread calls), median"
        f" {statistics.median(big) if big else 0:.1f} s; OTLP exports of 20 spans:"
        f" {tally('otlp')}, median {statistics.median(otlp) * 1000 if otlp else 0:.0f} ms;"
        f" gzip bomb ({result['bomb_mb']} MB in {bomb.get('compressed', 0) // 1024} KB):"
        f" {tally('bomb')} after {sum(bomb['seconds']):.1f} s | |",
    ]


def helpers_text(result: dict[str, Any]) -> str:
    """The server's helpers' CPU until the kill, as a share of a core."""
    names = {"prepare_calls": "its preparers", "receive_telemetry": "its capturers"}
    shares = result.get("helpers_share") or {}
    said = [f"{names.get(kind, kind)} {share:.0%}" for kind, share in sorted(shares.items())]
    return f" ({', '.join(said)}, until the kill)" if said else ""


def control_row(result: dict[str, Any]) -> list[str]:
    """The control group's row: callers straight to the upstream during the load, against the
    baseline (the machine's share of the added latency) and against the callers through ctxweb
    (ctxweb's own share, the machine's state alike)."""
    control, steady = result.get("control"), result.get("control_steady")
    if not control or not steady:
        return []
    d99 = percentile(result["direct"], 0.99)
    k50, k99 = percentile(control, 0.5), percentile(control, 0.99)
    t99, o99 = percentile(result["through"], 0.99), percentile(result["steady"], 0.99)
    s99 = percentile(steady, 0.99)
    return [
        f"| {result['shape']} | {result['callers_control']} callers straight to the upstream"
        f" during the load, the control (no target) | | {k50 * 1000:.0f} / {k99 * 1000:.0f} ms"
        f" (p50 / p99), {k99 / d99 - 1:+.1%} at p99 against the baseline (the machine's"
        f" share), {len(control)} calls; the callers through ctxweb against them at p99:"
        f" {t99 / k99 - 1:+.1%}, outside the restart {o99 / s99 - 1:+.1%} (their p99 there"
        f" {s99 * 1000:.0f} ms) | |"
    ]


def commit() -> str:
    """The commit of the code measured (``.commit`` in a tree exported with ``git archive``)."""
    exported = ROOT / ".commit"
    if exported.exists():
        return exported.read_text().strip()[:12]
    done = subprocess.run(
        ["git", "rev-parse", "--short=12", "HEAD"], cwd=ROOT, capture_output=True, text=True
    )
    dirty = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", "ctxweb"], cwd=ROOT)
    return done.stdout.strip() + (" with uncommitted changes" if dirty.returncode else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=["embedded", "production", "both"], default="embedded")
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--baseline-seconds", type=float, default=20)
    parser.add_argument("--calm-seconds", type=float, default=15)
    parser.add_argument("--kill-at", type=float, help="seconds into the load (default: half-way)")
    parser.add_argument("--callers", type=int, default=32)
    parser.add_argument(
        "--control",
        type=int,
        default=8,
        help="callers straight to the upstream during the load (0: none), the machine's share",
    )
    parser.add_argument("--big-mb", type=int, default=24)
    parser.add_argument("--bomb-mb", type=int, default=30)
    parser.add_argument(
        "--drain", type=float, default=180, help="seconds at most to wait for the recorder"
    )
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument(
        "--worker-concurrency",
        type=int,
        default=2,
        help="the production shape's Celery worker processes (2: make worker's default)",
    )
    parser.add_argument(
        "--set",
        action="append",
        metavar="NAME=VALUE",
        help="a setting of the server and workers (e.g. CTXWEB_BACKGROUND_NICE=0), repeatable",
    )
    parser.add_argument("--role", help=argparse.SUPPRESS)
    parser.add_argument("--config", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role:
        run_role(args.role, args.config, args.out)
        return
    if args.kill_at is None:
        args.kill_at = args.seconds / 2
    shapes = ["embedded", "production"] if args.shape == "both" else [args.shape]
    upstream = Upstream()
    rows: list[str] = []
    try:
        for shape in shapes:
            result = run_shape(shape, upstream, args)
            result.update(
                kill_at=args.kill_at,
                big_mb=args.big_mb,
                bomb_mb=args.bomb_mb,
                bomb_s=args.seconds / 4,
                calm_seconds=args.calm_seconds,
                callers_control=args.control,
            )
            rows += rows_of(result)
            saved = Path(tempfile.gettempdir()) / f"ctxweb-bench-hostile-{shape}.json"
            saved.write_text(json.dumps(result))
            progress("\n".join(rows))
    finally:
        upstream.stop()
    import uvicorn

    report(
        SECTION,
        "hostile.py",
        (
            f"{args.callers} streaming callers (asyncio, a kept-alive connection each, each its"
            f" own session, a growing conversation) against a loopback upstream that streams"
            f" each answer over 200 ms:"
            f" straight to it for {args.baseline_seconds:.0f} s (the baseline, same run), then"
            f" through one ctxweb server (uvicorn) for {args.seconds:.0f} s, with"
            f" {args.control} more straight to the upstream (the control: what the machine's"
            f" load costs a call that does not go through ctxweb), alongside 8 hanging"
            f" calls, 8 clients asking for a 512 MB answer and never reading it, 3 managed calls"
            f" of {args.big_mb} MB to a session with an applied compaction, 4 threads posting"
            f" OTLP exports back to back and one gzip bomb; the server's process group killed"
            f" (SIGKILL) at {args.kill_at:.0f} s and started again on the same port and data,"
            f" callers sending a failed call again. Health checked every 50 ms on a new"
            f" connection; memory is the web process's and its preparers' and capturers' summed"
            f" VmRSS every 200 ms and summed VmHWM; a call is"
            f" seen when its session's turn count, polled every 250 ms through the API,"
            f" reaches it, and recorded when its turn was stored (the turn's created_at: the"
            f" verdict's; the API's answers lag behind a loaded web process and stop while it"
            f" restarts); a call is lost when its session has no turn of its size at the end"
            f" (once every call is a turn, or no turn came for {STALLED:.0f} s while the"
            f" recording queue, read from the database, held none of the callers' calls, or"
            f" after {args.drain:.0f} s), and an unread call on a caller's session is a false"
            f" failure (each of their calls can be read). The recorders are the embedded"
            f" shape's recorder processes, the production shape's Celery worker and its"
            f" children (CPU from /proc, memory their summed VmRSS every 500 ms). Everything"
            f" shares the machine's cores."
        ),
        ["shape", "measure", "target", "measured", "verdict"],
        rows,
        versions=(f"ctxweb {commit()}", f"uvicorn {uvicorn.__version__}"),
        write=not args.no_write,
    )


if __name__ == "__main__":
    main()
