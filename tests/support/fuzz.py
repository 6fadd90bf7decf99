"""What the schemathesis tests share: the test's database connection kept across the in-process
requests, and schemathesis's command line run against a live server."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from django.core.signals import request_finished, request_started
from django.db import close_old_connections

#: Every phase schemathesis has; a document without examples or links skips two of them.
PHASES = "examples,coverage,fuzzing,stateful"


@contextmanager
def same_connection() -> Iterator[None]:
    """Keep the test's database connection across the in-process requests, as Django's test
    client does: the handler's ``close_old_connections`` would close it in the middle of the
    test's transaction (PostgreSQL). The test client reconnects the receivers after each
    request, so this wraps the fuzzing itself."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


def schemathesis_live(
    target: str,
    *,
    config: Path,
    seed: int,
    max_examples: int,
    header: str,
    cwd: Path,
    url: str | None = None,
    extra: Sequence[str] = (),
) -> str:
    """Run schemathesis's command line on ``target`` (a schema URL, or a document with ``url``
    its server), every phase, one worker, with ``header`` on each request; its output, once it
    exits 0 (else the assertion names what it found)."""
    command = [
        str(Path(sys.executable).with_name("schemathesis")),
        "--config-file",
        str(config),
        "run",
        target,
        *(("--url", url) if url is not None else ()),
        "--phases",
        PHASES,
        "--seed",
        str(seed),
        "--max-examples",
        str(max_examples),
        "--workers",
        "1",
        "--request-timeout",
        "60",
        "--header",
        header,
        "--no-color",
        *extra,
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=cwd)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-20_000:]
    return output
