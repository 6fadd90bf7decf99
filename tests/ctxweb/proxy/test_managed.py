"""Managed mode end to end: an unmodified ``openai`` agent behind the proxy; an operator applies
``ctxweb-auto`` through the API; the agent's next call, still carrying its whole history, reaches
the provider compacted (the operation's context, then the agent's newer messages, tool pairs
intact); after Undo the next call goes through whole."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from openai import OpenAI

from tests.support.managed import build_calls, call_api, operation_applied, wait
from tests.support.providers import StandIn
from tests.support.servers import create_key, embedded_env, live_server

pytestmark = pytest.mark.embedded_server


@pytest.fixture(scope="module")
def server(
    stand_in: StandIn, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, str]]:
    env = embedded_env(
        tmp_path_factory.mktemp("managed"),
        CTXWEB_UPSTREAM_OPENAI=f"{stand_in.url}/v1",
        CTXWEB_RATE_LIMIT="",
        CTXWEB_RATE_LIMIT_COSTLY="",
    )
    key = create_key(env, role="operator")
    with live_server(env) as running:
        yield running.url, key


def pairs_intact(messages: list[dict[str, Any]]) -> bool:
    called = {c["id"] for m in messages for c in m.get("tool_calls") or []}
    answered = {m["tool_call_id"] for m in messages if m["role"] == "tool"}
    return answered <= called


def test_an_applied_operation_reaches_the_agents_next_call_and_undo_takes_it_back(
    server: tuple[str, str], stand_in: StandIn
) -> None:
    url, key = server
    client = OpenAI(
        base_url=f"{url}/proxy/openai/v1",
        api_key="sk-provider",
        default_headers={
            "X-Ctxweb-Key": key,
            "X-Ctxweb-Session": "managed",
            "X-Ctxweb-Managed": "1",
        },
    )

    def whole(history: list[dict[str, Any]]) -> None:  # unmanaged so far: sent whole
        assert stand_in.requests[-1]["messages"] == history[:-3]

    history = build_calls(client, stand_in, after=whole)
    wait(lambda: call_api(url, key, "GET", "sessions/managed")["turn_count"] == 4, "4 turns")

    created = operation = operation_applied(
        url, key, "managed", "ctxweb-auto", {"target_tokens": 4000, "latest_turn": "outputs"}
    )
    assert operation["result"]["tokens_saved"] > 0, operation["result"]

    # The agent knows nothing of it: it sends its whole history and a new question.
    history.append({"role": "user", "content": "What failed?"})
    client.chat.completions.create(model="gpt-4o", messages=history)
    received = stand_in.requests[-1]["messages"]
    assert received != history
    assert len(json.dumps(received)) < len(json.dumps(history)) / 2
    assert received[-1] == history[-1]
    assert pairs_intact(received)
    managed = call_api(url, key, "GET", "sessions/managed/context")["request"]["messages"]
    assert received[: len(managed)] == managed
    turns = wait(
        lambda: (lambda t: t if len(t) == 5 else None)(
            call_api(url, key, "GET", "sessions/managed/turns")
        ),
        "5 turns",
    )
    assert any(e.get("type") == "managed" for e in turns[-1]["events"]), turns[-1]["events"]

    # A later call, its history grown again, gets the same replacement.
    history += [{"role": "assistant", "content": "done"}, {"role": "user", "content": "And now?"}]
    client.chat.completions.create(model="gpt-4o", messages=history)
    again = stand_in.requests[-1]["messages"]
    assert again[: len(managed)] == managed
    assert again[-3:] == history[-3:]

    call_api(url, key, "POST", f"operations/{created['id']}/undo")
    history += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "Once more?"}]
    client.chat.completions.create(model="gpt-4o", messages=history)
    assert stand_in.requests[-1]["messages"] == history  # whole again
