"""The recording proxy takes a session's window from what the call says: the real ``anthropic``
SDK through a live uvicorn to a loopback stand-in, with and without the 1M-context beta header
Claude Code sends for a model's 1M window."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from anthropic import Anthropic

from tests.support.providers import StandIn, provider_stand_in
from tests.support.servers import create_key, embedded_env, live_server

pytestmark = pytest.mark.embedded_server

PROVIDER_KEY = "sk-provider-secret-0123456789"
BETA_1M = "context-1m-2025-08-07"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, StandIn]]:
    with provider_stand_in() as stand_in:
        env = embedded_env(
            tmp_path_factory.mktemp("windows"),
            CTXWEB_UPSTREAM_ANTHROPIC=f"{stand_in.url}/v1",
            CTXWEB_RATE_LIMIT="",
        )
        key = create_key(env, role="ingest")
        with live_server(env) as running:
            yield running.url, key, stand_in


def recorded(url: str, key: str, session: str) -> dict[str, Any]:
    """The session once the proxy has recorded its call (recording follows the answer)."""
    request = urllib.request.Request(
        f"{url}/api/v1/sessions/{session}", headers={"Authorization": f"Bearer {key}"}
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                detail: dict[str, Any] = json.loads(response.read())
            if detail["turn_count"]:
                return detail
        except urllib.error.HTTPError as failure:
            if failure.code != 404:  # not yet created: anything else is a failure
                raise
        assert time.monotonic() < deadline, f"{session} was not recorded"
        time.sleep(0.1)


def ask(url: str, key: str, session: str, model: str, headers: dict[str, str]) -> None:
    client = Anthropic(
        base_url=f"{url}/proxy/anthropic",
        api_key=PROVIDER_KEY,
        default_headers={"X-Ctxweb-Key": key, "X-Ctxweb-Session": session, **headers},
    )
    answer = client.messages.create(
        model=model, max_tokens=64, messages=[{"role": "user", "content": "Why does it fail?"}]
    )
    assert answer.content


def test_the_1m_beta_header_gives_the_session_a_stated_1m_window(
    server: tuple[str, str, StandIn],
) -> None:
    url, key, stand_in = server
    headers = {"anthropic-beta": f"fine-grained-tool-streaming-2025-05-14,{BETA_1M}"}
    ask(url, key, "one-million", "claude-sonnet-4-6", headers)
    detail = recorded(url, key, "one-million")
    assert (detail["context_window"], detail["context_window_source"]) == (1_000_000, "request")
    # the header reached the provider as sent
    assert BETA_1M in stand_in.headers[-1].get("anthropic-beta", "")


def test_without_the_header_the_window_is_the_models_and_guessed(
    server: tuple[str, str, StandIn],
) -> None:
    url, key, _ = server
    ask(url, key, "default-window", "claude-sonnet-4-6", {})
    detail = recorded(url, key, "default-window")
    assert (detail["context_window"], detail["context_window_source"]) == (200_000, "model")


def test_a_model_named_with_the_1m_suffix_states_its_window(
    server: tuple[str, str, StandIn],
) -> None:
    url, key, _ = server
    ask(url, key, "suffix", "claude-opus-4-6[1m]", {})
    detail = recorded(url, key, "suffix")
    assert (detail["context_window"], detail["context_window_source"]) == (1_000_000, "request")
