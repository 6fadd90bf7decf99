"""A session's attribution page (/sessions/<id>/attribution/): the selector's rows, each turn
linked to that turn's Attribution section, span bars, CSV downloads that match the tables,
escaped hostile names, empty states, and who may see it. Sessions are posted through the REST
ingest, so the rollups are the ones ingest keeps."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User

from ctxweb.accounts.models import Role
from ctxweb.accounts.services import membership_set
from ctxweb.contexts.models import Session
from ctxweb.contexts.selectors import attribution as selector
from ctxweb.contexts.services.imports import transcript_import
from ctxweb.front.attribution import SESSION_TABLES
from tests.support.attribution import (
    ASK,
    HOSTILE,
    as_text,
    body,
    four_turns,
    post,
    rows_of,
)
from tests.support.world import World


def attribution_of(world: World, external_id: str = "s1") -> dict[str, Any]:
    session = Session.objects.get(project=world.project, external_id=external_id)
    return selector.session_attribution(session=session)


@pytest.mark.django_db
def test_the_page_lists_the_selectors_rows_with_links_to_each_turn(world: World) -> None:
    four_turns(world.api(world.ingest_key))
    data = attribution_of(world)
    assert data["turns"] == 4
    page = world.login(world.owner).get("/sessions/s1/attribution/")
    assert page.status_code == 200
    text = page.content.decode()
    assert data["items"]
    assert data["growth"]
    assert data["tools"]
    for row in data["items"] + data["growth"]:
        assert html.escape(row["name"]) in text
        assert f'href="/sessions/s1/turns/{row["first_turn"]}/#attribution"' in text
    assert text.count('class="span-row') == len(data["items"]) + len(data["growth"])
    for row in data["tools"]:
        assert html.escape(row["name"]) in text
    # an MCP tool's server beside it, as on the turn page; no group beside text
    assert 'mcp__github__get_issue <span class="muted">· github</span>' in text
    assert 'user text <span class="muted">·' not in text
    # app.py was read twice, in turns 0 and 3
    reread = {r["name"]: r for r in data["files_reread"]}
    assert reread["/repo/app.py"]["reads"] == 2
    for turn in reread["/repo/app.py"]["turns"]:
        assert f'href="/sessions/s1/turns/{turn}/#attribution">#{turn}</a>' in text
    for row in data["unreferenced_outputs"]:
        assert f'href="/sessions/s1/turns/{row["turn"]}/#attribution">#{row["turn"]}</a>' in text
    # the session page links here
    session_page = world.login(world.owner).get("/sessions/s1/").content.decode()
    assert 'href="/sessions/s1/attribution/"' in session_page


@pytest.mark.django_db
def test_each_csv_parses_and_matches_the_table(world: World) -> None:
    four_turns(world.api(world.ingest_key))
    data = attribution_of(world)
    client = world.login(world.owner)
    for table, (_, columns) in SESSION_TABLES.items():
        response = client.get(f"/sessions/s1/attribution/?format=csv&table={table}")
        assert response.status_code == 200
        assert response["Content-Type"].startswith("text/csv")
        assert "attachment" in response["Content-Disposition"]
        rows = rows_of(response.content)
        assert [list(r) for r in rows[:1]] == ([list(columns)] if data[table] else [])
        assert rows == [{c: as_text(r[c]) for c in columns} for r in data[table]], table
    unknown = client.get("/sessions/s1/attribution/?format=csv&table=secrets")
    assert unknown.status_code == 400
    assert b"one of items, growth" in unknown.content


@pytest.mark.django_db
def test_a_hostile_tool_name_is_escaped(world: World) -> None:
    four_turns(world.api(world.ingest_key))
    data = attribution_of(world)
    assert HOSTILE in {r["name"] for r in data["tools"]}
    text = world.login(world.owner).get("/sessions/s1/attribution/").content.decode()
    assert HOSTILE not in text
    assert html.escape(HOSTILE) in text


@pytest.mark.django_db
def test_a_session_without_tools_shows_the_empty_states(world: World) -> None:
    post(world.api(world.ingest_key), "plain", body(ASK))
    data = attribution_of(world, "plain")
    assert data["tools"] == []
    assert data["files_reread"] == []
    text = world.login(world.owner).get("/sessions/plain/attribution/").content.decode()
    assert "No tool was called." in text
    assert "No file was read twice." in text
    assert "Every tool output was referred to later" in text


@pytest.mark.django_db
def test_members_see_it_and_an_outsider_does_not(world: World) -> None:
    four_turns(world.api(world.ingest_key))
    operator = User.objects.create_user("op", password="pw-op-12345")
    membership_set(project=world.project, user=operator, role=Role.OPERATOR)
    for user in (world.owner, operator, world.teammate):
        assert world.login(user).get("/sessions/s1/attribution/").status_code == 200
    outsider = world.login(world.outsider)
    assert outsider.get("/sessions/s1/attribution/").status_code == 404
    assert outsider.get("/sessions/s1/attribution/?format=csv&table=tools").status_code == 404


@pytest.mark.parametrize(
    "relative",
    ["claude-code/viewer-sample-1af7fc5e.jsonl", "codex/agentcmd-rollout-0924-2012.jsonl"],
)
@pytest.mark.django_db
def test_a_real_imported_transcripts_pages(world: World, transcripts: Path, relative: str) -> None:
    path = transcripts / relative
    result = transcript_import(project=world.project, data=path.read_bytes(), name=path.name)
    external_id = result.sessions[0].external_id
    data = attribution_of(world, external_id)
    assert data["items"]
    client = world.login(world.owner)
    text = client.get(f"/sessions/{external_id}/attribution/").content.decode()
    assert text.count('class="span-row') == len(data["items"]) + len(data["growth"])
    for row in data["tools"]:
        assert html.escape(row["name"]) in text
    for table, (_, columns) in SESSION_TABLES.items():
        response = client.get(f"/sessions/{external_id}/attribution/?format=csv&table={table}")
        assert rows_of(response.content) == [
            {c: as_text(r[c]) for c in columns} for r in data[table]
        ], table
    assert client.get("/overview/").status_code == 200


@pytest.mark.django_db
def test_a_slashed_session_id_has_its_page(world: World) -> None:
    post(world.api(world.ingest_key), "team/fix-1", body(ASK))
    client = world.login(world.owner)
    page = client.get("/sessions/team/fix-1/attribution/")
    assert page.status_code == 200
    assert 'Attribution <span class="muted sid">of team/fix-1</span>' in page.content.decode()
    response = client.get("/sessions/team/fix-1/attribution/?format=csv&table=items")
    assert 'filename="team_fix-1-attribution-items.csv"' in response["Content-Disposition"]
