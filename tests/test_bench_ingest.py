"""``bench/ingest.py``'s in-process session, a few turns, on the database of the pass (SQLite in
the embedded pass, PostgreSQL in the production pass): the benchmark that measures ingest keeps
running as ctxweb's ingest changes (it failed on PostgreSQL for a session unnoticed, when a batch
began to be sent as bytes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def database(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """The backend and a fresh database's URL: a PostgreSQL database of its own beside the
    pass's when the pass runs on PostgreSQL, else a SQLite file."""
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith("postgres"):
        yield "sqlite", f"sqlite:///{tmp_path}/bench.sqlite3"
        return
    import psycopg

    name = f"ctxweb_bench_smoke_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield "postgresql", url.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_the_ingest_benchmark_runs_a_session_on_the_pass_database(
    database: tuple[str, str], tmp_path: Path
) -> None:
    backend, url = database
    env = {k: v for k, v in os.environ.items() if k not in {"DJANGO_SETTINGS_MODULE", "DEBUG"}}
    env |= {"DATABASE_URL": url, "REDIS_URL": "", "CTXWEB_DATA_DIR": str(tmp_path / "data")}
    command = [sys.executable, str(ROOT / "bench" / "ingest.py"), "--worker", backend]
    command += ["--turns", "12", "--target-tokens", "20000", "--no-transcripts"]
    done = subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    session = result["session"]
    assert result["backend"] == backend
    assert session["turns"] == 12
    assert session["late"]["median_ms"] > 0
    # the database calls of the late turns were counted: two round trips on PostgreSQL
    assert session["late_executes"] == (2 if backend == "postgresql" else session["late_executes"])
    assert session["late_executes"] > 0
