"""Live updates end to end: the real ASGI app (uvicorn, WebSockets) driven by headless Chromium.

Unlike ``test_browser.py`` (pytest-django's WSGI live server, no WebSockets), this starts
``python -m ctxweb.server`` as a subprocess in the embedded shape: its own temporary
``CTXWEB_DATA_DIR`` (a fresh SQLite file, migrated by ``manage.py migrate``), no ``DATABASE_URL``
and no ``REDIS_URL`` (in-memory channel layer, operations in a background thread). Data is set up
with the management commands of the public contract and everything else goes through HTTP: the
REST API with a Bearer key, the dashboard in the browser. The test database of pytest is not used.

Debian's Chromium at /usr/bin/chromium is used as is (no browser is ever downloaded). Without it
the test skips with the reason, except under ``CI=true`` where it fails. Screenshots go to
``test-output/screenshots/``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ctxweb.contexts.demo import coding_session
from tests.support.browser import PASSWORD, USERNAME, chromium, require_chromium, shot
from tests.support.servers import ROOT, LiveServer, create_key, embedded_env, free_port, live_server

PROJECT = "live"
SESSION = "live-session"
#: The ingest bodies: the first ``INITIAL`` posted before the page opens, the next one live.
BODIES = coding_session(7, seed=11, target_tokens=20_000)
#: ctxweb-auto's target: well under the last context (about 14K tokens counted), so applying it
#: really shrinks the context.
TARGET_TOKENS = 6_000  # out of reach (the latest outputs stay verbatim): it does what it can
#: The generated session is a single user request (its latest turn): let ctxweb-auto reach its
#: older tool outputs.
LATEST_TURN = "outputs"
INITIAL = 6
#: Generous bounds for live updates (they normally arrive within a fraction of a second).
LIVE_MS = 30_000

pytestmark = [pytest.mark.browser]


@dataclass
class Server:
    url: str
    key: str
    daphne: LiveServer


def _environment(data_dir: Path) -> dict[str, str]:
    env = embedded_env(data_dir)
    # Opt-in production shape (never in the default passes): an empty throwaway PostgreSQL
    # database and a Redis database; a Celery worker then runs the operations.
    for name in ("DATABASE_URL", "REDIS_URL"):
        if os.environ.get(f"LIVE_TEST_{name}"):
            env[name] = os.environ[f"LIVE_TEST_{name}"]
    return env


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    require_chromium()  # checked first: no server is started for a skipped test
    data_dir = tmp_path_factory.mktemp("ctxweb-live")
    env = _environment(data_dir)
    key = create_key(env, project=PROJECT, role="operator", owner=USERNAME, password=PASSWORD)
    # The page's WebSocket opens only from the origins make run serves, which follow PORT.
    port = free_port()
    env["PORT"] = str(port)
    worker = None
    if env.get("REDIS_URL"):
        celery = str(Path(sys.executable).with_name("celery"))
        with (data_dir / "celery.log").open("wb") as out:
            worker = subprocess.Popen(
                [celery, "-A", "ctxweb", "worker", "--pool=solo", "--loglevel=info"],
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
    try:
        with live_server(env, port=port) as running:
            yield Server(url=running.url, key=key, daphne=running)
    finally:
        if worker is not None:
            worker.terminate()
            try:
                worker.wait(timeout=10)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait(timeout=10)


def api(server: Server, method: str, path: str, body: Any = None) -> Any:
    request = urllib.request.Request(
        f"{server.url}/api/v1/{path}",
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {server.key}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as error:
        raise AssertionError(f"{method} {path}: {error.code} {error.read()[:2000]!r}") from error


def post_turn(server: Server, body: dict[str, Any], session: str = SESSION) -> dict[str, Any]:
    result: dict[str, Any] = api(server, "POST", f"sessions/{session}/turns", body)
    return result


@pytest.fixture(scope="module")
def browser(server: Server) -> Iterator[Any]:
    with chromium() as browser:
        yield browser


@pytest.fixture
def new_page(browser: Any) -> Iterator[Callable[[], Any]]:
    """Pages of one browser context (one login); no page may raise a JavaScript error."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    context.set_default_timeout(LIVE_MS)
    errors: list[str] = []

    def new_page() -> Any:
        page = context.new_page()
        page.on("pageerror", lambda error: errors.append(f"{page.url}: {error}"))
        return page

    yield new_page
    context.close()
    assert errors == [], f"JavaScript errors: {errors}"


