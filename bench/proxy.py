"""Proxy benchmark: what the recording proxy adds to a model call, end to end.

Usage: ``.venv/bin/python bench/proxy.py [--calls 160] [--concurrency 16] [--delay 0.2]
[--no-write]``

A loopback stand-in for the OpenAI API takes ``--delay`` seconds per call (a model thinking) and
answers a chat completion; the real ``openai`` SDK calls it ``--calls`` times from
``--concurrency`` threads, directly (the baseline, same run) and through one uvicorn running
ctxweb's proxy (embedded shape, recording on). Reported: call latency median and p95, and for
streaming calls the time to the first byte of the answer. The target (issue 13): the proxy adds
under 10% to such a call, and recording never holds back the first byte.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from record import report  # noqa: E402

from tests.support.providers import provider_stand_in  # noqa: E402
from tests.support.servers import create_key, embedded_env, live_server  # noqa: E402

SECTION = "## Proxy"
MESSAGES = [
    {"role": "system", "content": "You are a careful coding agent."},
    {"role": "user", "content": "Summarize the build log. " + "line ok\n" * 400},
]


def timed(client: Any, stream: bool) -> float:
    started = time.perf_counter()
    if stream:
        answer = client.chat.completions.create(model="gpt-4o", messages=MESSAGES, stream=True)
        first = None
        for _ in answer:
            first = first or time.perf_counter() - started
        return first or time.perf_counter() - started
    client.chat.completions.create(model="gpt-4o", messages=MESSAGES)
    return time.perf_counter() - started


def measure(client: Any, calls: int, concurrency: int, stream: bool) -> list[float]:
    with ThreadPoolExecutor(concurrency) as pool:
        return sorted(pool.map(lambda _: timed(client, stream), range(calls)))


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of process ``pid`` so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def ms(values: list[float]) -> str:
    p95 = values[max(0, int(len(values) * 0.95) - 1)]
    return f"{statistics.median(values) * 1000:.0f} / {p95 * 1000:.0f}"


def main() -> None:
    from openai import OpenAI

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=160)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--delay", type=float, default=0.2)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    rows = []
    with provider_stand_in(["ok"] * (args.calls * 8)) as api:
        api.delay = args.delay
        env = embedded_env(
            Path(tempfile.mkdtemp(prefix="ctxweb-proxy-")),
            CTXWEB_UPSTREAM_OPENAI=f"{api.url}/v1",
            CTXWEB_RATE_LIMIT="",
        )
        key = create_key(env, role="ingest")
        with live_server(env) as server:
            direct = OpenAI(base_url=f"{api.url}/v1", api_key="sk-bench", max_retries=0)
            proxied = OpenAI(
                base_url=f"{server.url}/proxy/openai/v1",
                api_key="sk-bench",
                max_retries=0,
                default_headers={"X-Ctxweb-Key": key},
            )
            measure(proxied, args.concurrency, args.concurrency, False)  # warm up
            for concurrency, calls in ((args.concurrency, args.calls), (1, 20)):
                for stream in (False, True):
                    what = "first byte, streamed" if stream else "whole call, JSON"
                    base = measure(direct, calls, concurrency, stream)
                    before = cpu_seconds(server.process.pid)
                    through = measure(proxied, calls, concurrency, stream)
                    time.sleep(0.5)  # the last calls' recording
                    cpu = (cpu_seconds(server.process.pid) - before) / calls * 1000
                    added = statistics.median(through) / statistics.median(base) - 1
                    rows.append(
                        f"| {what}, {concurrency} at once | {ms(base)} | {ms(through)} |"
                        f" {added:+.1%} | {cpu:.1f} |"
                    )
    report(
        SECTION,
        "proxy.py",
        (
            f"The real `openai` SDK, {args.calls} calls from {args.concurrency} threads (and 20"
            " one at a time), to a"
            f" loopback stand-in that takes {args.delay * 1000:.0f} ms per call: directly (the"
            " baseline, same run) and through one uvicorn running the proxy (embedded shape,"
            " every call recorded as a turn). Target: under 10% added, the first byte not held"
            " back by recording. The last column is the CPU time the uvicorn process spent per"
            " call (relaying and recording), which does not depend on what else the machine"
            " runs; the bench process itself (16 SDK clients and the stand-in) shares the same"
            " 2 cores."
        ),
        [
            "measure",
            "direct median / p95 ms",
            "through ctxweb median / p95 ms",
            "added",
            "ctxweb CPU per call ms",
        ],
        rows,
        write=not args.no_write,
    )


if __name__ == "__main__":
    main()
