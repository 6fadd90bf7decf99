"""The whole API fuzzed as a user would: schemathesis's command line against a live daphne
(embedded shape) over ``/api/schema/``: every phase (the schema's examples, coverage, fuzzing,
stateful sequences that follow the schema's links), every check, a fixed seed and a budget that
fits CI, rate limits off. Zero failures.

The one exception, written with its reasons in ``schemathesis.toml`` beside this file: bodies
whose validity JSON Schema cannot express (a provider request, a strategy's parameters, a
transcript) are not held to "every schema-valid body is accepted".
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.servers import create_key, daphne, embedded_env

CONFIG = Path(__file__).with_name("schemathesis.toml")
SEED = 20261124
#: Test cases per operation and phase: about 1,300 requests, some 20 seconds.
MAX_EXAMPLES = 30


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    env = embedded_env(
        tmp_path_factory.mktemp("fuzz"), CTXWEB_RATE_LIMIT="", CTXWEB_RATE_LIMIT_COSTLY=""
    )
    key = create_key(env)
    with daphne(env) as running:
        yield running.url, key


def test_schemathesis_finds_nothing_in_any_phase(server: tuple[str, str], tmp_path: Path) -> None:
    url, key = server
    command = [
        str(Path(sys.executable).with_name("schemathesis")),
        "--config-file",
        str(CONFIG),
        "run",
        f"{url}/api/schema/",
        "--phases",
        "examples,coverage,fuzzing,stateful",
        "--seed",
        str(SEED),
        "--max-examples",
        str(MAX_EXAMPLES),
        "--workers",
        "1",
        "--request-timeout",
        "60",
        "--header",
        f"Authorization: Bearer {key}",
        "--no-color",
        "--report",
        "junit",
        "--report-dir",
        str(tmp_path),
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-20_000:]
    for phase in ("Examples", "Coverage", "Fuzzing", "Stateful"):
        assert f"✅ {phase}" in output, output[-5_000:]
