"""The recording proxy against its documented shapes (``docs/proxy.openapi.yaml``), fuzzed by
schemathesis as the REST API and the receivers are (tests/ctxweb/capture/test_receiver_fuzz.py):
chat completions, responses and messages, valid and invalid, with the ctxweb key, a session and
managed mode in their headers, and the connectivity check. The upstream is the providers'
loopback stand-in (:func:`tests.support.providers.provider_stand_in`): nothing leaves the machine.

The property: ctxweb never answers a 5xx (the stand-in answers 200, or a 400 for a body it cannot
read, and either is relayed as it is), the caller always gets an answer, one the document gives,
and every call the upstream answered 200 is recorded as a turn or kept as an unread call, never
lost (no refused call records anything). Bounded and derandomized, so a run is repeatable.

In process, through the ASGI application (what uvicorn serves) on the test database; and live,
with schemathesis's command line against a uvicorn (embedded shape), every phase and every check
but the one that ``schemathesis.toml`` beside this file turns off, with its reason; the cassette
of that run gives the calls answered 200, and the server's database the turns and unread calls.
"""

from __future__ import annotations

import json
import sqlite3
import time
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
    positive_data_acceptance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from ctxweb.asgi import application
from ctxweb.contexts.models import Turn, UnreadCall
from ctxweb.proxy.relay import recording_idle
from tests.support.fuzz import schemathesis_live
from tests.support.providers import StandIn
from tests.support.servers import create_key, embedded_env, live_server
from tests.support.world import World

DOCUMENT = Path(__file__).resolve().parents[3] / "docs" / "proxy.openapi.yaml"
CONFIG = Path(__file__).with_name("schemathesis.toml")
#: Examples per operation and generation mode, in process.
MAX_EXAMPLES = 40
SEED = 20261127
#: Test cases per operation and phase of the live run.
LIVE_MAX_EXAMPLES = 20
#: The calls the proxy records, by path.
RECORDED = {
    "/proxy/openai/v1/chat/completions",
    "/proxy/openai/v1/responses",
    "/proxy/anthropic/v1/messages",
}

SCHEMA = schemathesis.openapi.from_dict(yaml.safe_load(DOCUMENT.read_text()))
SCHEMA.app = application
OPERATIONS = [result.ok() for result in SCHEMA.get_all_operations()]


@pytest.fixture
def proxied(world: World, stand_in: StandIn, settings: Any) -> Iterator[World]:
    settings.CTXWEB_UPSTREAM_OPENAI = f"{stand_in.url}/v1"
    settings.CTXWEB_UPSTREAM_ANTHROPIC = f"{stand_in.url}/v1"
    settings.CTXWEB_RATE_LIMIT = ""
    yield world
    recording_idle(close=True)  # the recorder's connection, to this test's database


def kept() -> int:
    """Turns and unread calls stored (the recorder's work done first)."""
    recording_idle()
    return Turn.objects.count() + UnreadCall.objects.count()


def test_the_document_lists_the_recorded_calls_and_the_check() -> None:
    from ctxweb.proxy.relay import RECORDED as relayed

    documented = {(op.method.upper(), op.path) for op in OPERATIONS}
    recorded = {("POST", f"/proxy/{provider}/v1/{rest}") for provider, rest in relayed}
    assert documented == {*recorded, ("HEAD", "/proxy/{provider}")}
    assert {path for _, path in recorded} == RECORDED


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("operation", OPERATIONS, ids=lambda op: op.label)
def test_the_proxy_answers_as_documented_and_never_loses_a_call(
    operation: Any, proxied: World
) -> None:
    headers = {"X-Ctxweb-Key": proxied.ingest_key}
    cases = st.one_of(
        operation.as_strategy(generation_mode=GenerationMode.POSITIVE),
        operation.as_strategy(generation_mode=GenerationMode.NEGATIVE),
    )
    answered: list[int] = []

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
        before = kept()
        response = case.call(headers=headers)
        what = (case.method, case.path, case.headers, case.body, response.text[:500])
        assert response.status_code < 500, what
        if response.status_code == 401:
            assert response.headers.get("x-should-retry") == ["false"], what
        checks = [
            status_code_conformance,
            content_type_conformance,
            response_schema_conformance,
            response_headers_conformance,
        ]
        if case.meta.generation.mode is GenerationMode.POSITIVE:
            checks.append(positive_data_acceptance)
        case.validate_response(response, checks=checks, headers=headers)
        recorded = case.path in RECORDED and case.method.upper() == "POST"
        expected = 1 if recorded and response.status_code == 200 else 0
        assert kept() - before == expected, what
        answered.append(response.status_code)

    check()
    if operation.path in RECORDED:  # the property was tested on answered calls, not only refusals
        assert 200 in answered, answered


