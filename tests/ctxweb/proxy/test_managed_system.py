"""Managed mode when the operation changes the system prompt: picoclaw keeps its summary in the
top-level system prompt of an Anthropic request. An unmodified ``anthropic`` agent behind the proxy
must receive the operation's system prompt with its compacted messages, on the next call and the
ones after it, and its own prompt again once it changes it or the operation is undone."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from anthropic import Anthropic

from tests.support.managed import OUTPUT, call_api, operation_applied, wait
from tests.support.providers import StandIn
from tests.support.servers import create_key, embedded_env, live_server

pytestmark = pytest.mark.embedded_server

SYSTEM = "You are a careful coding agent."
SUMMARY_START = "CONTEXT_SUMMARY:"


@pytest.fixture(scope="module")
def server(
    stand_in: StandIn, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, str]]:
    env = embedded_env(
        tmp_path_factory.mktemp("managed-system"),
        CTXWEB_UPSTREAM_ANTHROPIC=f"{stand_in.url}/v1",
        CTXWEB_RATE_LIMIT="",
        CTXWEB_RATE_LIMIT_COSTLY="",
    )
    key = create_key(env, role="operator")
    with live_server(env) as running:
        yield running.url, key


def system_text(request: dict[str, Any]) -> str:
    system = request.get("system") or ""
    if isinstance(system, str):
        return system
    return "\n".join(block.get("text", "") for block in system)


def test_the_operations_system_prompt_reaches_the_agents_next_calls(
    server: tuple[str, str], stand_in: StandIn
) -> None:
    url, key = server
    client = Anthropic(
        base_url=f"{url}/proxy/anthropic",
        api_key="sk-provider",
        default_headers={
            "X-Ctxweb-Key": key,
            "X-Ctxweb-Session": "picoclaw",
            "X-Ctxweb-Managed": "1",
        },
    )
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "Build the project and fix what fails."}
    ]
    stand_in.then(*(f"Step {n} done." for n in range(8)))
    for n in range(8):
        client.messages.create(
            model="claude-sonnet-4-6", max_tokens=1024, system=SYSTEM, messages=history
        )
        history += [
            {"role": "assistant", "content": f"Step {n} done."},
            {"role": "user", "content": f"Build output {n}:\n{OUTPUT}"},
        ]
        assert system_text(stand_in.requests[-1]) == SYSTEM  # unmanaged so far
    wait(lambda: call_api(url, key, "GET", "sessions/picoclaw")["turn_count"] == 8, "8 turns")

    created = operation_applied(url, key, "picoclaw", "picoclaw-summarize", {"force": True})
    managed = call_api(url, key, "GET", "sessions/picoclaw/context")["request"]
    assert SUMMARY_START in system_text(managed)

    # The agent sends its own system prompt and whole history: the provider gets the
    # operation's system prompt (with the summary) and its compacted messages.
    client.messages.create(
        model="claude-sonnet-4-6", max_tokens=1024, system=SYSTEM, messages=history
    )
    received = stand_in.requests[-1]
    assert system_text(received) == system_text(managed)
    assert received["messages"][: len(managed["messages"])] == managed["messages"]
    assert len(received["messages"]) < len(history)

    # A later call, its history grown, gets the same system prompt and replacement.
    history += [
        {"role": "assistant", "content": "Looked."},
        {"role": "user", "content": "And now?"},
    ]
    client.messages.create(
        model="claude-sonnet-4-6", max_tokens=1024, system=SYSTEM, messages=history
    )
    again = stand_in.requests[-1]
    assert system_text(again) == system_text(managed)
    assert again["messages"][-2:] == history[-2:]

    # An agent that changes its own system prompt is sent its new prompt: the summary was
    # written for the old one.
    history += [{"role": "assistant", "content": "Ok."}, {"role": "user", "content": "Go on."}]
    client.messages.create(
        model="claude-sonnet-4-6",
        max_tokens=1024,
        system=SYSTEM + " Be brief.",
        messages=history,
    )
    assert system_text(stand_in.requests[-1]) == SYSTEM + " Be brief."

    call_api(url, key, "POST", f"operations/{created['id']}/undo")
    history += [{"role": "assistant", "content": "Ok."}, {"role": "user", "content": "Once more?"}]
    client.messages.create(
        model="claude-sonnet-4-6", max_tokens=1024, system=SYSTEM, messages=history
    )
    assert system_text(stand_in.requests[-1]) == SYSTEM
    assert stand_in.requests[-1]["messages"] == history  # whole again
