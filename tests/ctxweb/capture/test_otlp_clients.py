"""Agents instrumented as users instrument them reach ctxweb with no ctxweb code: the real
``openai`` SDK calls a loopback stand-in for the OpenAI API, and each real instrumentation exports
to a live uvicorn (embedded shape). The session is then read back through the REST API: one turn
per model call, the regions the REST path gives, tool calls paired with their results, the
provider's usage kept.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from ctxweb.front.setup import setup_snippets
from tests.support.servers import ROOT, create_key, embedded_env, live_server

pytestmark = pytest.mark.embedded_server

#: (client, streaming, whether its spans carry the tool definitions)
CLIENTS = [
    ("openai-v2", False, False),
    ("openai-v2", True, False),
    ("openinference", False, True),
    ("openinference", True, True),
    ("openllmetry", False, True),
    ("langfuse", False, True),
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, str]]:
    env = embedded_env(tmp_path_factory.mktemp("otlp"))
    key = create_key(env, project="agents", role="ingest")
    foreign = create_key(env, project="elsewhere", role="ingest")
    with live_server(env) as running:
        yield running.url, key, foreign


def api(url: str, key: str, path: str) -> Any:
    request = urllib.request.Request(
        f"{url}/api/v1/{path}", headers={"Authorization": f"Bearer {key}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as error:
        return {"status": error.code}


def setup_environment(url: str, key: str) -> dict[str, str]:
    """The variables the setup page's OTLP snippet exports, with ``key`` in place."""
    [otlp] = [s for s in setup_snippets(url, "agents") if s["id"] == "otlp"]
    return {
        name: value.strip('"').replace("$CTXWEB_API_KEY", key)
        for name, value in re.findall(r"^export (\w+)=(.+)$", otlp["text"], re.MULTILINE)
    }


def run_agent(
    client: str, url: str, key: str, session: str, stream: bool, env: dict[str, str] | None = None
) -> dict[str, Any]:
    command = [sys.executable, "-m", "tests.support.instrumented", client, url, key, session]
    if stream:
        command.append("--stream")
    environment = {**os.environ, **(env or {})}
    done = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=180, env=environment
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "partial_success" not in done.stderr, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.parametrize(
    ("client", "stream", "tools"),
    CLIENTS,
    ids=[f"{c}{'-stream' if s else ''}" for c, s, _ in CLIENTS],
)
def test_an_instrumented_agent_fills_a_session_turn_by_turn(
    server: tuple[str, str, str], client: str, stream: bool, tools: bool
) -> None:
    url, key, foreign = server
    session = f"{client}-{'stream' if stream else 'plain'}"
    agent = run_agent(client, url, key, session, stream)
    # The session is named by the instrumentation's session attribute, else the agent run's trace.
    external_id = agent["trace_id"] or session
    detail = api(url, key, f"sessions/{external_id}")
    assert detail.get("turn_count") == 2, (detail, api(url, key, "sessions"))
    assert detail["source"] == "otel"
    turns = api(url, key, f"sessions/{external_id}/turns")
    _first, second = turns
    for turn in turns:
        assert turn["regions"]["system"] > 0
        assert turn["regions"]["user"] > 0
        assert (turn["regions"]["tools"] > 0) is tools
    assert second["regions"]["tool_calls"] > 0
    assert second["regions"]["tool_results"] > 0
    # The provider's usage, as the stand-in reported it for each call.
    sent = agent["requests"]
    for turn, request in zip(turns, sent, strict=True):
        assert turn["reported_input_tokens"] == max(1, len(json.dumps(request["messages"])) // 4)
    # The tool call and its result, paired by the id the model gave.
    messages = api(url, key, f"sessions/{external_id}/turns/1")["messages"]
    roles = [m["role"] for m in messages]
    assert roles == ["system", "user", "assistant", "tool"], roles
    text = json.dumps(messages)
    assert agent["call_id"] in text
    assert "b is 0 when the list is empty" in text
    # Another project's key sees nothing of it.
    assert api(url, foreign, f"sessions/{external_id}") == {"status": 404}


def test_the_same_agent_exported_again_doubles_nothing(server: tuple[str, str, str]) -> None:
    """A second run of the same session adds its two calls; a re-sent span adds none (the
    receiver's own tests post the very same export twice)."""
    url, key, _ = server
    run_agent("openinference", url, key, "again", False)
    run_agent("openinference", url, key, "again", False)
    assert api(url, key, "sessions/again")["turn_count"] == 4


def test_the_setup_pages_otlp_snippet_is_all_an_exporter_needs(
    server: tuple[str, str, str],
) -> None:
    """The environment variables the setup page shows, and nothing else, configure the
    OpenTelemetry SDK's exporter to reach ctxweb."""
    url, key, _ = server
    env = setup_environment(url, key)
    assert env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] == f"{url}/v1/traces"
    run_agent("env", url, "not-used", "from-setup", False, env)
    assert api(url, key, "sessions/from-setup")["turn_count"] == 2


def test_an_exporter_that_compresses_its_exports_is_read(server: tuple[str, str, str]) -> None:
    """The setup page's variables plus ``OTEL_EXPORTER_OTLP_COMPRESSION=gzip`` (what collectors
    and many deployments set): the SDK exporter's gzipped protobuf exports become turns."""
    url, key, _ = server
    env = {**setup_environment(url, key), "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip"}
    run_agent("env", url, "not-used", "gzipped", False, env)
    found = api(url, key, "sessions/gzipped")
    assert found.get("turn_count") == 2, found
