"""Capture benchmark: spans per second through the OTLP receiver, end to end, on PostgreSQL.

Usage: ``.venv/bin/python bench/capture.py [--sessions 8] [--turns 40] [--clients 4] [--no-write]``

Creates a throwaway PostgreSQL database, migrates it, starts one ``python -m ctxweb.server``
on it and sends, over loopback from ``--clients`` threads, ``--sessions`` agent sessions of
``--turns`` model calls each (every call's context is the previous one plus a user message, a tool
call and a 2 KB tool output, as an agent grows it), three ways in the same run:

- **REST baseline**: one ``POST /api/v1/sessions/{id}/turns`` per call (what an agent writing to
  ctxweb itself does);
- **OTLP, one span per export** (an SDK's ``SimpleSpanProcessor``), OTLP JSON with GenAI attributes;
- **OTLP, 32 spans per export** (a ``BatchSpanProcessor``), protobuf, gzip.

Reports calls per second, MB per second of bodies sent, and the latency of each request.
Results go to ``docs/benchmarks.md`` under ``## Capture``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from record import report  # noqa: E402

from tests.support.servers import create_key, embedded_env, live_server  # noqa: E402

SECTION = "## Capture"
DB = "ctxweb_capture_bench"
OUTPUT = "".join(f"line {n}: src/pkg/module_{n % 9}.py ok\n" for n in range(70))  # ~2 KB


def admin_url() -> str:
    return os.environ.get("BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres")


def database(action: str) -> str:
    import psycopg

    with psycopg.connect(admin_url(), autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
        if action == "create":
            admin.execute(f"CREATE DATABASE {DB}")
        version = admin.execute("SHOW server_version").fetchone()
    return str(version[0]).split(" ")[0] if version else "?"


def conversation(session: int, turns: int) -> list[list[dict[str, Any]]]:
    """Each call's OpenAI chat messages."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful coding agent."},
        {"role": "user", "content": f"Session {session}: fix the failing test."},
    ]
    calls = []
    for n in range(turns):
        calls.append(list(messages))
        call = f"call_{session}_{n}"
        messages += [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call,
                        "type": "function",
                        "function": {"name": "read", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": call, "content": f"step {n}\n{OUTPUT}"},
            {"role": "user", "content": f"Go on with step {n + 1}."},
        ]
    return calls


def parts(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI chat messages as OpenTelemetry GenAI messages of parts."""
    out = []
    for m in messages:
        if m["role"] == "tool":
            part = {"type": "tool_call_response", "id": m["tool_call_id"], "response": m["content"]}
            out.append({"role": "tool", "parts": [part]})
        elif m.get("tool_calls"):
            calls = [
                {"type": "tool_call", "id": c["id"], "name": c["function"]["name"], "arguments": {}}
                for c in m["tool_calls"]
            ]
            out.append({"role": "assistant", "parts": calls})
        else:
            out.append({"role": m["role"], "parts": [{"type": "text", "content": m["content"]}]})
    return out


def span_json(session: int, n: int, messages: list[dict[str, Any]]) -> dict[str, Any]:
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.conversation.id": f"otlp-{session}",
        "gen_ai.input.messages": json.dumps(parts(messages)),
        "gen_ai.usage.input_tokens": 100 + 600 * n,
        "gen_ai.usage.output_tokens": 20,
    }
    return {
        "traceId": f"{session + 1:032x}",
        "spanId": f"{(session + 1) * 100000 + n + 1:016x}",
        "name": "chat gpt-4o",
        "startTimeUnixNano": str(1_700_000_000_000_000_000 + n),
        "attributes": [
            {
                "key": k,
                "value": {"intValue": str(v)} if isinstance(v, int) else {"stringValue": v},
            }
            for k, v in attributes.items()
        ],
    }


def export_json(spans: list[dict[str, Any]]) -> bytes:
    return json.dumps(
        {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {}, "spans": spans}]}]}
    ).encode()


def export_protobuf(spans: list[dict[str, Any]], session: int) -> bytes:
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

    request = trace_service_pb2.ExportTraceServiceRequest()
    scope = request.resource_spans.add().scope_spans.add()
    for span in spans:
        out = scope.spans.add()
        out.trace_id = bytes.fromhex(span["traceId"])
        out.span_id = bytes.fromhex(span["spanId"])
        out.name = span["name"]
        out.start_time_unix_nano = int(span["startTimeUnixNano"])
        for attribute in span["attributes"]:
            kv = out.attributes.add()
            kv.key = attribute["key"]
            if "intValue" in attribute["value"]:
                kv.value.int_value = int(attribute["value"]["intValue"])
            else:
                kv.value.string_value = attribute["value"]["stringValue"]
        for kv in out.attributes:
            if kv.key == "gen_ai.conversation.id":
                kv.value.string_value = f"proto-{session}"
    return gzip.compress(request.SerializeToString())


def send(url: str, body: bytes, headers: dict[str, str]) -> float:
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=120) as response:
        response.read()
        if response.status not in (200, 201):
            raise SystemExit(f"{url}: {response.status}")
    return time.perf_counter() - started


def run(
    name: str, jobs: list[list[tuple[str, bytes, dict[str, str], int]]], clients: int
) -> dict[str, Any]:
    """Each job is one session's requests, sent in order; sessions run ``clients`` at a time."""
    latencies: list[float] = []
    lock = threading.Lock()

    def session(requests: list[tuple[str, bytes, dict[str, str], int]]) -> None:
        for url, body, headers, _ in requests:
            seconds = send(url, body, headers)
            with lock:
                latencies.append(seconds)

    calls = sum(n for requests in jobs for *_, n in requests)
    size = sum(len(body) for requests in jobs for _, body, _, _ in requests)
    started = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(session, jobs))
    elapsed = time.perf_counter() - started
    latencies.sort()
    return {
        "name": name,
        "calls": calls,
        "requests": len(latencies),
        "seconds": elapsed,
        "calls_per_s": calls / elapsed,
        "mb_per_s": size / elapsed / 1e6,
        "p50": statistics.median(latencies) * 1000,
        "p95": latencies[int(len(latencies) * 0.95) - 1] * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    version = database("create")
    base = admin_url().rsplit("/", 1)[0].replace("postgresql://", "postgres://", 1)
    env = embedded_env(
        Path(tempfile.mkdtemp(prefix="ctxweb-capture-")),
        DATABASE_URL=f"{base}/{DB}",
        CTXWEB_RATE_LIMIT="",
        CTXWEB_RATE_LIMIT_COSTLY="",
    )
    try:
        key = create_key(env, role="ingest")
        auth = {"Authorization": f"Bearer {key}"}
        sessions = [conversation(s, args.turns) for s in range(args.sessions)]
        with live_server(env) as server:
            rest = [
                [
                    (
                        f"{server.url}/api/v1/sessions/rest-{s}/turns",
                        json.dumps(
                            {
                                "format": "openai-chat",
                                "request": {"model": "gpt-4o", "messages": m},
                                "turn_id": f"t{n}",
                            }
                        ).encode(),
                        {**auth, "Content-Type": "application/json"},
                        1,
                    )
                    for n, m in enumerate(calls)
                ]
                for s, calls in enumerate(sessions)
            ]
            single = [
                [
                    (
                        f"{server.url}/v1/traces",
                        export_json([span_json(s, n, m)]),
                        {**auth, "Content-Type": "application/json"},
                        1,
                    )
                    for n, m in enumerate(calls)
                ]
                for s, calls in enumerate(sessions)
            ]
            batched = []
            for s, calls in enumerate(sessions):
                spans = [span_json(s, n, m) for n, m in enumerate(calls)]
                batched.append(
                    [
                        (
                            f"{server.url}/v1/traces",
                            export_protobuf(spans[i : i + 32], s),
                            {
                                **auth,
                                "Content-Type": "application/x-protobuf",
                                "Content-Encoding": "gzip",
                            },
                            len(spans[i : i + 32]),
                        )
                        for i in range(0, len(spans), 32)
                    ]
                )
            results = [
                run("REST, one turn per request (baseline)", rest, args.clients),
                run("OTLP JSON, one span per export", single, args.clients),
                run("OTLP protobuf + gzip, 32 spans per export", batched, args.clients),
            ]
    finally:
        database("drop")
    rows = [
        f"| {r['name']} | {r['calls']} | {r['requests']} | {r['calls_per_s']:.0f} |"
        f" {r['mb_per_s']:.1f} | {r['p50']:.0f} / {r['p95']:.0f} |"
        for r in results
    ]
    report(
        SECTION,
        "capture.py",
        f"One uvicorn process on PostgreSQL; {args.clients} client threads over loopback, each"
        f" sending one session at a time; {args.sessions} sessions of {args.turns} model calls"
        " whose contexts grow by a tool call and a 2 KB output per call. Every row stores the"
        " same turns; the REST row is the baseline of the same run.",
        ["path", "model calls", "requests", "calls/s", "MB/s sent", "request p50 / p95 ms"],
        rows,
        versions=(f"PostgreSQL {version}",),
        write=not args.no_write,
    )


if __name__ == "__main__":
    main()
