"""The dashboard in a real browser: headless Chromium driven by Playwright against a live server.

Debian's Chromium at /usr/bin/chromium is used as is (no browser is ever downloaded). Without it
these tests skip with the reason, except under ``CI=true`` where they fail. Each test saves a
screenshot under ``test-output/screenshots/``.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

import pytest

from compaction.messages import parse
from compaction.regions import REGIONS
from compaction.transcripts import parse_transcript
from ctxweb.accounts.models import Project
from ctxweb.contexts.models import Artifact, Turn
from ctxweb.contexts.services import turn_ingest
from tests.support.browser import log_in, off_loop, shot

TRAJECTORY = "swe-agent/pydicom-1458.traj"

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def import_trajectory(project: Project, transcripts: Path) -> tuple[str, int]:
    return off_loop(_import_trajectory, project, transcripts)


def _import_trajectory(project: Project, transcripts: Path) -> tuple[str, int]:
    path = transcripts / TRAJECTORY
    [session] = parse_transcript(path.read_bytes(), name=path.name)
    for n, turn in enumerate(session.turns):
        turn_ingest(
            project=project,
            external_id=session.external_id,
            context=turn.context,
            model=session.model or "gpt-4o",
            usage=turn.usage,
            turn_id=f"import:{n}",
            unknown=sorted(turn.unknown),
            events=turn.events,
        )
    return session.external_id, len(session.turns)


def stack_center(page: Any, position: int, count: int) -> tuple[float, float]:
    """Where turn ``position`` (of ``count``) is drawn on the chart, in page coordinates."""
    box = page.locator("#chart canvas.overlay").bounding_box()
    left, right = 52, 88  # the chart's margins (chart.js MARGIN)
    width = box["width"] - left - right
    x = box["x"] + left + (position + 0.5) * width / count
    return x, box["y"] + box["height"] / 2


def test_an_operator_logs_in_and_sees_the_sessions(
    live_server: Any, page: Any, project: Project, transcripts: Path
) -> None:
    log_in(page, live_server.url)
    assert page.locator("text=No sessions yet").count() == 1
    assert "/api/v1/sessions/my-first-session/turns" in page.locator("#curl-cmd").inner_text()
    shot(page, "sessions-empty")
    external_id, turns = import_trajectory(project, transcripts)
    page.reload()
    row = page.locator("table.sessions tbody tr", has_text=external_id)
    assert row.count() == 1
    assert row.locator("svg.spark polyline").count() == 1
    assert row.locator("td.num").first.inner_text() == str(turns)
    shot(page, "sessions-list")


def test_the_chart_has_a_stack_per_turn_a_tooltip_and_opens_the_inspector(
    live_server: Any, page: Any, project: Project, transcripts: Path
) -> None:
    external_id, turns = import_trajectory(project, transcripts)
    log_in(page, live_server.url)
    page.click(f"text={external_id}")
    page.wait_for_function("() => window.ctxwebChart !== undefined")
    stacks = page.evaluate("window.ctxwebChart.stacks()")
    assert stacks["count"] == turns
    stored = {name for t in Turn.objects.all() for name, n in t.regions.items() if n}
    assert stacks["regions"] == [name for name in REGIONS if name in stored]
    assert {"system", "user", "assistant"} <= stored

    x, y = stack_center(page, 5, turns)
    page.mouse.move(x, y)
    tooltip = page.locator("#chart .tooltip")
    tooltip.wait_for(state="visible")
    text = tooltip.inner_text()
    assert "Turn 5" in text
    assert "assistant" in text
    assert "Counted" in text
    shot(page, "session-chart-tooltip")

    page.mouse.click(x, y)
    page.wait_for_url(f"**/sessions/{external_id}/turns/5/")
    assert page.locator("h1").inner_text().startswith("Turn 5")
    assert page.locator("li.message").count() > 1
    shot(page, "turn-inspector")


def test_the_keyboard_moves_between_turns(
    live_server: Any, page: Any, project: Project, transcripts: Path
) -> None:
    external_id, turns = import_trajectory(project, transcripts)
    log_in(page, live_server.url)
    page.goto(f"{live_server.url}/sessions/{external_id}/")
    page.focus("#chart")
    page.keyboard.press("End")
    page.keyboard.press("ArrowLeft")
    assert f"Turn {turns - 2}" in page.locator("#chart .tooltip").inner_text()
    assert f"Turn {turns - 2}:" in page.locator("#chart-live").inner_text()
    shot(page, "session-chart-keyboard")
    page.keyboard.press("Enter")
    page.wait_for_url(f"**/turns/{turns - 2}/")
    page.keyboard.press("k")
    page.wait_for_url(f"**/turns/{turns - 3}/")
    page.keyboard.press("ArrowRight")
    page.wait_for_url(f"**/turns/{turns - 2}/")
    page.keyboard.press("s")
    page.wait_for_url(re.compile(r"/turns/\d+/\?order=size$"))
    sizes = page.locator("li.message .tokens strong").all_inner_texts()
    numbers = [int(s.replace(",", "")) for s in sizes]
    assert numbers == sorted(numbers, reverse=True)
    shot(page, "turn-inspector-largest-first")


def test_the_legend_toggles_regions_and_live_turns_append(
    live_server: Any, page: Any, project: Project, transcripts: Path
) -> None:
    external_id, turns = import_trajectory(project, transcripts)
    log_in(page, live_server.url)
    page.goto(f"{live_server.url}/sessions/{external_id}/")
    page.click("#chart-legend button[data-region=tool_results]")
    assert page.get_attribute("#chart-legend button[data-region=tool_results]", "aria-pressed")
    assert page.evaluate("window.ctxwebChart.stacks().hidden") == ["tool_results"]
    live_turn = {
        "index": turns,
        "total_tokens": 9000,
        "regions": {"system": 1000, "user": 8000},
        "reported_input_tokens": 9100,
        "events": [
            {"type": "operation", "strategy": "baseagent-prune"},
            {"type": "interrupted", "source": "proxy", "warning": True, "message": "Cut."},
        ],
    }
    page.evaluate("(turn) => window.ctxwebChart.appendTurn(turn)", live_turn)
    assert page.evaluate("window.ctxwebChart.stacks().count") == turns + 1
    x, y = stack_center(page, turns, turns + 1)
    page.mouse.move(x, y)
    text = page.locator("#chart .tooltip").inner_text()
    assert "reported 9,100" in text
    assert "Operation: baseagent-prune" in text
    assert "Interrupted: the answer was cut" in text
    shot(page, "session-chart-live-turn")


def test_the_chart_draws_two_thousand_turns(live_server: Any, page: Any, project: Project) -> None:
    ingest_chat(project, "long", "hello")
    log_in(page, live_server.url)
    page.goto(f"{live_server.url}/sessions/long/")
    page.evaluate(
        """window.ctxwebChart.setTurns(Array.from({length: 2000}, (_, i) => ({
        index: i, total_tokens: 2000 + (i % 400) * 200,
        regions: {system: 1000, tools: 1000, user: 100 * (i % 400), tool_results: 100 * (i % 400)},
        events: i % 400 === 0 && i ? [{type: "compaction", tokens_before: 81800,
        tokens_after: 2000}] : []})))"""
    )
    assert page.evaluate("window.ctxwebChart.stacks().count") == 2000
    x, y = stack_center(page, 1200, 2000)
    page.mouse.move(x, y)
    # 2,000 stacks on ~1,270 pixels: the pointer lands on turn 1200 or a neighbour
    title = page.locator("#chart .tooltip .tip-title").inner_text()
    assert abs(int(title.removeprefix("Turn ")) - 1200) <= 1
    shot(page, "session-chart-2000-turns")


def ingest_chat(project: Project, external_id: str, *texts: str) -> None:
    off_loop(_ingest_chat, project, external_id, *texts)


def _ingest_chat(project: Project, external_id: str, *texts: str) -> None:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are an agent."}]
    messages += [{"role": "user", "content": text} for text in texts]
    turn_ingest(
        project=project,
        external_id=external_id,
        context=parse("openai-chat", {"model": "gpt-4o", "messages": messages}),
        model="gpt-4o",
    )


def test_an_artifact_link_opens_the_artifact(live_server: Any, page: Any, project: Project) -> None:
    content = "full output line\n" * 200
    key = hashlib.sha256(content.encode()).hexdigest()
    Artifact.objects.create(
        project=project, key=key, kind="tool_result", content=content, size=len(content)
    )
    ingest_chat(
        project,
        "with-artifact",
        "<script>alert(1)</script> the output went to "
        f"[EXTERNALIZED:{key}] <img src=x onerror=alert(1)>",
    )
    log_in(page, live_server.url)
    page.goto(f"{live_server.url}/sessions/with-artifact/turns/0/")
    assert "<script>alert(1)</script>" in page.locator("li.message").last.inner_text()
    assert page.locator("li.message img").count() == 0
    shot(page, "turn-inspector-artifact")
    page.click(f"a.artifact-link[href='/artifacts/{key}/']")
    page.wait_for_url(f"**/artifacts/{key}/")
    assert "full output line" in page.content()
    shot(page, "artifact-page")


def test_a_preview_runs_on_the_chosen_strategy(
    live_server: Any, page: Any, project: Project, transcripts: Path
) -> None:
    external_id, _ = import_trajectory(project, transcripts)
    log_in(page, live_server.url)
    page.goto(f"{live_server.url}/sessions/{external_id}/")
    preview = page.locator("a", has_text="Preview strategies")
    if preview.count() == 0:
        pytest.skip("the preview page is not there yet")
    preview.click()
    page.wait_for_url(f"**/sessions/{external_id}/preview/**")
    page.select_option("#strategy", "baseagent-middle-out")
    page.click("button:has-text('Choose')")
    page.wait_for_url("**strategy=baseagent-middle-out**")
    assert page.locator("#result-heading").count() == 1
    shot(page, "preview")
