"""Late turns through HTTP, what an agent pays: one live ``python -m ctxweb.server`` (uvicorn
serving ``ctxweb.asgi:application``; the embedded shape on SQLite, or PostgreSQL), a coding
session posted turn after turn over one keep-alive connection, each late turn's latency at the
client against a ``json.loads`` of the same bytes, timed in the same loop, then the same turns
again sent zstd-compressed. Used by ``bench/ingest.py``; ``--profile`` posts the session a third
time and samples the server with py-spy while its late turns run (untimed), and gives where its
time goes.
"""

from __future__ import annotations

import collections
import http.client
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import zstandard

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.support.servers import create_key, embedded_env, live_server  # noqa: E402


def late_turns_over_http(
    bodies: list[bytes],
    *,
    late: int,
    database_url: str | None = None,
    redis_url: str | None = None,
    rate_limits: bool = False,
    profile: bool = False,
    phases: bool = False,
) -> dict[str, Any]:
    """Post ``bodies`` (one session's turns, JSON) to a fresh server; the last ``late`` turns'
    latency, ``json.loads`` of the same bytes, and (with ``profile``) the server's hottest frames.
    With ``redis_url``, the server's channel layer and cache are on Redis (the production shape);
    with ``rate_limits``, the default ones apply (else they are off). With ``phases``, the server
    is :mod:`timed_app` and the result's ``phases`` say where each late turn's time went (the
    zstd pass is skipped).
    """
    data = Path(tempfile.mkdtemp(prefix="ctxweb-e2e-"))
    extra = {} if rate_limits else {"CTXWEB_RATE_LIMIT": ""}
    app = "ctxweb.asgi:application"
    if phases:
        here = str(Path(__file__).resolve().parent)
        extra["PYTHONPATH"] = os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")]))
        extra["CTXWEB_PHASES_FILE"] = str(data / "phases.json")
        app = "timed_app:application"
    if database_url:
        extra["DATABASE_URL"] = database_url
    if redis_url:
        extra["REDIS_URL"] = redis_url
    env = embedded_env(data, **extra)
    key = create_key(env, role="ingest")
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    latencies: list[float] = []
    decodes: list[float] = []
    compressed: list[float] = []
    client: list[dict[str, float]] = []  # the client's timestamps of each turn (phases)
    server_steps: list[dict[str, Any]] = []
    sampler = None
    try:
        with live_server(env, app=app) as server:
            conn = http.client.HTTPConnection("127.0.0.1", int(server.url.rsplit(":", 1)[1]))
            for index, body in enumerate(bodies):
                if index == len(bodies) - late:
                    cpu_before = _cpu(server.process.pid, database_url)
                started = time.perf_counter()
                conn.request("POST", "/api/v1/sessions/e2e/turns", body=body, headers=headers)
                answer = conn.getresponse()
                head = time.perf_counter()
                reply = answer.read()
                elapsed = time.perf_counter() - started
                client.append({"start": started, "head": head, "done": started + elapsed})
                if answer.status != 201:
                    raise RuntimeError(f"turn {index}: {answer.status} {reply[:300]!r}")
                if index >= len(bodies) - late:
                    latencies.append(elapsed)
                    started = time.perf_counter()
                    json.loads(body)
                    decodes.append(time.perf_counter() - started)
            server_cpu, database_cpu = _cpu_used(cpu_before, _cpu(server.process.pid, database_url))
            # The same session again, each body sent zstd-compressed (compressed beforehand, as
            # a client holding its request would): what the server's inflating adds.
            packer = zstandard.ZstdCompressor()
            packed_headers = {**headers, "Content-Encoding": "zstd"}
            for index, body in enumerate([] if phases else bodies):
                packed = packer.compress(body)
                started = time.perf_counter()
                conn.request("POST", "/api/v1/sessions/e2e-zstd/turns", packed, packed_headers)
                answer = conn.getresponse()
                answer.read()
                elapsed = time.perf_counter() - started
                if answer.status != 201:
                    raise RuntimeError(f"zstd turn {index}: {answer.status}")
                if index >= len(bodies) - late:
                    compressed.append(elapsed)
            if profile:
                # Sampled on a third pass, whose latencies are not reported: the sampler takes
                # a core of this two-core machine from the client and the server.
                for index, body in enumerate(bodies):
                    if index == len(bodies) - late:
                        sampler = _py_spy(server.process.pid, data / "profile.raw")
                    conn.request("POST", "/api/v1/sessions/e2e-sampled/turns", body, headers)
                    answer = conn.getresponse()
                    answer.read()
                    if answer.status != 201:
                        raise RuntimeError(f"sampled turn {index}: {answer.status}")
                if sampler is not None:
                    sampler.send_signal(signal.SIGINT)  # py-spy writes its samples on SIGINT
                    sampler.wait(timeout=60)
            conn.close()
        tokens = json.loads(reply)["total_tokens"]
        if phases:  # the server writes them as it stops
            server_steps = json.loads((data / "phases.json").read_text())
    finally:
        hottest = _hottest(data / "profile.raw") if profile else []
        shutil.rmtree(data, ignore_errors=True)
    latency, decode = statistics.median(latencies), statistics.median(decodes)
    ordered = sorted(latencies)
    return {
        "tokens": tokens,
        "body_mb": len(bodies[-1]) / 1e6,
        "late_median_ms": latency * 1000,
        "late_p95_ms": ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))] * 1000,
        "json_loads_ms": decode * 1000,
        "ratio": latency / decode,
        "zstd_body_kb": len(zstandard.ZstdCompressor().compress(bodies[-1])) / 1e3,
        "zstd_late_median_ms": statistics.median(compressed) * 1000 if compressed else 0.0,
        # CPU time per late turn, whatever else runs on the machine: the server process's (all
        # its threads; on SQLite the database's work is in it), the database server's backends'.
        "server_cpu_ms": server_cpu * 1000 / late,
        "database_cpu_ms": database_cpu * 1000 / late if database_url else None,
        "hottest": hottest,
        "phases": _phases(client[-late:], server_steps[-late:], decode) if phases else [],
    }


