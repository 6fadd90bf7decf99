"""The project overview and a session's attribution through the REST API (issue 36): the
overview's regions add up to the turns' regions, its filters (days, model, agent, source,
session), CSV tables, bounds, and access for each persona. Sessions are posted through the
REST ingest, as an agent would."""

from __future__ import annotations

import csv
import datetime
import io
import json
from collections import Counter
from typing import Any

import pytest
from django.utils import timezone

from ctxweb.contexts.models import Turn
from tests.support.world import World

pytestmark = pytest.mark.django_db

SOURCE = "def main() -> None:\n    print('hello')\n" * 30
TOOLS = [
    {"name": "Read", "description": "Read a file.", "input_schema": {"type": "object"}},
    {
        "name": "mcp__github__get_issue",
        "description": "Get an issue from GitHub.",
        "input_schema": {"type": "object"},
    },
]
DAY_1 = datetime.datetime(2026, 3, 1, 12, 0, tzinfo=datetime.UTC)
DAY_2 = datetime.datetime(2026, 3, 2, 12, 0, tzinfo=datetime.UTC)


def read(call_id: str, path: str) -> list[dict[str, Any]]:
    call = {"type": "tool_use", "id": call_id, "name": "Read", "input": {"file_path": path}}
    result = {"type": "tool_result", "tool_use_id": call_id, "content": SOURCE}
    return [{"role": "assistant", "content": [call]}, {"role": "user", "content": [result]}]


ASK = {"role": "user", "content": [{"type": "text", "text": "Fix the bug."}]}
TURNS = [
    [ASK, *read("r1", "/repo/app.py")],
    [ASK, *read("r1", "/repo/app.py"), *read("r2", "/repo/lib.py")],
]


def post(
    world: World, external_id: str, messages: list[dict[str, Any]], model: str, **extra: Any
) -> None:
    request = {
        "model": model,
        "max_tokens": 4096,
        "system": [{"type": "text", "text": "You are a coding agent."}],
        "tools": TOOLS,
        "messages": messages,
    }
    response = world.api(world.ingest_key).post(
        f"/api/v1/sessions/{external_id}/turns",
        data=json.dumps({"format": "anthropic-messages", "request": request, **extra}),
        content_type="application/json",
    )
    assert response.status_code == 201, response.content


def on(monkeypatch: Any, moment: datetime.datetime) -> None:
    monkeypatch.setattr(timezone, "now", lambda: moment)


@pytest.fixture
def sessions(world: World, monkeypatch: Any) -> World:
    """Three sessions: a and b (claude-sonnet-4-5) on day 1, c (claude-opus-4-1) on day 2."""
    on(monkeypatch, DAY_1)
    for turn in TURNS:
        post(world, "team/a", turn, "claude-sonnet-4-5", usage={"input_tokens": 20_000})
    post(world, "team/b", TURNS[0], "claude-sonnet-4-5")
    on(monkeypatch, DAY_2)
    for turn in TURNS:
        post(world, "solo/c", turn, "claude-opus-4-1")
    monkeypatch.undo()
    return world


def overview(world: World, key: str | None = None, **params: str) -> dict[str, Any]:
    query = {"start": "2026-03-01", "end": "2026-03-02", **params}
    response = world.api(key or world.ingest_key).get("/api/v1/overview", query)
    assert response.status_code == 200, response.content
    return response.json()


def test_the_overviews_regions_add_up_to_the_turns_regions(sessions: World) -> None:
    data = overview(sessions)
    turns = Turn.objects.filter(session__project=sessions.project)
    by_day: dict[str, Counter[str]] = {}
    for turn in turns:
        by_day.setdefault(turn.created_at.date().isoformat(), Counter()).update(turn.regions)
    assert [d["day"] for d in data["days"]] == ["2026-03-01", "2026-03-02"]
    for day in data["days"]:
        expected = {k: v for k, v in by_day[day["day"]].items() if v}
        assert {k: v for k, v in day["regions"].items() if v} == expected
        assert day["tokens"] == sum(expected.values())
    assert [(d["sessions"], d["turns"]) for d in data["days"]] == [(2, 3), (1, 2)]
    assert sum(d["tokens"] for d in data["days"]) == sum(t.total_tokens for t in turns)
    assert all(d["cost"] > 0 for d in data["days"])
    reported = [t for t in turns if t.reported_input_tokens is not None]
    assert data["usage"] == {
        "reported": sum(t.reported_input_tokens or 0 for t in reported),
        "counted": sum(t.counted_tokens for t in reported),
        "turns_with_usage": 2,
    }
    files = {f["name"]: f for f in data["top"]["files"]}
    # app.py's output and call in every turn of a and c, and b's one turn
    assert files["/repo/app.py"]["sessions"] == 3
    assert files["/repo/lib.py"]["sessions"] == 2
    assert [s["name"] for s in data["top"]["mcp_servers"]] == ["github"]
    assert data["choices"]["models"] == ["claude-opus-4-1", "claude-sonnet-4-5"]
    assert data["choices"]["agents"] == ["anthropic-messages"]
    assert data["choices"]["sources"] == ["api"]


