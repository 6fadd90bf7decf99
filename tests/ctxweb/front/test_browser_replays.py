"""The replay pages in a real browser: headless Chromium driven by Playwright against
pytest-django's live server (threads, no WebSockets: the replay runs in a thread of the server's
process, as in the embedded shape, and the page polls its progress). The socket's events are
played to the page through Playwright's WebSocket routing.

Debian's Chromium at /usr/bin/chromium is used as is; without it these tests skip with the reason,
except under ``CI=true`` where they fail. Each test saves a screenshot under
``test-output/screenshots/``.
"""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from compaction.messages import parse
from ctxweb.accounts.models import Project
from ctxweb.contexts.demo import coding_session
from ctxweb.contexts.models import Replay, Session
from ctxweb.contexts.services import replays, turn_ingest
from tests.support.browser import PASSWORD, USERNAME, log_in, off_loop, require_chromium, shot
from tests.support.servers import create_key, embedded_env, free_port
from tests.support.servers import live_server as serving

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SESSION = "replayed"
#: A coding session that outgrows a 16K window: the presets compact it, the recording overflows.
BODIES = coding_session(24, seed=7, target_tokens=20_000)
WINDOW = 16_000
PICKED = ("BaseAgent", "nanobot", "ctxweb-auto 30%")

#: How many pixels of a canvas are painted (not transparent).
PAINTED = """(canvas) => {
  const data = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
  let painted = 0;
  for (let i = 3; i < data.length; i += 4) if (data[i]) painted++;
  return painted;
}"""


@pytest.fixture
def threaded(settings: Any) -> None:
    """Replays run in a thread of the live server's process after their request commits (the
    embedded shape), whatever the environment says about a broker."""
    settings.REDIS_URL = ""
    settings.CTXWEB_TASKS_INLINE = False


def ingest(project: Project) -> None:
    off_loop(_ingest, project)


def _ingest(project: Project) -> None:
    for body in BODIES:
        turn_ingest(
            project=project,
            external_id=SESSION,
            context=parse(body["format"], body["request"]),
            model=body["model"],
            usage=body["usage"],
            turn_id=body["turn_id"],
            context_window=WINDOW,
        )


def until(page: Any, condition: Callable[[], bool], seconds: float = 30) -> None:
    """Let the page's events run until ``condition`` holds (Playwright calls back between)."""
    for _ in range(int(seconds * 10)):
        if condition():
            return
        page.wait_for_timeout(100)
    raise AssertionError("the condition never held")


