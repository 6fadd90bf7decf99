"""Body cap benchmark: what an oversized upload costs a server process.

Usage: ``.venv/bin/python bench/body_cap.py [--megabytes 400] [--no-write]``

Starts ``python -m ctxweb.server`` (embedded shape, the default 32 MB cap) and sends, over
loopback with ``Transfer-Encoding: chunked``: first a 30 MB body under the cap (the baseline, same
run: what a legitimate large body costs), then a ``--megabytes`` body over it. Reports what the
client saw and the server process's resident memory before and at its peak (``VmHWM``).
Results go to ``docs/benchmarks.md`` under ``## Body cap``.
"""

from __future__ import annotations

import argparse
import http.client
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from record import report  # noqa: E402

from tests.support.servers import create_key, embedded_env, live_server  # noqa: E402

SECTION = "## Body cap"
MB = 1 << 20


def memory(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field):
            return int(line.split()[1]) // 1024
    return 0


def send(port: int, key: str, megabytes: int) -> tuple[str, float]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    started = time.perf_counter()
    try:
        connection.request(
            "POST",
            "/api/v1/sessions/bench/turns",
            body=iter([b"x" * MB] * megabytes),
            headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
            encode_chunked=True,
        )
        response = connection.getresponse()
        response.read()
        outcome = str(response.status)
    except OSError as error:  # the server closed the connection after answering 413
        outcome = f"connection closed ({type(error).__name__})"
    finally:
        connection.close()
    return outcome, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=int, default=400)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    env = embedded_env(Path(tempfile.mkdtemp(prefix="ctxweb-body-cap-")))
    key = create_key(env, role="ingest")
    rows = []
    for megabytes in (30, args.megabytes):
        with live_server(env) as server:
            assert server.port is not None
            pid = server.process.pid
            before = memory(pid, "VmRSS")
            outcome, seconds = send(server.port, key, megabytes)
            peak = memory(pid, "VmHWM")
            rows.append(
                f"| {megabytes} MB chunked | {outcome} | {seconds:.1f} s | {before} MB |"
                f" {peak} MB | +{peak - before} MB |"
            )
    report(
        SECTION,
        "body_cap.py",
        (
            "One uvicorn process (embedded shape, `CTXWEB_MAX_REQUEST_BYTES` 32 MB) receiving a"
            " chunked body over loopback; its resident memory before the request and at its peak."
            " The 30 MB body is the baseline (under the cap; it is not a valid turn, so 400)."
        ),
        ["body", "answer", "time", "RSS before", "peak", "growth"],
        rows,
        write=not args.no_write,
    )


if __name__ == "__main__":
    main()
