"""The capture receivers against their documented shapes (``docs/receivers.openapi.yaml``),
fuzzed by schemathesis as the REST API is (tests/ctxweb/api/test_schema_fuzz.py and
test_live_fuzz.py): OTLP JSON exports and random protobuf bytes on both OTLP paths, Langfuse
batches, valid and invalid, sent with an ingest key. No answer may be a 5xx, and every answer
must be one the document gives (status, content type, body). Bounded and derandomized, so a run
is repeatable.

In process, through the WSGI application on the test database (either shape); and live, with
schemathesis's command line against a live uvicorn (embedded shape), every phase the document has
(coverage and fuzzing: it has no examples nor links), every check but the two that
``schemathesis.toml`` beside this file turns off, with its reasons.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from ctxweb.wsgi import application
from tests.support.fuzz import same_connection, schemathesis_live
from tests.support.servers import create_key, embedded_env, live_server
from tests.support.world import World

DOCUMENT = Path(__file__).resolve().parents[3] / "docs" / "receivers.openapi.yaml"
#: Examples per operation and generation mode.
MAX_EXAMPLES = 60
CONFIG = Path(__file__).with_name("schemathesis.toml")
SEED = 20261127
#: Test cases per operation and phase of the live run: about 2,000 requests, some 20 seconds.
LIVE_MAX_EXAMPLES = 30

SCHEMA = schemathesis.openapi.from_dict(yaml.safe_load(DOCUMENT.read_text()))
SCHEMA.app = application
OPERATIONS = [result.ok() for result in SCHEMA.get_all_operations()]


@pytest.fixture
def ingest_key(world: World, settings: Any) -> str:
    settings.CTXWEB_RATE_LIMIT = ""
    settings.CTXWEB_RATE_LIMIT_COSTLY = ""
    return world.ingest_key


def test_the_document_lists_every_receiver() -> None:
    from ctxweb.capture.urls import urlpatterns

    assert {op.path for op in OPERATIONS} == {f"/{p.pattern}" for p in urlpatterns}


@pytest.mark.django_db
@pytest.mark.parametrize("operation", OPERATIONS, ids=lambda op: op.label)
def test_the_receivers_answer_as_documented_and_never_5xx(operation: Any, ingest_key: str) -> None:
    headers = {"Authorization": f"Bearer {ingest_key}"}
    cases = st.one_of(
        operation.as_strategy(generation_mode=GenerationMode.POSITIVE),
        operation.as_strategy(generation_mode=GenerationMode.NEGATIVE),
    )

    @given(case=cases)
    @settings(
        max_examples=MAX_EXAMPLES,
        derandomize=True,
        deadline=None,
        database=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    def check(case: Any) -> None:
        response = case.call(headers=headers)
        assert response.status_code < 500, (case.method, case.path, response.text[:500])
        case.validate_response(
            response,
            checks=[status_code_conformance, content_type_conformance, response_schema_conformance],
            headers=headers,
        )

    with same_connection():
        check()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    env = embedded_env(
        tmp_path_factory.mktemp("fuzz"), CTXWEB_RATE_LIMIT="", CTXWEB_RATE_LIMIT_COSTLY=""
    )
    key = create_key(env, role="ingest")
    with live_server(env) as running:
        yield running.url, key


@pytest.mark.embedded_server
def test_schemathesis_finds_nothing_live(server: tuple[str, str], tmp_path: Path) -> None:
    url, key = server
    output = schemathesis_live(
        str(DOCUMENT),
        config=CONFIG,
        seed=SEED,
        max_examples=LIVE_MAX_EXAMPLES,
        header=f"Authorization: Bearer {key}",
        cwd=tmp_path,
        url=url,
    )
    for phase in ("Coverage", "Fuzzing"):
        assert f"✅ {phase}" in output, output[-5_000:]
