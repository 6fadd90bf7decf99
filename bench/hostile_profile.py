"""What a relayed call costs the web process: the hostile benchmark's well-behaved callers
through ctxweb alone (no hostile traffic), the server's CPU per call, and optionally a py-spy
profile of it.

Usage: ``.venv/bin/python bench/hostile_profile.py [--seconds 15] [--callers 32]
[--shape embedded|production] [--py-spy out.txt] [--set NAME=VALUE]``

One ctxweb server (``python -m ctxweb.server``) and the loopback upstream of
:mod:`hostile_upstream`, as ``bench/hostile.py`` starts them; the callers of
:mod:`hostile_load` (each its own session, a growing conversation) for ``--seconds``. Prints the
calls read whole, their latency (p50 / p99), ``/api/v1/health`` checked every 50 ms, the web
process's CPU seconds over the load and per call (after 3 s of the same calls, not counted), and
its peak memory. With ``--py-spy``,
``py-spy record --gil`` samples the web process during the load (the thread holding the GIL:
where Python code spends CPU) and writes its collapsed stacks to the file; the hottest functions
(self and total) are printed. With ``--attack``, one kind of the hostile traffic runs beside
the callers (``--no-callers``: alone), to see what it costs. py-spy is not a requirement of
ctxweb: install it into the virtual environment to use this option.
"""

from __future__ import annotations

import argparse
import collections
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))
sys.path.insert(0, str(BENCH))
from hostile import (  # noqa: E402
    CALM,
    MANAGED,
    Memory,
    Role,
    Upstream,
    cpu_seconds,
    flush_redis,
    percentile,
    recreate_database,
    set_up,
    shape_env,
    start_worker,
    stop_group,
)

from tests.support.servers import LiveServer, create_key, manage  # noqa: E402