def test_a_call_without_the_key_is_refused_and_never_reaches_the_provider(
    transactional_db: None, proxied: World, stand_in: StandIn
) -> None:
    operation = SCHEMA["/proxy/openai/v1/chat/completions"]["POST"]
    case = operation.Case(body={"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]})
    before = len(stand_in.requests)
    for headers in ({}, {"X-Ctxweb-Key": "not-a-key"}):
        response = case.call(headers=headers)
        assert response.status_code == 401
        assert response.headers.get("x-should-retry") == ["false"]
        assert response.json()["error"]["code"] == "invalid_api_key"
    assert len(stand_in.requests) == before
    assert kept() == 0


# --- live: schemathesis's command line against a uvicorn -----------------------------------------


@pytest.fixture(scope="module")
def server(
    stand_in: StandIn, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, str, Path]]:
    data = tmp_path_factory.mktemp("proxy-fuzz")
    env = embedded_env(
        data,
        CTXWEB_UPSTREAM_OPENAI=f"{stand_in.url}/v1",
        CTXWEB_UPSTREAM_ANTHROPIC=f"{stand_in.url}/v1",
        CTXWEB_RATE_LIMIT="",
        CTXWEB_RATE_LIMIT_COSTLY="",
        # every unread call of the run kept (the oldest are dropped past the cap)
        CTXWEB_UNREAD_CALLS_PER_PROJECT="100000",
    )
    key = create_key(env, role="ingest")
    with live_server(env) as running:
        yield running.url, key, data


def stored(data: Path) -> int:
    """Turns and unread calls in the live server's database."""
    with sqlite3.connect(f"file:{data / 'db.sqlite3'}?mode=ro", uri=True) as db:
        turns = db.execute("SELECT count(*) FROM contexts_turn").fetchone()[0]
        unread = db.execute("SELECT count(*) FROM contexts_unreadcall").fetchone()[0]
    return int(turns) + int(unread)


@pytest.mark.embedded_server
def test_schemathesis_finds_nothing_live(
    server: tuple[str, str, Path], stand_in: StandIn, tmp_path: Path
) -> None:
    url, key, data = server
    har = tmp_path / "run.har"
    output = schemathesis_live(
        str(DOCUMENT),
        config=CONFIG,
        seed=SEED,
        max_examples=LIVE_MAX_EXAMPLES,
        header=f"X-Ctxweb-Key: {key}",
        cwd=tmp_path,
        url=url,
        extra=("--report", "har", "--report-har-path", str(har)),
    )
    for phase in ("Coverage", "Fuzzing"):
        assert f"✅ {phase}" in output, output[-5_000:]
    entries = json.loads(har.read_text())["log"]["entries"]
    answered = [
        entry
        for entry in entries
        if entry["request"]["method"] == "POST"
        and any(entry["request"]["url"].split("?")[0].endswith(path) for path in RECORDED)
        and entry["response"]["status"] == 200
    ]
    assert answered, "no call was answered 200: the property was not tested"
    refused = [entry for entry in entries if entry["response"]["status"] == 401]
    assert all(
        {"name": "x-should-retry", "value": "false"} in entry["response"]["headers"]
        for entry in refused
    )
    # Recording follows the answer: every call answered 200 is kept, once.
    deadline = time.monotonic() + 30
    while stored(data) < len(answered) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert stored(data) == len(answered)
