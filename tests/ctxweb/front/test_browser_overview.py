"""The project overview in a real browser: headless Chromium driven by Playwright against
pytest-django's live server, on a project with two sessions posted through the REST ingest (MCP
tools among their calls). The day chart is painted, the keyboard walks its days, a filter narrows
the page, an MCP server's row leads to the sessions that held it and on to a turn whose attribution
lists the server's tools, and Enter on a day opens that day. Saves
screenshots under ``test-output/screenshots/``."""

from __future__ import annotations

import re
from typing import Any

import pytest
from rest_framework.test import APIClient

from ctxweb.accounts.models import Project
from ctxweb.accounts.services import api_key_create
from tests.support.attribution import four_turns
from tests.support.browser import log_in, off_loop, shot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

OTHER_MODEL = "gpt-4o-mini"

#: How many pixels of a canvas are painted (not transparent).
PAINTED = """(canvas) => {
  const data = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
  let painted = 0;
  for (let i = 3; i < data.length; i += 4) if (data[i]) painted++;
  return painted;
}"""


def _ingest(project: Project) -> None:
    _, key = api_key_create(project=project, role="ingest")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    four_turns(client, "fixing-the-build")
    four_turns(client, "cheaper-model", model=OTHER_MODEL)


def turns_shown(page: Any) -> int:
    text = page.locator("p.totals").inner_text()
    found = re.match(r"([\d,]+) turns", text)
    assert found, text
    return int(found[1].replace(",", ""))


def test_the_overview_charts_filters_and_leads_to_the_sessions(
    live_server: Any, page: Any, project: Project
) -> None:
    off_loop(_ingest, project)
    log_in(page, live_server.url)
    page.click("nav[aria-label=Main] >> text=Overview")
    page.wait_for_url(f"{live_server.url}/overview/")
    stacks = page.locator("#overview-chart canvas.stacks")
    assert stacks.evaluate(PAINTED) > 500
    assert page.locator("#overview-chart canvas.activity").evaluate(PAINTED) > 100
    assert page.evaluate("window.ctxwebOverview.days()") == 30
    assert turns_shown(page) == 8
    # the custom dates show only for a custom range
    assert not page.locator("#f-start").is_visible()
    page.select_option("#f-range", "custom")
    assert page.locator("#f-start").is_visible()
    page.select_option("#f-range", "30")

    # the keyboard walks the days: End is today, with its 8 turns
    page.focus("#overview-chart")
    page.keyboard.press("End")
    said = page.locator("#overview-chart-live").inner_text()
    assert re.search(r": [\d,]+ token-turns, 8 turns, 2 sessions, \$", said), said
    assert page.locator("#overview-chart .tooltip").is_visible()
    shot(page, "overview")

    page.select_option("#f-model", OTHER_MODEL)
    page.click("#overview-filters button[type=submit]")
    # no empty filter and no dates for a preset range: a short URL to share
    page.wait_for_url(f"{live_server.url}/overview/?range=30&model={OTHER_MODEL}")
    assert turns_shown(page) == 4
    assert page.locator("#overview-chart canvas.stacks").evaluate(PAINTED) > 500

    row = page.locator("#top-mcp_servers tr.mcp_servers-row").first
    assert row.locator(".item-name").inner_text() == "github"
    row.locator("a").click()
    # the sessions that held the server, in the same range and filters
    page.wait_for_url(
        f"{live_server.url}/overview/items/?range=30&model={OTHER_MODEL}"
        "&category=mcp_servers&label=github"
    )
    assert page.locator("#item-label").inner_text() == "github"
    sessions = page.locator("tr.item-session-row td.sid > a").all_inner_texts()
    assert sessions == ["cheaper-model"]
    shot(page, "overview-to-item-sessions")
    # then to the first turn that held it: its Attribution section lists the server's tools
    page.locator("tr.item-session-row a.first-turn").first.click()
    page.wait_for_url(re.compile(r"/sessions/cheaper-model/turns/\d+/#attribution$"))
    tools = page.locator("#attribution tr.attribution-item.kind-tool_definition")
    assert any("github" in text for text in tools.all_text_contents())
    shot(page, "overview-item-to-turn")

    # Enter on a day opens that day alone, the model filter kept
    page.go_back()
    page.go_back()
    page.wait_for_url(f"{live_server.url}/overview/?range=30&model={OTHER_MODEL}")
    page.focus("#overview-chart")
    page.keyboard.press("End")
    today = page.evaluate(
        "JSON.parse(document.getElementById('overview-data').textContent).days.at(-1).day"
    )
    page.keyboard.press("Enter")
    page.wait_for_url(
        f"{live_server.url}/overview/?range=custom&model={OTHER_MODEL}&start={today}&end={today}"
    )
    assert turns_shown(page) == 4
    assert page.evaluate("window.ctxwebOverview.days()") == 1
