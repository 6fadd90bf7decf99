"""Responsiveness benchmark: `/api/v1/health` end to end while the costliest legal preview runs.

Usage: ``.venv/bin/python bench/responsiveness.py [--megabytes 20] [--no-write]``

Starts ``python -m ctxweb.server`` on the embedded shape (its own throwaway
``CTXWEB_DATA_DIR``, SQLite, ``DEBUG`` off), creates a project and an operator key, then times
``GET /api/v1/health`` end to end over loopback every 50 ms: first alone (the baseline, same run),
then while one ``POST /api/v1/preview`` of ``llm4s-pipeline`` plans over ``--megabytes`` of
keywords and varied words with no full stop (the input that held the interpreter for minutes
when LLM4S's digest patterns were quadratic). Reports the preview's own time and status, and the
median and maximum health-check time in both phases. The bar (issue 17): under a second.

Results go to ``docs/benchmarks.md`` under ``## Responsiveness`` (the other sections are kept).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

sys.path.insert(0, str(ROOT))
from record import report  # noqa: E402

from tests.support.servers import create_key, embedded_env, live_server  # noqa: E402

SECTION = "## Responsiveness"
KEYWORDS = "error failed tool call result must decided chosen "
TARGET_MS = 1000


def _health_ms(url: str) -> float:
    started = time.perf_counter()
    with urllib.request.urlopen(f"{url}/api/v1/health", timeout=600) as response:
        response.read()
    return (time.perf_counter() - started) * 1000


def _body(megabytes: float) -> dict[str, Any]:
    rng = random.Random(17)
    vocabulary = [*KEYWORDS.split(), *(f"w{n}" for n in range(5_000))]
    words = " ".join(rng.choices(vocabulary, k=int(megabytes * 1_000_000 / 6 / 3)))
    return {
        "format": "openai-chat",
        "request": {
            "model": "gpt-4o",
            "messages": [
                {"role": "user", "content": words},
                {"role": "assistant", "content": words[::-1]},
                {"role": "user", "content": words.upper()},
                {"role": "assistant", "content": "ok"},
                {"role": "user", "content": "go on"},
            ],
        },
        "strategy": "llm4s-pipeline",
        "params": {"context_window": 2000},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=float, default=20)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()

    data = Path(tempfile.mkdtemp(prefix="ctxweb-responsive-"))
    env = embedded_env(data, CTXWEB_RATE_LIMIT="")
    key = create_key(env)
    with live_server(env) as server:
        url = server.url
        alone = []
        for _ in range(40):
            alone.append(_health_ms(url))
            time.sleep(0.05)

        body = json.dumps(_body(args.megabytes)).encode()
        preview: dict[str, Any] = {}

        def run_preview() -> None:
            request = urllib.request.Request(
                f"{url}/api/v1/preview",
                data=body,
                headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
                method="POST",
            )
            started = time.perf_counter()
            try:
                with urllib.request.urlopen(request, timeout=600) as response:
                    response.read()
                    preview["status"] = response.status
            except urllib.error.HTTPError as error:
                preview["status"] = error.code
            preview["ms"] = (time.perf_counter() - started) * 1000

        runner = threading.Thread(target=run_preview)
        runner.start()
        during = []
        while runner.is_alive():
            during.append(_health_ms(url))
            time.sleep(0.05)
        runner.join()

    def ms(values: list[float]) -> str:
        return f"{statistics.median(values):.1f} / {max(values):.1f}"

    rows = [
        f"| health alone (baseline, {len(alone)} requests) | {ms(alone)} |",
        f"| health during the preview ({len(during)} requests) | {ms(during)} |",
    ]
    report(
        SECTION,
        "responsiveness.py",
        (
            f"`GET /api/v1/health` end to end through uvicorn (embedded shape) every 50 ms, alone"
            f" and while one `POST /api/v1/preview` of `llm4s-pipeline` plans over"
            f" {args.megabytes:g} MB of keywords with no full stop (answered"
            f" {preview.get('status')} after {preview.get('ms', 0) / 1000:.1f} s; previews are"
            f" stopped at `CTXWEB_PREVIEW_SECONDS`, 20 s by default). Bar: under"
            f" {TARGET_MS} ms."
        ),
        ["health check", "median / max ms"],
        rows,
        write=not args.no_write,
    )


if __name__ == "__main__":
    main()
