"""Live updates of calls recorded by another process: the embedded shape as ``make run`` starts
it (``python -m ctxweb.server``, SQLite, the in-memory channel layer), where relayed calls are
recorded by the recorder processes the web process starts, not by the web process itself.

The in-memory channel layer lives in the web process: a turn a recorder process stored was
announced to that process's own layer, which no page listens to, and the session page open in
the browser never heard of it. The recorders now hand their events to the web process
(:mod:`ctxweb.contexts.events_relay`), which sends them to the page's WebSocket.

Debian's Chromium at /usr/bin/chromium is used as is; without it the test skips with the reason,
except under ``CI=true`` where it fails.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.browser import PASSWORD, USERNAME, chromium, log_in, require_chromium, shot
from tests.support.managed import wait
from tests.support.providers import StandIn
from tests.support.servers import (
    LiveServer,
    create_key,
    embedded_env,
    free_port,
    live_server,
    session_turns,
)

SESSION = "recorded-live"
#: Generous: the recorders run at a lower priority, and the test suite keeps both cores busy.
LIVE_MS = 60_000

pytestmark = [pytest.mark.browser]


@pytest.fixture(scope="module")
def server(
    stand_in: StandIn, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[LiveServer, str]]:
    require_chromium()  # checked first: no server is started for a skipped test
    port = free_port()
    env = embedded_env(
        tmp_path_factory.mktemp("recorded-live"),
        CTXWEB_UPSTREAM_OPENAI=f"{stand_in.url}/v1",
        CTXWEB_RATE_LIMIT="",
        CTXWEB_RATE_LIMIT_COSTLY="",
        PORT=str(port),  # the page's WebSocket opens only from the origins make run serves
    )
    assert "CTXWEB_RECORDER" not in env  # the embedded shape's default: recorder processes
    key = create_key(env, project="p", role="operator", owner=USERNAME, password=PASSWORD)
    with live_server(env, port=port) as running:
        yield running, key


def relay(server: LiveServer, key: str, messages: list[dict[str, Any]]) -> None:
    """One chat call through the proxy, naming the session."""
    request = urllib.request.Request(
        f"{server.url}/proxy/openai/v1/chat/completions",
        data=json.dumps({"model": "gpt-4o", "messages": messages}).encode(),
        headers={
            "Content-Type": "application/json",
            "Authorization": "Bearer sk-upstream",
            "X-Ctxweb-Key": key,
            "X-Ctxweb-Session": SESSION,
        },
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        assert response.status == 200
        # read to its end, as an agent reads it: a call whose caller leaves before the answer's
        # end is not recorded (it failed once in CI so: the server saw the caller leave before
        # it had read the provider's answer)
        json.loads(response.read())


def turns(server: LiveServer, key: str) -> int:
    return session_turns(server.url, key, SESSION, project="p")


def test_a_turn_recorded_by_a_recorder_process_reaches_the_open_session_page(
    server: tuple[LiveServer, str],
) -> None:
    running, key = server
    first = [{"role": "user", "content": "Read the failing test and tell me why it fails."}]
    relay(running, key, first)
    wait(lambda: turns(running, key) == 1 or None, "the first call recorded")

    with chromium() as browser:
        context = browser.new_context(viewport={"width": 1400, "height": 900})
        context.set_default_timeout(LIVE_MS)
        errors: list[str] = []
        page = context.new_page()
        page.on("pageerror", lambda error: errors.append(str(error)))
        frames: list[str] = []
        page.on("websocket", lambda ws: ws.on("framereceived", lambda data: frames.append(data)))
        log_in(page, running.url)
        page.goto(f"{running.url}/sessions/{SESSION}/")
        page.wait_for_function("() => window.ctxwebLive && window.ctxwebLive.state() === 1")
        assert page.evaluate("() => window.ctxwebChart.stacks().count") == 1

        relay(
            running,
            key,
            [
                *first,
                {"role": "assistant", "content": "done"},
                {"role": "user", "content": "Now fix it and run the suite again."},
            ],
        )
        try:
            page.wait_for_function("() => window.ctxwebChart.stacks().count === 2")
        except Exception as error:  # say which step failed: recording, the event or the page
            raise AssertionError(
                f"the page shows no second turn ({error}); the API lists"
                f" {turns(running, key)} turns; frames received: {frames};"
                f" the server's last lines:\n{running.output}"
            ) from error
        created = [json.loads(f) for f in frames if '"turn.created"' in f]
        assert [event["turn"]["index"] for event in created] == [1], frames
        shot(page, "live-recorded-turn")
        context.close()
        assert errors == [], errors
