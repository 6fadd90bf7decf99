"""The turn page's Attribution section: each region a <details> listing its items (name, kind,
tokens, share, change since the previous turn), escaped, the same numbers as the API, and opened
from the keyboard in Chromium. Sessions are posted through the REST ingest."""

from __future__ import annotations

import html
import json
import re
from typing import Any

import pytest
from rest_framework.test import APIClient

from ctxweb.accounts.models import Project
from ctxweb.accounts.services import api_key_create
from ctxweb.contexts.selectors import attribution as selector
from tests.support.browser import log_in, off_loop, shot
from tests.support.world import World

TOOLS = [
    {"name": "Read", "description": "Read a file.", "input_schema": {"type": "object"}},
    {
        "name": "mcp__github__get_issue",
        "description": "Get an issue from GitHub.",
        "input_schema": {"type": "object", "properties": {"number": {"type": "integer"}}},
    },
]
REMINDER = (
    "<system-reminder>\nAs you answer the user's questions, you can use the following context:\n"
    "# claudeMd\nContents of /repo/CLAUDE.md (project instructions, checked into the codebase):"
    "\n\n- Run make check.\n</system-reminder>"
)
SOURCE = "def main() -> None:\n    print('hello')\n" * 20
ASK = {"role": "user", "content": [{"type": "text", "text": "Fix app.py." + REMINDER}]}


def read(call_id: str, path: str) -> list[dict[str, Any]]:
    call = {"type": "tool_use", "id": call_id, "name": "Read", "input": {"file_path": path}}
    result = {"type": "tool_result", "tool_use_id": call_id, "content": SOURCE}
    return [
        {"role": "assistant", "content": [call]},
        {"role": "user", "content": [result]},
    ]


def body(*messages: dict[str, Any]) -> dict[str, Any]:
    request = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "system": "You are a coding agent.",
        "tools": TOOLS,
        "messages": list(messages),
    }
    return {"format": "anthropic-messages", "request": request}


def post(client: APIClient, external_id: str, data: dict[str, Any]) -> None:
    response = client.post(
        f"/api/v1/sessions/{external_id}/turns",
        data=json.dumps(data),
        content_type="application/json",
    )
    assert response.status_code == 201, response.content


def two_turns(client: APIClient, external_id: str = "s1", second: str = "/repo/lib.py") -> None:
    post(client, external_id, body(ASK, *read("r1", "/repo/app.py")))
    post(client, external_id, body(ASK, *read("r1", "/repo/app.py"), *read("r2", second)))


def section(page: str) -> str:
    start = page.index('<section class="card attribution"')
    return page[start : page.index("</section>", start)]


@pytest.mark.django_db
def test_each_region_lists_its_items_as_the_api_does(world: World) -> None:
    two_turns(world.api(world.ingest_key))
    client = world.login(world.owner)
    page = client.get("/sessions/s1/turns/1/")
    assert page.status_code == 200
    attribution = section(page.content.decode())
    api = client.get("/api/v1/sessions/s1/turns/1/attribution").json()
    details = re.findall(r'<details class="attribution-region region-([a-z_]+)"', attribution)
    assert details == [r["region"] for r in api["regions"]]
    rows = re.findall(r'<tr class="attribution-item kind-([a-z_]+)', attribution)
    assert len(rows) == sum(len(r["items"]) for r in api["regions"])
    for region in api["regions"]:
        assert f"<strong>{region['tokens']:,}</strong> tokens" in attribution
        for item in region["items"]:
            assert html.escape(item["name"]) in attribution
    # MCP server beside its tool, the file with its message's link, the memory file's path
    assert 'mcp__github__get_issue</span> <span class="muted">· github</span>' in attribution
    assert '<a href="#m-4">#4</a>' in attribution  # lib.py's output is message 4
    assert "/repo/CLAUDE.md" in attribution
    assert 'user text</span> <span class="muted">·' not in attribution  # no group for text
    assert attribution.count("change-new") >= 2  # lib.py's call and output
    assert "Changes since turn 0:" in attribution


@pytest.mark.django_db
def test_the_first_turn_shows_no_changes(world: World) -> None:
    two_turns(world.api(world.ingest_key))
    attribution = section(world.login(world.owner).get("/sessions/s1/turns/0/").content.decode())
    assert "Changes since" not in attribution
    assert "change-new" not in attribution
    assert "tool definition" in attribution


@pytest.mark.django_db
def test_hostile_names_are_escaped(world: World) -> None:
    two_turns(world.api(world.ingest_key), second="/repo/<script>alert(1)</script>.py")
    attribution = section(world.login(world.owner).get("/sessions/s1/turns/1/").content.decode())
    assert "<script>alert(1)</script>" not in attribution
    assert "/repo/&lt;script&gt;alert(1)&lt;/script&gt;.py" in attribution


@pytest.mark.django_db
def test_a_viewer_sees_it_and_an_outsider_does_not(world: World) -> None:
    two_turns(world.api(world.ingest_key))
    assert (
        "Attribution" in world.login(world.teammate).get("/sessions/s1/turns/1/").content.decode()
    )
    assert world.login(world.outsider).get("/sessions/s1/turns/1/").status_code == 404


def _ingest(project: Project) -> None:
    _, key = api_key_create(project=project, role="ingest")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    two_turns(client)


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_a_region_opens_from_the_keyboard(live_server: Any, page: Any, project: Project) -> None:
    off_loop(_ingest, project)
    log_in(page, live_server.url)
    page.goto(f"{live_server.url}/sessions/s1/turns/1/")
    region = page.locator("#attribution-tool_results")
    table = region.locator("table.attribution-items")
    assert not table.is_visible()
    region.locator("summary").focus()
    page.keyboard.press("Enter")
    table.wait_for(state="visible")
    names = region.locator(".item-name").all_inner_texts()
    assert names == ["/repo/app.py", "/repo/lib.py"]  # equal tokens: in order of appearance
    assert region.locator("tr.change-new").count() == 1
    shot(page, "turn-attribution")
    page.keyboard.press("Enter")
    assert not table.is_visible()


@pytest.mark.django_db
def test_items_past_the_bound_are_folded_into_one_row(world: World, monkeypatch: Any) -> None:
    monkeypatch.setattr(selector, "ITEMS_PER_REGION", 1)
    two_turns(world.api(world.ingest_key))
    attribution = section(world.login(world.owner).get("/sessions/s1/turns/1/").content.decode())
    # tools: Read, the MCP tool and the wrapper; one listed, two folded
    tools = attribution[attribution.index('id="attribution-tools"') :]
    tools = tools[: tools.index("</details>")]
    assert tools.count('<tr class="attribution-item') == 1
    assert '<tr class="more"><td colspan="5">2 more items:' in tools
