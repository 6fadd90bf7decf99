"""``/overview/items/``: the sessions holding one MCP server or file, as the selector gives them,
linked to their attribution and to first and last turns whose Attribution section lists the
item; filters narrow; CSV; bad list refused with a message; empty state; a hostile name is
escaped; an outsider sees none of alpha's sessions and cannot open its turns. Sessions are
posted through the REST ingest."""

from __future__ import annotations

import html
import re
from datetime import UTC, date, timedelta
from urllib.parse import urlencode

import pytest
from django.utils import timezone

from ctxweb.contexts.selectors import attribution as selector
from tests.support.attribution import HOSTILE, four_turns, rows_of
from tests.support.world import World

OTHER_MODEL = "gpt-4o-mini"


def today() -> date:
    return timezone.now().astimezone(UTC).date()


def two_sessions(world: World) -> None:
    client = world.api(world.ingest_key)
    four_turns(client, "s1")
    four_turns(client, "other-model", model=OTHER_MODEL)


def page_url(**params: str) -> str:
    return "/overview/items/?" + urlencode(params)


def listed(text: str) -> list[str]:
    return re.findall(r'<td class="sid"><a href="[^"]*"[^>]*>(.*?)</a>', text)


@pytest.mark.django_db
def test_the_page_lists_the_sessions_and_their_turns(world: World) -> None:
    two_sessions(world)
    client = world.login(world.owner)
    end = today()
    overview = selector.project_overview(
        project=world.project, start=end - timedelta(days=29), end=end
    )
    file = overview["top"]["files"][0]["name"]
    for category, label in (("mcp_servers", "github"), ("files", file)):
        data = selector.overview_item_sessions(
            project=world.project,
            category=category,
            label=label,
            start=end - timedelta(days=29),
            end=end,
        )
        assert len(data["sessions"]) == 2
        response = client.get(page_url(category=category, label=label))
        assert response.status_code == 200
        text = response.content.decode()
        assert listed(text) == [s["session"] for s in data["sessions"]]
        for row in data["sessions"]:
            sid = row["session"]
            assert f'href="/sessions/{sid}/attribution/#items"' in text
            first = f"/sessions/{sid}/turns/{row['first_turn']}/#attribution"
            last = f"/sessions/{sid}/turns/{row['last_turn']}/#attribution"
            assert f'<a class="first-turn" href="{first}">' in text
            assert f'<a class="last-turn" href="{last}">' in text
            # the turn page's Attribution section names the item
            turn_page = client.get(first).content.decode()
            section = turn_page[turn_page.index('id="attribution"') :]
            assert html.escape(label) in section
            assert f"{row['token_turns']:,}" in text
        csv = client.get(page_url(category=category, label=label, format="csv"))
        assert csv["Content-Type"].startswith("text/csv")
        assert [
            (r["session"], int(r["token_turns"]), int(r["first_turn"]), int(r["last_turn"]))
            for r in rows_of(csv.content)
        ] == [
            (s["session"], s["token_turns"], s["first_turn"], s["last_turn"])
            for s in data["sessions"]
        ]
    # the overview's MCP server row links here, the filters kept; the model filter narrows
    link = page_url(range="30", model=OTHER_MODEL, category="mcp_servers", label="github")
    overview_page = client.get(f"/overview/?model={OTHER_MODEL}").content.decode()
    assert f'href="{html.escape(link)}"' in overview_page
    narrowed = client.get(link).content.decode()
    assert listed(narrowed) == ["other-model"]
    # and leads back to the overview with the same filters
    assert f'href="/overview/?range=30&amp;model={OTHER_MODEL}" id="back-to-overview"' in narrowed


@pytest.mark.django_db
def test_hostile_names_bad_lists_empty_states_and_outsiders(world: World) -> None:
    two_sessions(world)
    client = world.login(world.owner)
    # the hostile tool's row: its name escaped, its sessions listed
    text = client.get(page_url(category="tools", label=HOSTILE)).content.decode()
    assert HOSTILE not in text
    assert html.escape(HOSTILE) in text
    assert set(listed(text)) == {"s1", "other-model"}
    # an unknown list: a message, no table
    bad = client.get(page_url(category="<b>days", label="x"))
    assert bad.status_code == 200
    bad_text = bad.content.decode()
    assert "Unknown list" in bad_text
    assert "&lt;b&gt;days" in bad_text
    assert "<b>days" not in bad_text
    assert 'id="item-sessions"' not in bad_text
    assert client.get(page_url(category="days", label="x", format="csv")).status_code == 400
    assert "Which name?" in client.get(page_url(category="files")).content.decode()
    too_long = client.get(page_url(category="files", label="x" * 501)).content.decode()
    assert "Which name?" in too_long
    # a name no session holds, and a filter that keeps none
    empty = client.get(page_url(category="files", label="/nowhere.py")).content.decode()
    assert 'id="item-sessions-empty"' in empty
    assert listed(empty) == []
    filtered = client.get(page_url(category="mcp_servers", label="github", model="none"))
    assert "with these filters" in filtered.content.decode()
    # the outsider sees their own project, without alpha's sessions, and not its turns
    outsider = world.login(world.outsider)
    theirs = outsider.get(page_url(category="mcp_servers", label="github")).content.decode()
    assert listed(theirs) == []
    assert outsider.get("/sessions/s1/turns/0/").status_code == 404
    assert outsider.get("/sessions/s1/attribution/").status_code == 404
