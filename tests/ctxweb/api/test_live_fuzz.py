"""The whole API fuzzed as a user would: schemathesis's command line against a live uvicorn
(embedded shape) over ``/api/schema/``: every phase (the schema's examples, coverage, fuzzing,
stateful sequences that follow the schema's links), every check, a fixed seed and a budget that
fits CI, rate limits off. Zero failures.

The one exception, written with its reasons in ``schemathesis.toml`` beside this file: bodies
whose validity JSON Schema cannot express (a provider request, a strategy's parameters, a
transcript) are not held to "every schema-valid body is accepted".
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.fuzz import schemathesis_live
from tests.support.servers import create_key, embedded_env, live_server

pytestmark = pytest.mark.embedded_server

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
    with live_server(env) as running:
        yield running.url, key


def test_schemathesis_finds_nothing_in_any_phase(server: tuple[str, str], tmp_path: Path) -> None:
    url, key = server
    output = schemathesis_live(
        f"{url}/api/schema/",
        config=CONFIG,
        seed=SEED,
        max_examples=MAX_EXAMPLES,
        header=f"Authorization: Bearer {key}",
        cwd=tmp_path,
        extra=("--report", "junit", "--report-dir", str(tmp_path)),
    )
    for phase in ("Examples", "Coverage", "Fuzzing", "Stateful"):
        assert f"✅ {phase}" in output, output[-5_000:]