def test_an_operator_replays_three_presets_and_makes_one_the_project_default(
    live_server: Any, page: Any, project: Project, threaded: None
) -> None:
    ingest(project)
    log_in(page, live_server.url)
    page.goto(f"{live_server.url}/sessions/{SESSION}/")
    page.click("text=Replay policies")
    page.wait_for_url(f"**/sessions/{SESSION}/replays/")
    for label in PICKED:
        page.get_by_label(label, exact=False).first.check()
    shot(page, "replays-form")
    page.click("#replay-submit")
    page.wait_for_url(re.compile(rf"/sessions/{SESSION}/replays/\d+/$"))

    # progress runs to the end (the page polls it), then the page shows the results
    page.wait_for_selector("table.comparison", timeout=60_000)
    replay = Replay.objects.get()
    assert replay.status == "succeeded", replay.error
    assert page.locator("#replay-state [data-replay-status]").inner_text() == "succeeded"
    assert [p["label"] for p in replay.policies] == [
        "as recorded",
        *[p for p in _preset_labels() if p in PICKED],
    ]
    figures = page.locator("figure.replay-chart")
    assert figures.count() == 4
    charts = page.evaluate("window.ctxwebReplay.charts()")
    assert [c["position"] for c in charts] == [0, 1, 2, 3]
    assert all(c["drawn"] and c["turns"] == len(BODIES) for c in charts)
    for canvas in page.locator("figure.replay-chart canvas:not(.overlay)").all():
        assert canvas.evaluate(PAINTED) > 1000
    heads = page.locator("table.comparison thead th.policy-head").all_inner_texts()
    assert [h.splitlines()[0] for h in heads] == [p["label"] for p in replay.policies]
    inputs = page.locator('table.comparison tr[data-row="input_tokens"] td').all_inner_texts()
    assert [int(re.sub(r"\D", "", text)) for text in inputs] == [
        r["totals"]["input_tokens"] for r in replay.results
    ]
    # the same turn on every chart, from the keyboard
    page.focus("figure.replay-chart[data-column='2'] .replay-canvas")
    page.keyboard.press("Home")
    tips = page.locator(".replay-tip .tip-title").all_inner_texts()
    assert tips == ["Turn 0"] * 4
    page.keyboard.press("ArrowRight")
    first = [r["turns"][1]["total"] for r in replay.results]
    said = page.locator("#replay-chart-live").inner_text()
    assert said.startswith("Turn 1: as recorded ")
    assert [int(n.replace(",", "")) for n in re.findall(r" ([\d,]+) tokens", said)] == first
    shot(page, "replay-results")

    column = page.locator("table.comparison tr.apply-row td[data-column='3']")
    column.locator("button[data-apply=project]").click()
    # back at the top of the replay's page, where the confirmation shows
    message = page.locator("ul.messages li.success")
    message.wait_for()
    assert message.is_visible()
    chosen = replay.policies[3]
    assert message.inner_text() == (
        f"The project's default policy for new sessions is now {chosen['label']}."
    )
    project.refresh_from_db()
    assert project.default_policy["auto"]["strategy"] == chosen["strategy"]
    assert project.default_policy["trigger"] == chosen["trigger"]
    shot(page, "replay-project-default")


def _preset_labels() -> list[str]:
    session = Session.objects.get(external_id=SESSION)
    return [p["label"] for p in replays.replay_presets(session=session)]


def _finished_replay(project: Project) -> Replay:
    """A replay run to the end (inline), then put back to running half way: the test moves it."""
    off_loop(_run_replay)
    replay = Replay.objects.get()
    assert replay.status == "succeeded", replay.error
    Replay.objects.filter(pk=replay.pk).update(
        status="running", done=replay.total // 2, finished_at=None
    )
    return replay


def _run_replay() -> None:
    from django.db import transaction

    session = Session.objects.get(external_id=SESSION)
    policies = [p for p in replays.replay_presets(session=session) if p["label"] in PICKED[:2]]
    with transaction.atomic():
        replay = replays.replay_create(session=session, policies=policies)
    replays.replay_run(replay_id=replay.pk)


def _finish(replay: Replay) -> None:
    Replay.objects.filter(pk=replay.pk).update(status="succeeded", done=replay.total)


