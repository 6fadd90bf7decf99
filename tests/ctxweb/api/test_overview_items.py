"""``GET /api/v1/overview/items``: the sessions holding one MCP server or file, with the numbers
the selector gives, first and last turns whose attribution lists the item, filters that narrow,
bad input refused, and an outsider who sees only their own (empty) project. Sessions are posted
through the REST ingest."""

from __future__ import annotations

from datetime import UTC, date, timedelta
from typing import Any

import pytest
from django.utils import timezone

from ctxweb.contexts.models import Turn
from ctxweb.contexts.selectors import attribution as selector
from tests.support.attribution import four_turns, rows_of
from tests.support.world import World

OTHER_MODEL = "gpt-4o-mini"


def today() -> date:
    return timezone.now().astimezone(UTC).date()


def holds(turn: Turn, category: str, label: str) -> bool:
    """Whether turn ``turn``'s attribution lists an item of ``label``."""
    data = selector.turn_attribution(turn=turn)
    for region in data["regions"]:
        for item in region["items"]:
            if category == "mcp_servers" and item["group"] == label and item["name"] != label:
                return True
            if category == "files" and item["kind"] == "file" and item["name"] == label:
                return True
    return False


def items(world: World, **params: Any) -> Any:
    return world.api(world.ingest_key).get("/api/v1/overview/items", params)


@pytest.mark.django_db
def test_the_sessions_holding_an_mcp_server_and_a_file(world: World) -> None:
    client = world.api(world.ingest_key)
    four_turns(client, "s1")
    four_turns(client, "other-model", model=OTHER_MODEL)
    end = today()
    overview = selector.project_overview(
        project=world.project, start=end - timedelta(days=29), end=end
    )
    file = overview["top"]["files"][0]["name"]
    for category, label in (("mcp_servers", "github"), ("files", file)):
        response = items(world, category=category, label=label)
        assert response.status_code == 200, response.content
        body = response.json()
        want = selector.overview_item_sessions(
            project=world.project,
            category=category,
            label=label,
            start=end - timedelta(days=29),
            end=end,
        )
        assert body["sessions"] == want["sessions"]
        assert body["count"] == 2
        assert {s["session"] for s in body["sessions"]} == {"s1", "other-model"}
        # the overview's row adds up to the sessions' token-turns
        top = next(r for r in overview["top"][category] if r["name"] == label)
        assert sum(s["token_turns"] for s in body["sessions"]) == top["tokens"]
        assert sum(s["turns_present"] for s in body["sessions"]) == top["turns"]
        for row in body["sessions"]:
            assert row["token_turns"] > 0
            turns = Turn.objects.filter(session__external_id=row["session"])
            first, last = row["first_turn"], row["last_turn"]
            assert 0 <= first <= last < row["turns"]
            assert holds(turns.get(index=first), category, label)
            assert holds(turns.get(index=last), category, label)
            if first > 0:
                assert not holds(turns.get(index=first - 1), category, label)
        # CSV: the same rows
        csv = items(world, category=category, label=label, format="csv", table="sessions")
        assert [r["session"] for r in rows_of(csv.content)] == [
            s["session"] for s in body["sessions"]
        ]
    # a filter narrows to one session; a name no session holds lists none
    narrowed = items(world, category="mcp_servers", label="github", model=OTHER_MODEL).json()
    assert [s["session"] for s in narrowed["sessions"]] == ["other-model"]
    assert narrowed["count"] == 1
    none = items(world, category="files", label="/nowhere.py").json()
    assert none["sessions"] == []
    assert none["count"] == 0
    # the outsider's key sees their own project: nothing of alpha's
    other = world.api(world.outsider_key).get(
        "/api/v1/overview/items", {"category": "mcp_servers", "label": "github"}
    )
    assert other.status_code == 200
    assert other.json()["sessions"] == []


@pytest.mark.django_db
def test_bad_input_is_refused(world: World) -> None:
    assert items(world, category="days", label="x").status_code == 400
    assert items(world, label="x").status_code == 400
    assert items(world, category="files").status_code == 400
    assert items(world, category="files", label="x" * 501).status_code == 400
    assert items(world, category="files", label="x", source="fax").status_code == 400
    assert items(world, category="files", label="x", format="csv", table="t").status_code == 400
    assert world.api().get("/api/v1/overview/items").status_code in (401, 403)