def test_filters_narrow_the_overview(sessions: World) -> None:
    assert [d["day"] for d in overview(sessions, model="claude-opus-4-1")["days"]] == ["2026-03-02"]
    one = overview(sessions, session="team/")
    assert [(d["day"], d["sessions"]) for d in one["days"]] == [("2026-03-01", 2)]
    assert overview(sessions, end="2026-03-01")["days"][0]["turns"] == 3
    assert overview(sessions, source="proxy")["days"] == []
    assert overview(sessions, source="api")["days"] != []
    assert overview(sessions, agent="openai-chat")["top"]["files"] == []
    filtered = overview(sessions, session="solo/c")
    assert {f["name"]: f["sessions"] for f in filtered["top"]["files"]} == {
        "/repo/app.py": 1,
        "/repo/lib.py": 1,
    }
    assert filtered["filters"]["session"] == "solo/c"


def test_csv_tables(sessions: World) -> None:
    client = sessions.api(sessions.ingest_key)
    query = {"start": "2026-03-01", "end": "2026-03-02", "format": "csv"}
    response = client.get("/api/v1/overview", {**query, "table": "days"})
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [r["day"] for r in rows] == ["2026-03-01", "2026-03-02"]
    assert sum(int(r["tokens"]) for r in rows) == sum(
        t.total_tokens for t in Turn.objects.filter(session__project=sessions.project)
    )
    files = client.get("/api/v1/overview", {**query, "table": "files"})
    assert "/repo/app.py" in files.content.decode()
    bad = client.get("/api/v1/overview", {**query, "table": "nope"})
    assert bad.status_code == 400
    assert "table" in bad.json()["error"]["fields"]
    tools = client.get("/api/v1/sessions/team/a/attribution", {"format": "csv", "table": "tools"})
    assert tools.status_code == 200
    [row] = list(csv.DictReader(io.StringIO(tools.content.decode())))
    assert (row["name"], row["calls"]) == ("Read", "2")


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"start": "2026-03-05", "end": "2026-03-01"}, "end"),
        ({"start": "2020-01-01", "end": "2026-03-01"}, "start"),
        ({"start": "March"}, "start"),
        ({"source": "carrier-pigeon"}, "source"),
        ({"model": "m" * 201}, "model"),
        ({"format": "xml"}, "format"),
    ],
)
def test_bad_parameters_are_400_naming_the_field(
    world: World, params: dict[str, str], field: str
) -> None:
    response = world.api(world.ingest_key).get("/api/v1/overview", params)
    assert response.status_code == 400
    assert field in response.json()["error"]["fields"]


def test_a_sessions_attribution(sessions: World) -> None:
    response = sessions.api(sessions.ingest_key).get("/api/v1/sessions/team/a/attribution")
    assert response.status_code == 200, response.content
    data = response.json()
    assert (data["session"], data["turns"]) == ("team/a", 2)
    items = {(i["region"], i["name"]): i for i in data["items"]}
    app = items[("tool_results", "/repo/app.py")]
    lib = items[("tool_results", "/repo/lib.py")]
    assert app["token_turns"] == 2 * app["tokens_now"]
    assert (app["turns_present"], app["first_turn"], app["last_turn"]) == (2, 0, 1)
    assert (lib["token_turns"], lib["first_turn"]) == (lib["tokens_now"], 1)
    assert {t["name"]: t["calls"] for t in data["tools"]} == {"Read": 2}


def test_access_for_each_persona(sessions: World) -> None:
    for url in ("/api/v1/overview", "/api/v1/sessions/team/a/attribution"):
        assert sessions.login(sessions.teammate).get(url).status_code == 200
        assert sessions.api(sessions.operator_key).get(url).status_code == 200
        assert sessions.api().get(url).status_code in (401, 403)
    # another project's key sees its own (empty) overview, never this project's sessions
    other = overview(sessions, key=sessions.outsider_key)
    assert other["days"] == []
    assert other["choices"]["models"] == []
    outsider = sessions.api(sessions.outsider_key).get("/api/v1/sessions/team/a/attribution")
    assert outsider.status_code == 404
    outsider_page = sessions.login(sessions.outsider).get("/api/v1/overview")
    assert outsider_page.status_code == 200  # their own project, empty
    assert outsider_page.json()["top"]["files"] == []
    missing = sessions.api(sessions.ingest_key).get("/api/v1/sessions/nope/attribution")
    assert missing.status_code == 404


def test_a_session_id_ending_like_the_attribution_route_is_refused(world: World) -> None:
    request = {"model": "claude-sonnet-4-5", "max_tokens": 10, "messages": [ASK]}
    response = world.api(world.ingest_key).post(
        "/api/v1/sessions/team/attribution/turns",
        data=json.dumps({"format": "anthropic-messages", "request": request}),
        content_type="application/json",
    )
    assert response.status_code == 400
    assert "external_id" in response.json()["error"]["fields"]