def stack_count(page: Any) -> int:
    return int(page.evaluate("() => window.ctxwebChart.stacks().count"))


def wait_for_stacks(page: Any, count: int) -> None:
    page.wait_for_function(f"() => window.ctxwebChart.stacks().count === {count}")


def test_live_turns_and_an_applied_operation_reach_the_open_pages(
    server: Server, new_page: Callable[[], Any]
) -> None:
    from playwright.sync_api import expect

    for body in BODIES[:INITIAL]:
        post_turn(server, body)
    base = server.url
    page = new_page()
    frames: list[str] = []  # what the session page's WebSocket received
    page.on("websocket", lambda ws: ws.on("framereceived", lambda data: frames.append(str(data))))

    # Log in through the dashboard's form.
    page.goto(f"{base}/")
    assert "/accounts/login/" in page.url
    page.fill("#id_username", USERNAME)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/")

    # The session page stays open, never reloaded, until the end.
    page.goto(f"{base}/sessions/{SESSION}/")
    page.wait_for_function("() => window.ctxwebLive && window.ctxwebLive.state() === 1")
    page.evaluate("() => { window.__notReloaded = true; }")
    assert stack_count(page) == INITIAL

    # A turn posted through the API appears as one more stack.
    post_turn(server, BODIES[INITIAL])
    wait_for_stacks(page, INITIAL + 1)
    expect(page.locator("#chart-live")).to_contain_text(f"Turn {INITIAL}:")
    shot(page, "live-turn-appended")

    # Apply ctxweb-auto from the preview page (another tab): its status reaches "succeeded" by
    # itself, and the session page hears the operation finish.
    preview = new_page()
    preview.goto(
        f"{base}/sessions/{SESSION}/preview/?strategy=ctxweb-auto&target_tokens={TARGET_TOKENS}"
        f"&latest_turn={LATEST_TURN}"
    )
    preview.click("[data-apply]")
    preview.wait_for_url("**operation=*")
    operation_id = int(preview.url.rsplit("operation=", 1)[1].split("&")[0])
    expect(preview.locator(f'[data-operation="{operation_id}"]')).to_contain_text("succeeded")
    shot(preview, "live-operation-succeeded")
    expect(page.locator("#chart-live")).to_contain_text(f"Operation {operation_id} (ctxweb-auto)")
    finished = [json.loads(f) for f in frames if '"operation.finished"' in f]
    assert [m["operation"]["status"] for m in finished] == ["succeeded"], frames
    operation = api(server, "GET", f"operations/{operation_id}")
    assert operation["status"] == "succeeded", operation
    result = operation["result"]
    assert result["tokens_after"] < result["tokens_before"] - 1_000, operation

    # The agent's next call starts from the managed context: a smaller stack, with the
    # operation's marker, appears on the session page.
    context = api(server, "GET", f"sessions/{SESSION}/context")
    request = context["request"]
    request["messages"] = [
        *request["messages"],
        {"role": "assistant", "content": "The compacted context is enough to go on."},
        {"role": "user", "content": "Good: now run the whole test suite once more."},
    ]
    created = post_turn(server, {"format": context["format"], "request": request})
    assert created["index"] == INITIAL + 1
    wait_for_stacks(page, INITIAL + 2)
    assert page.evaluate("() => window.__notReloaded === true"), "the session page reloaded"
    shot(page, "live-turn-after-operation")

    turns = api(server, "GET", f"sessions/{SESSION}/turns")
    assert [t["index"] for t in turns] == list(range(INITIAL + 2))
    before, after = turns[-2], turns[-1]
    assert after["total_tokens"] < before["total_tokens"], (before, after)
    # Counted against the managed context before the operation (``before`` also holds the
    # usage it reported): the two messages appended cost far less than the operation saved.
    assert after["total_tokens"] < result["tokens_before"], (result, after)
    assert [e for e in after["events"] if e.get("type") == "operation"], after["events"]