def _cpu_seconds(pid: int) -> float:
    """The CPU time (user and system, all threads) process ``pid`` used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cpu(server: int, database_url: str | None) -> tuple[float, dict[int, float]]:
    """The CPU time used so far by the server process, and by each PostgreSQL backend serving
    ``database_url`` (none without one)."""
    backends: dict[int, float] = {}
    if database_url:
        import psycopg

        with psycopg.connect(database_url, autocommit=True) as conn:
            pids = conn.execute(
                "SELECT pid FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            ).fetchall()
        for (pid,) in pids:
            try:
                backends[pid] = _cpu_seconds(pid)
            except OSError:  # ended meanwhile, or on another machine
                continue
    return _cpu_seconds(server), backends


def _cpu_used(
    before: tuple[float, dict[int, float]], after: tuple[float, dict[int, float]]
) -> tuple[float, float]:
    """The server's and the database backends' CPU time between two :func:`_cpu` readings (a
    backend that ended between them is not counted)."""
    database = sum(used - before[1].get(pid, 0.0) for pid, used in after[1].items())
    return after[0] - before[0], database


#: A late turn's phases: (what, from, to), a step of the client (``c.``) or of the server
#: (``s.``, :mod:`timed_app`). uvicorn calls the application once the headers are in, so the
#: second and third phases overlap: the body arrives while the application waits for it.
PHASES = [
    ("the client sends the request; uvicorn reads its first bytes", "c.start", "s.received"),
    ("uvicorn parses the headers and calls the ASGI application", "s.received", "s.app"),
    ("the rest of the request (the body) arrives", "s.received", "s.process"),
    ("the application takes the body, hands the request to a pool thread", "s.process", "s.django"),
    ("**Django in the pool thread** (middleware, view, closing)", "s.django", "s.django_end"),
    ("the answer comes back to the event loop, to uvicorn", "s.django_end", "s.answer"),
    ("uvicorn writes the status line and headers to the socket", "s.answer", "s.written"),
    ("the client wakes and reads the status line and headers", "s.written", "c.head"),
    ("the client reads the body", "c.head", "c.done"),
    ("**the whole request, at the client**", "c.start", "c.done"),
]


def _phases(
    client: list[dict[str, float]], server: list[dict[str, Any]], decode: float
) -> list[tuple[str, float, float]]:
    """Each phase of :data:`PHASES`: its median over the turns (ms), and that over ``decode``
    (``json.loads`` of a body, seconds). Medians do not add up to the median of the whole."""
    if len(client) != len(server) or any(
        not c["start"] < s["process"] < s["written"] < c["done"]
        for c, s in zip(client, server, strict=False)
    ):
        raise RuntimeError("the server's timestamps are not those of the client's turns")
    rows = []
    for what, start, end in PHASES:
        spans = []
        for c, s in zip(client, server, strict=True):
            steps = {**{f"c.{k}": v for k, v in c.items()}, **{f"s.{k}": v for k, v in s.items()}}
            if start in steps and end in steps:
                spans.append(steps[end] - steps[start])
        median = statistics.median(spans) if spans else float("nan")
        rows.append((what, median * 1000, median / decode))
    return rows


def _py_spy(pid: int, out: Path) -> subprocess.Popen[bytes] | None:
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(spy).exists():
        print("py-spy not installed: no profile", file=sys.stderr)
        return None
    command = [spy, "record", "-p", str(pid), "-r", "400", "--format", "raw", "-o", str(out)]
    process = subprocess.Popen([*command, "--nonblocking"], stdout=subprocess.DEVNULL)
    time.sleep(1.0)  # attached before the first sampled turn
    return process


#: Where a sample's time goes: the first category (most specific first) one of whose markers a
#: frame of the sample holds.
CATEGORIES = [
    ("JSON decoding (msgspec) and the body checks", ("JsonBodyParser.parse",)),
    ("database connect / close", ("get_new_connection", "close_old_connections", "._close (")),
    ("parsing the new messages (incremental)", ("turn_request_parse",)),
    ("orphaned tool pairs (incremental)", ("refuse_orphans",)),
    (
        "messages: hash, count new ones, store",
        ("_messages_plan", "_messages_store", "message_rows"),
    ),
    ("session lock and previous turn", ("_session_for_turn",)),
    ("rest of turn_ingest (regions, events, the turn row, commit)", ("turn_ingest",)),
    ("API key, throttles, serializer, response", ("APIView.dispatch",)),
    ("Django request cycle and middleware", ("WSGIHandler.__call__", "SyncToAsync", "AsyncToSync")),
    ("uvicorn, uvloop and the event loop (HTTP, body transfer)", ("",)),
]


#: A sample whose innermost frame is one of these is a thread waiting, not working (an idle
#: request thread of the pool waits in ``_worker``, its queue's ``get`` being C code). A request
#: thread found in ``_write_to_self`` has woken the event loop with its answer and waits for the
#: GIL the loop's thread now holds (sampled with ``--gil``, it is never there): counted as work,
#: it made a fifth of the busy samples.
WAITING = (
    "select (selectors.py",
    "Condition.wait",
    "_wait_for",
    "_worker (concurrent",
    "_write_to_self (asyncio",
)


def _hottest(raw: Path) -> list[tuple[str, float]]:
    """The server's busy samples by :data:`CATEGORIES`, as shares (waiting excluded)."""
    if not raw.exists():
        return []
    shares: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, number = line.rpartition(" ")
        if not number.isdigit() or not stack:
            continue
        frames = stack.split(";")
        if any(w in frames[-1] for w in WAITING):
            continue  # waiting, not working
        total += int(number)
        category = next(name for name, marks in CATEGORIES if any(m in stack for m in marks))
        shares[category] += int(number)
    return [(name, n / max(1, total)) for name, n in shares.most_common()]
