"""A deleted managed session is never substituted again (issue 34, item 4): an operator applies
``ctxweb-auto`` to an unmodified agent's session, the agent's next call reaches the provider
compacted, with ``[EXTERNALIZED:...]`` pointers; then the session is deleted, and every call after
it reaches the provider whole, exactly as the agent sent it, with no pointer to an artifact that
is gone, even once the agent's calls have made the session again under the same name.

Through one server, and through two processes sharing one database (the agent's calls through
one, the deletion through the other): the process that relays the agent's calls remembers the
rewrite, and must find out from the database that its session and operation are gone.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator

import pytest
from openai import OpenAI

from tests.support.managed import build_calls, call_api, operation_applied, wait
from tests.support.providers import StandIn
from tests.support.servers import create_key, embedded_env, live_server

pytestmark = pytest.mark.embedded_server

POINTER = "[EXTERNALIZED:"


@pytest.fixture(scope="module", params=["one process", "two processes"])
def servers(
    request: pytest.FixtureRequest, stand_in: StandIn, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, str, str]]:
    """(the URL the agent calls, the URL the operator deletes through, an operator key)."""
    env = embedded_env(
        tmp_path_factory.mktemp("managed-deletion"),
        CTXWEB_UPSTREAM_OPENAI=f"{stand_in.url}/v1",
        CTXWEB_RATE_LIMIT="",
        CTXWEB_RATE_LIMIT_COSTLY="",
    )
    key = create_key(env, role="operator")
    with live_server(env) as agents:
        if request.param == "one process":
            yield agents.url, agents.url, key
        else:
            with live_server(env) as operators:
                yield agents.url, operators.url, key


def agent(url: str, key: str, session: str) -> OpenAI:
    return OpenAI(
        base_url=f"{url}/proxy/openai/v1",
        api_key="sk-provider",
        default_headers={
            "X-Ctxweb-Key": key,
            "X-Ctxweb-Session": session,
            "X-Ctxweb-Managed": "1",
        },
    )


def delete(url: str, key: str, path: str) -> int:
    request = urllib.request.Request(
        f"{url}/api/v1/{path}", method="DELETE", headers={"Authorization": f"Bearer {key}"}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return int(response.status)


def turn_count(url: str, key: str, session: str) -> int:
    return int(call_api(url, key, "GET", f"sessions/{session}")["turn_count"])


def test_after_deleting_a_managed_session_every_call_reaches_the_provider_whole(
    servers: tuple[str, str, str], stand_in: StandIn
) -> None:
    agent_url, operator_url, key = servers
    session = f"deleted-{agent_url.rsplit(':', 1)[1]}-{operator_url.rsplit(':', 1)[1]}"
    client = agent(agent_url, key, session)
    history = build_calls(client, stand_in)
    wait(lambda: turn_count(agent_url, key, session) == 4, "4 turns")
    operation_applied(
        agent_url, key, session, "ctxweb-auto", {"target_tokens": 4000, "latest_turn": "outputs"}
    )

    # Managed: the agent's whole history goes out compacted, pointing at artifacts.
    history.append({"role": "user", "content": "What failed?"})
    client.chat.completions.create(model="gpt-4o", messages=history)  # type: ignore[arg-type]
    compacted = json.dumps(stand_in.requests[-1]["messages"])
    assert len(compacted) < len(json.dumps(history)) / 2
    assert POINTER in compacted, "the rewrite points at artifacts (what would 404 after)"
    wait(lambda: turn_count(agent_url, key, session) == 5, "5 turns")

    assert delete(operator_url, key, f"sessions/{session}") == 204

    # The first call after the deletion makes the session again (its name is the agent's); the
    # next one finds a session of that name with turns, where the rewrite used to come back.
    for n in range(3):
        history += [
            {"role": "assistant", "content": f"ok {n}"},
            {"role": "user", "content": f"And now ({n})?"},
        ]
        client.chat.completions.create(model="gpt-4o", messages=history)  # type: ignore[arg-type]
        received = stand_in.requests[-1]["messages"]
        assert received == history, f"call {n} after the deletion was rewritten"
        assert POINTER not in json.dumps(received)
        wait(lambda n=n: turn_count(agent_url, key, session) == n + 1, f"{n + 1} turns again")
    turns = call_api(agent_url, key, "GET", f"sessions/{session}/turns")
    assert not any(e.get("type") == "managed" for t in turns for e in t["events"]), turns