def test_a_page_whose_socket_dropped_catches_up_with_the_turns_it_missed_page_by_page(
    server: Server, new_page: Callable[[], Any]
) -> None:
    """Playwright stands between the session page's WebSockets and the server. A turn is
    posted after the page is drawn and before its first socket opens: the page asks for it as
    the socket opens. That socket then hears nothing (Playwright drops what the server sends)
    while four turns are posted; it closes; the page reconnects and asks the API for the turns
    after its last one, two a page (Playwright turns its 500 into 2, so that it follows the Link
    header from page to page)."""
    session = "catch-up"
    bodies = coding_session(7, seed=12, target_tokens=8_000)
    for body in bodies[:2]:
        post_turn(server, body, session)
    page = new_page()
    page.goto(f"{server.url}/")
    page.fill("#id_username", USERNAME)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{server.url}/")

    sockets: list[Any] = []
    dropped: list[Any] = []

    def between(socket: Any) -> None:
        sockets.append(socket)
        if len(sockets) == 1:
            post_turn(server, bodies[2], session)  # the page is drawn, its socket not yet open
        to_server = socket.connect_to_server()
        if len(sockets) == 1:
            to_server.on_message(lambda message: dropped.append(message))  # the page misses them

    asked: list[str] = []

    def smaller_pages(route: Any) -> None:
        url = route.request.url.replace("limit=500", "limit=2")
        asked.append(url.split("/turns", 1)[1])
        route.continue_(url=url)

    page.route_web_socket(lambda url: "/ws/" in url, between)
    page.route(lambda url: f"/sessions/{session}/turns?" in url, smaller_pages)
    page.goto(f"{server.url}/sessions/{session}/")
    page.wait_for_function("() => window.ctxwebLive && window.ctxwebLive.state() === 1")
    page.evaluate("() => { window.__notReloaded = true; }")
    wait_for_stacks(page, 3)  # drawn with two, the third from the catch-up as the socket opened
    assert asked == ["?project=1&limit=2&after=1"]
    for body in bodies[3:]:
        post_turn(server, body, session)

    def heard() -> int:
        return sum('"turn.created"' in str(message) for message in dropped)

    deadline = time.monotonic() + LIVE_MS / 1000
    while heard() < 4 and time.monotonic() < deadline:
        page.wait_for_timeout(50)
    assert heard() == 4, dropped
    assert stack_count(page) == 3  # missed, so far
    assert len(asked) == 1  # no catch-up but when a socket opens

    sockets[0].close()  # the page's socket: it reconnects, then catches up
    wait_for_stacks(page, 7)
    assert page.evaluate("() => window.ctxwebChart.lastIndex()") == 6
    assert page.evaluate("() => window.__notReloaded === true"), "the session page reloaded"
    assert len(sockets) == 2
    # the page's own URL names the project; the Link header keeps it
    assert asked == [
        "?project=1&limit=2&after=1",
        "?project=1&limit=2&after=2",
        "?after=4&limit=2&project=1",
    ], asked
    # Live again: a turn posted now arrives over the new socket.
    more = {name: value for name, value in bodies[-1].items() if name != "turn_id"}
    more["request"] = {
        **more["request"],
        "messages": [*more["request"]["messages"], {"role": "user", "content": "One more."}],
    }
    post_turn(server, more, session)
    wait_for_stacks(page, 8)
