"""Two checkouts of ctxweb, one late-turn benchmark through HTTP, run in alternation: what a change
does to the latency an agent pays, on a machine whose speed drifts by more than the change.

Usage: ``.venv/bin/python bench/http_pairs.py [--runs 3] [--backend sqlite|postgresql] BEFORE
[AFTER]`` (each a checkout's root folder, e.g. a ``git worktree`` of the commit before; AFTER
defaults to this one).

Each run posts the same session (``coding_session(260, seed=1, target_tokens=180000)``, as
``bench/ingest.py`` through HTTP) to a fresh server of that checkout (:mod:`endtoend`, run from
that checkout in a process of its own) on a fresh database; the runs alternate BEFORE, AFTER,
BEFORE, ... so that both see the same drift. Printed: each run's late-turn median, ``json.loads``
of the same bytes in the same loop, their ratio and the server's CPU per late turn, then the
median ratio and CPU of each side. Nothing is written to ``docs/``.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: One run, in a checkout's own interpreter state: its ``bench/endtoend.py`` and its server.
RUN = """
import json, pickle, sys
root = sys.argv[1]
sys.path[:0] = [root, root + "/bench"]
from endtoend import late_turns_over_http
url = sys.argv[2] or None
result = late_turns_over_http(pickle.load(sys.stdin.buffer), late=100, database_url=url)
keys = ("late_median_ms", "json_loads_ms", "ratio", "server_cpu_ms")
print(json.dumps({key: result[key] for key in keys}))
"""


def fresh_database(admin_url: str, name: str) -> str:
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        connection.execute(f'CREATE DATABASE "{name}"')
    return admin_url.rsplit("/", 1)[0] + f"/{name}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path, nargs="?", default=ROOT)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ctxweb.settings")
    from ctxweb.contexts.demo import coding_session

    session = coding_session(260, seed=1, target_tokens=180_000)
    bodies = pickle.dumps([json.dumps(body).encode() for body in session])
    admin = os.environ.get("BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
    sides = {"before": args.before.resolve(), "after": args.after.resolve()}
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in sides}
    for run in range(args.runs):
        for name, root in sides.items():
            url = fresh_database(admin, "ctxweb_pairs") if args.backend == "postgresql" else ""
            done = subprocess.run(
                [sys.executable, "-c", RUN, str(root), url],
                input=bodies,
                capture_output=True,
                cwd=root,
                check=False,
            )
            if done.returncode:
                sys.exit(f"{name} run {run + 1} failed:\n{done.stderr.decode()[-3000:]}")
            result = json.loads(done.stdout.decode().strip().splitlines()[-1])
            results[name].append(result)
            shown = ", ".join(f"{key} {value:.2f}" for key, value in result.items())
            print(f"run {run + 1} {name} ({root}): {shown}", flush=True)
    for name, runs in results.items():
        ratios = [r["ratio"] for r in runs]
        print(
            f"{name}: median ratio {statistics.median(ratios):.2f}"
            f" (runs {', '.join(f'{r:.2f}' for r in ratios)}),"
            f" server CPU a late turn {statistics.median(r['server_cpu_ms'] for r in runs):.1f} ms"
        )


if __name__ == "__main__":
    main()