def hottest(collapsed: Path, top: int = 25) -> str:
    """The functions most often on the sampled stacks: self (innermost) and total."""
    own: collections.Counter[str] = collections.Counter()
    total: collections.Counter[str] = collections.Counter()
    samples = 0
    for line in collapsed.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        frames = stack.split(";")
        n = int(count)
        samples += n
        own[frames[-1]] += n
        for frame in set(frames):
            total[frame] += n
    out = [f"{samples} samples"]
    for title, counter in (("self", own), ("total", total)):
        out.append(f"-- {title}")
        out += [f"{100 * n / samples:5.1f}%  {name}" for name, n in counter.most_common(top)]
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument("--callers", type=int, default=32)
    parser.add_argument("--shape", choices=["embedded", "production"], default="embedded")
    parser.add_argument("--py-spy", dest="pyspy", help="write py-spy's collapsed stacks here")
    parser.add_argument(
        "--attack",
        choices=["hanging", "unread", "big", "otlp", "bomb"],
        help="one kind of the hostile benchmark's traffic beside the callers (as many of it)",
    )
    parser.add_argument("--no-callers", action="store_true", help="the attack alone")
    parser.add_argument(
        "--set",
        dest="setting",
        action="append",
        default=[],
        help="a setting of the server (e.g. CTXWEB_WEB_WORKERS=2), repeatable",
    )
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="ctxweb-hostile-profile-"))
    upstream = Upstream()
    worker = server = None
    try:
        if args.shape == "production":
            recreate_database(create=True)
            flush_redis()
        env = shape_env(args.shape, folder / "data", upstream.url, args.setting)
        key = create_key(env, role="operator")
        rogue = manage(env, "create_api_key", "--project", "p", "--role", "ingest")
        rogue = rogue.strip().splitlines()[-1].strip()
        if args.shape == "production":
            worker = start_worker(env)
        server = LiveServer(env).wait_ready()
        pid = server.process.pid
        if args.attack == "big":
            set_up(server.url, key)  # the managed session
        memory = Memory()
        memory.pid = pid
        memory.thread.start()
        time.sleep(2)
        idle = min(rss for _, rss in memory.samples)
        spy = None
        if args.pyspy:
            spy = subprocess.Popen(
                [
                    str(Path(sys.executable).with_name("py-spy")),
                    "record",
                    "--pid",
                    str(pid),
                    "--format",
                    "raw",
                    "--rate",
                    "200",
                    "--nonblocking",
                    "--gil",
                    "--output",
                    args.pyspy,
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            time.sleep(1)
        warm = {
            "callers": args.callers,
            "stop": str(folder / "stop"),
            "url": f"{server.url}/proxy/openai/v1",
            "until": time.time() + 3,
            "headers": {"X-Ctxweb-Key": key},
            "session_prefix": "warm-",
        }
        (folder / "warm").mkdir()
        Role("callers", warm, folder / "warm").result()  # the first calls' costs, not counted
        cpu = -cpu_seconds(pid)
        config = {
            "callers": args.callers,
            "stop": str(folder / "stop"),
            "url": f"{server.url}/proxy/openai/v1",
            "until": time.time() + args.seconds,
            "headers": {"X-Ctxweb-Key": key},
            "session_prefix": CALM,
        }
        (folder / "calm").mkdir()
        attack = None
        if args.attack:
            bomb = args.attack == "bomb"
            attack = Role(
                "hostile",
                {
                    **config,
                    "proxy": f"{server.url}/proxy/openai/v1",
                    "server": server.url,
                    "key": rogue,
                    "headers": {"X-Ctxweb-Key": rogue},
                    "managed_session": MANAGED,
                    "hanging": 8 if args.attack == "hanging" else 0,
                    "hang_seconds": 20,
                    "unread": 8 if args.attack == "unread" else 0,
                    "hold_seconds": 20,
                    "big": 3 if args.attack == "big" else 0,
                    "big_mb": 24,
                    "otlp": 4 if args.attack == "otlp" else 0,
                    "bomb_at": time.time() + (1 if bomb else 0),
                    "bomb_mb": 30 if bomb else 0,
                },
                folder / "calm",
            )
        checks = Role("health", {**config, "url": server.url}, folder / "calm")
        if args.no_callers:
            time.sleep(args.seconds)
            result: dict[str, Any] = {"calls": {"-": [[0, 0.0, 0.0, 1]]}, "failures": {}}
        else:
            result = Role("callers", config, folder / "calm").result()
        health = [c[1] for c in checks.result()["checks"] if c[1] is not None]
        if attack is not None:
            attacked = attack.result()
            print({k: v["statuses"] for k, v in attacked.items() if k != "cpu_seconds"})
        cpu += cpu_seconds(pid)
        memory.high_water()
        if spy is not None:
            spy.send_signal(2)
            spy.wait(timeout=60)
        latencies = [c[1] * 1000 for calls in result["calls"].values() for c in calls]
        sizes = [c[0] for calls in result["calls"].values() for c in calls]
        print(
            f"{len(latencies)} calls in {args.seconds:.0f} s (up to {max(sizes)} calls a caller);"
            f" p50 {percentile(latencies, 0.5):.0f} ms, p99 {percentile(latencies, 0.99):.0f} ms;"
            f" failures {result['failures']}"
        )
        print(
            f"/api/v1/health: {len(health)} checks, p50 {percentile(health, 0.5):.1f} ms,"
            f" p99 {percentile(health, 0.99):.1f} ms, max {max(health):.1f} ms"
        )
        print(
            f"web process: {cpu:.2f} s CPU ({100 * cpu / args.seconds:.0f}% of a core),"
            f" {1000 * cpu / max(1, len(latencies)):.2f} ms a call; memory {idle:.0f} MB idle,"
            f" peak {memory.peaks[-1]:.0f} MB"
        )
        if args.pyspy:
            print(hottest(Path(args.pyspy)))
    finally:
        if server is not None:
            server.stop()
        if worker is not None:
            stop_group(worker)
        upstream.stop()
        if args.shape == "production":
            recreate_database(create=False)
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