def test_the_progress_bar_follows_the_sockets_events_to_the_results(
    live_server: Any, page: Any, project: Project, settings: Any
) -> None:
    settings.CTXWEB_TASKS_INLINE = True  # the replay below runs where it is created
    ingest(project)
    replay = _finished_replay(project)
    sockets: list[Any] = []
    page.route_web_socket(re.compile(r"/ws/sessions/"), lambda ws: sockets.append(ws))
    log_in(page, live_server.url)
    page.goto(f"{live_server.url}/sessions/{SESSION}/replays/{replay.pk}/")
    bar = page.locator("#replay-state progress[data-replay-progress]")
    assert bar.get_attribute("value") == str(replay.total // 2)
    assert bar.get_attribute("max") == str(replay.total)
    until(page, lambda: len(sockets) == 1)
    socket = sockets[0]
    assert f"/ws/sessions/{SESSION}/?project={project.pk}" in socket.url
    event = {"type": "replay.progress", "replay": replay.pk, "total": replay.total}
    socket.send(json.dumps({**event, "done": replay.total - 1, "status": "running"}))
    page.wait_for_function(
        "(n) => document.querySelector('#replay-state progress').value === n", arg=replay.total - 1
    )
    assert (
        f"{replay.total - 1} of {replay.total}" in page.locator("[data-replay-count]").inner_text()
    )
    # another replay's events move nothing
    socket.send(json.dumps({**event, "replay": replay.pk + 1, "done": 1, "status": "running"}))
    shot(page, "replay-progress")
    _finish(replay)
    socket.send(json.dumps({**event, "done": replay.total, "status": "succeeded"}))
    page.wait_for_function(
        "(n) => document.querySelector('#replay-state progress').value === n", arg=replay.total
    )
    page.wait_for_selector("table.comparison")
    assert page.locator("figure.replay-chart").count() == 3


def test_without_a_socket_the_page_polls_its_progress_to_the_results(
    live_server: Any, page: Any, project: Project, settings: Any
) -> None:
    settings.CTXWEB_TASKS_INLINE = True
    ingest(project)
    replay = _finished_replay(project)
    log_in(page, live_server.url)
    page.goto(f"{live_server.url}/sessions/{SESSION}/replays/")
    row = page.locator(f"#replay-{replay.pk}")
    assert row.locator("progress").get_attribute("value") == str(replay.total // 2)
    shot(page, "replays-list-running")
    page.goto(f"{live_server.url}/sessions/{SESSION}/replays/{replay.pk}/")
    assert page.locator("table.comparison").count() == 0
    _finish(replay)
    # the live server speaks no WebSocket: the page asks ?format=json until it has finished
    page.wait_for_selector("table.comparison", timeout=30_000)
    assert page.locator("figure.replay-chart").count() == 3


# --- end to end: the embedded server, its real socket ----------------------------------------


@pytest.fixture(scope="module")
def embedded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """``python -m ctxweb.server`` in the embedded shape (SQLite, in-memory channel layer, the
    replay in a thread of its process): its URL and an operator key of project ``alpha``."""
    require_chromium()  # checked first: no server is started for a skipped test
    env = embedded_env(tmp_path_factory.mktemp("ctxweb-replays"))
    key = create_key(env, project="alpha", role="operator", owner=USERNAME, password=PASSWORD)
    port = free_port()
    env["PORT"] = str(port)  # the page's socket opens only from the origins the server serves
    with serving(env, port=port) as running:
        yield running.url, key


def _post_turns(url: str, key: str) -> None:
    for body in BODIES:
        request = urllib.request.Request(
            f"{url}/api/v1/sessions/{SESSION}/turns",
            data=json.dumps({**body, "context_window": WINDOW}).encode(),
            headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            assert response.status == 201


def test_the_embedded_servers_socket_carries_a_replay_to_its_results(
    embedded: tuple[str, str], page: Any
) -> None:
    url, key = embedded
    _post_turns(url, key)
    log_in(page, url)
    # The session page, open before the replay starts, hears every event of it.
    frames: list[dict[str, Any]] = []
    page.on(
        "websocket",
        lambda ws: ws.on("framereceived", lambda data: frames.append(json.loads(data))),
    )
    page.goto(f"{url}/sessions/{SESSION}/")
    page.wait_for_function("() => window.ctxwebLive && window.ctxwebLive.state() === 1")

    replaying = page.context.new_page()
    replaying.goto(f"{url}/sessions/{SESSION}/replays/")
    for label in PICKED:
        replaying.get_by_label(label, exact=False).first.check()
    replaying.click("#replay-submit")
    replaying.wait_for_url(re.compile(rf"/sessions/{SESSION}/replays/\d+/$"))
    replay_id = int(replaying.url.rstrip("/").rsplit("/", 1)[1])
    replaying.wait_for_selector("table.comparison", timeout=60_000)
    assert replaying.locator("figure.replay-chart").count() == 4
    shot(replaying, "replay-embedded-results")

    until(page, lambda: any(f["type"] == "replay.finished" for f in frames))
    ours = [f for f in frames if f.get("replay") == replay_id]
    progress = [f["done"] for f in ours if f["type"] == "replay.progress"]
    assert progress == sorted(progress)
    assert [f["status"] for f in ours if f["type"] == "replay.finished"] == ["succeeded"]
    assert ours[-1]["type"] == "replay.finished"
    assert ours[-1]["done"] == ours[-1]["total"] == 4 * len(BODIES)
