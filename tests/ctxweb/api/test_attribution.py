"""A turn's attribution through the REST API: regions with their items, largest first, what
changed since the previous turn, the provider's unattributed tokens, access and bounds. The
session is posted through the REST ingest, as an agent would."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import TestCase

from ctxweb.contexts.models import Turn
from ctxweb.contexts.selectors import attribution as attribution_selector
from tests.support.world import World

pytestmark = pytest.mark.django_db

CLAUDE_MD = (
    "Contents of /repo/CLAUDE.md (project instructions, checked into the codebase):\n\n"
    "# Rules\n- Run make check before every commit.\n- Keep functions small."
)
REMINDER = (
    "<system-reminder>\nAs you answer the user's questions, you can use the following context:\n"
    f"# claudeMd\n{CLAUDE_MD}\n</system-reminder>"
)
SOURCE = "def main() -> None:\n    print('hello')\n" * 30
TOOLS = [
    {"name": "Read", "description": "Read a file.", "input_schema": {"type": "object"}},
    {
        "name": "mcp__github__get_issue",
        "description": "Get an issue from GitHub.",
        "input_schema": {"type": "object", "properties": {"number": {"type": "integer"}}},
    },
    {
        "name": "mcp__github__create_issue",
        "description": "Create an issue on GitHub.",
        "input_schema": {"type": "object"},
    },
]


def user(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": list(blocks)}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def read(call_id: str, path: str) -> list[dict[str, Any]]:
    call = {"type": "tool_use", "id": call_id, "name": "Read", "input": {"file_path": path}}
    result = {"type": "tool_result", "tool_use_id": call_id, "content": SOURCE}
    return [{"role": "assistant", "content": [call]}, user(result)]


def request(*messages: dict[str, Any]) -> dict[str, Any]:
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 4096,
        "system": [{"type": "text", "text": "You are a coding agent."}],
        "tools": TOOLS,
        "messages": list(messages),
    }


ASK = user(text("Fix the bug in app.py." + REMINDER))
FIRST = [ASK, *read("r1", "/repo/app.py")]
SECOND = [*FIRST, *read("r2", "/repo/lib.py")]


def post(client: Any, external_id: str, body: dict[str, Any], **extra: Any) -> Any:
    response = client.post(
        f"/api/v1/sessions/{external_id}/turns",
        data=json.dumps({"format": "anthropic-messages", "request": body, **extra}),
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    return response


def attribution(client: Any, external_id: str, index: int) -> dict[str, Any]:
    response = client.get(f"/api/v1/sessions/{external_id}/turns/{index}/attribution")
    assert response.status_code == 200, response.content
    return response.json()


def items(body: dict[str, Any], region: str) -> list[dict[str, Any]]:
    [found] = [r for r in body["regions"] if r["region"] == region]
    return found["items"]


def test_a_turns_items_add_up_to_its_stored_regions(world: World) -> None:
    client = world.api(world.ingest_key)
    post(client, "s1", request(*FIRST))
    body = attribution(client, "s1", 0)
    turn = Turn.objects.get(session__external_id="s1", index=0)
    assert body["matches_turn"] is True
    assert body["total_tokens"] == turn.total_tokens
    stored = {name: tokens for name, tokens in turn.regions.items() if tokens}
    assert {r["region"]: r["tokens"] for r in body["regions"]} == stored
    for region in body["regions"]:
        assert sum(i["tokens"] for i in region["items"]) == region["tokens"]
        assert region["more"] is None
        listed = [i["tokens"] for i in region["items"]]
        assert listed == sorted(listed, reverse=True)
    assert body["changes"] is None  # the first turn
    assert all(i["change"] is None for r in body["regions"] for i in r["items"])


def test_mcp_tools_files_and_claude_md_are_named(world: World) -> None:
    client = world.api(world.ingest_key)
    post(client, "s1", request(*FIRST))
    body = attribution(client, "s1", 0)
    tools = {
        (i["name"], i["group"]) for i in items(body, "tools") if i["kind"] == "tool_definition"
    }
    assert tools == {
        ("Read", "Read"),
        ("mcp__github__get_issue", "github"),
        ("mcp__github__create_issue", "github"),
    }
    [file] = [i for i in items(body, "tool_results") if i["kind"] == "file"]
    assert (file["name"], file["group"], file["where"]) == ("/repo/app.py", "Read", [2])
    instructions = [i for i in items(body, "user") if i["kind"] == "instruction"]
    assert {(i["name"], i["detail"]) for i in instructions} == {
        ("CLAUDE.md", "/repo/CLAUDE.md"),
        (
            "<system-reminder>",
            "As you answer the user's questions, you can use the following context:",
        ),
    }


def test_changes_since_the_previous_turn_are_new_grown_shrunk_and_gone(world: World) -> None:
    client = world.api(world.ingest_key)
    post(client, "s1", request(*FIRST))
    post(client, "s1", request(*SECOND))
    body = attribution(client, "s1", 1)
    assert body["previous"] == 0
    files = {i["name"]: i for i in items(body, "tool_results") if i["kind"] == "file"}
    assert files["/repo/app.py"]["change"]["status"] == "same"
    assert files["/repo/lib.py"]["change"] == {
        "status": "new",
        "previous": 0,
        "delta": files["/repo/lib.py"]["tokens"],
    }
    new = {(c["region"], c["name"]) for c in body["changes"]["new"]}
    assert ("tool_results", "/repo/lib.py") in new
    assert ("tool_calls", "/repo/lib.py") in new
    assert body["changes"]["gone"] == []
    # a third turn that dropped the first read: app.py is gone, by all its tokens
    post(client, "s1", request(ASK, *read("r2", "/repo/lib.py")))
    third = attribution(client, "s1", 2)
    gone = {(c["region"], c["name"]): c for c in third["changes"]["gone"]}
    dropped = gone[("tool_results", "/repo/app.py")]
    assert dropped["previous"] == files["/repo/app.py"]["tokens"]
    assert dropped["delta"] == -dropped["previous"]
    counts = {c["status"]: c["count"] for c in third["changes"]["counts"]}
    assert counts["gone"] == len(third["changes"]["gone"])


def test_reported_usage_beyond_the_count_is_the_providers_unattributed(world: World) -> None:
    client = world.api(world.ingest_key)
    response = post(
        client, "s1", request(*FIRST), usage={"input_tokens": 90_000, "output_tokens": 10}
    )
    counted = Turn.objects.get(session__external_id="s1").counted_tokens
    body = attribution(client, "s1", 0)
    assert body["reported_input_tokens"] == 90_000
    [provider] = items(body, "unattributed")
    assert (provider["name"], provider["tokens"]) == ("unattributed (provider)", 90_000 - counted)
    assert body["total_tokens"] == response.json()["total_tokens"] == 90_000


def test_a_region_past_the_bound_folds_the_rest(world: World, monkeypatch: Any) -> None:
    monkeypatch.setattr(attribution_selector, "ITEMS_PER_REGION", 2)
    client = world.api(world.ingest_key)
    post(client, "s1", request(*FIRST))
    body = attribution(client, "s1", 0)
    [tools] = [r for r in body["regions"] if r["region"] == "tools"]
    assert len(tools["items"]) == 2
    # three definitions and the tools' wrapper: two listed, two folded
    assert tools["more"]["count"] == 2
    assert sum(i["tokens"] for i in tools["items"]) + tools["more"]["tokens"] == tools["tokens"]


def test_session_ids_with_slashes_reach_their_turn(world: World) -> None:
    client = world.api(world.ingest_key)
    post(client, "tau/task-0", request(*FIRST))
    assert attribution(client, "tau/task-0", 0)["session"] == "tau/task-0"


def test_it_answers_as_the_turn_detail_does_for_each_persona(world: World) -> None:
    post(world.api(world.ingest_key), "s1", request(*FIRST))
    url = "/api/v1/sessions/s1/turns/0/attribution"
    assert world.api(world.outsider_key).get(url).status_code == 404
    assert world.login(world.outsider).get(url).status_code == 404
    assert world.login(world.teammate).get(url).status_code == 200
    assert world.api().get(url).status_code in (401, 403)
    missing = world.api(world.ingest_key).get("/api/v1/sessions/s1/turns/7/attribution")
    assert missing.status_code == 404
    assert "error" in missing.json()


@pytest.mark.parametrize(
    "relative",
    [
        "claude-code/viewer-sample-1af7fc5e.jsonl",
        "codex/agentcmd-rollout-0924-2012.jsonl",
        "swe-agent/marshmallow-1867-function-calling.traj",
    ],
)
def test_imported_transcripts_attribute_every_turn_to_its_stored_regions(
    world: World, transcripts: Path, relative: str, settings: Any
) -> None:
    settings.CTXWEB_TASKS_INLINE = True
    path = transcripts / relative
    client = world.api(world.ingest_key)
    with TestCase.captureOnCommitCallbacks(execute=True):
        response = client.post(
            "/api/v1/import",
            {"file": SimpleUploadedFile(path.name, path.read_bytes())},
            format="multipart",
        )
    assert response.status_code in (201, 202), response.content
    [session] = client.get(response.json()["url"]).json()["sessions"][:1]
    turns = Turn.objects.filter(session__external_id=session["external_id"]).order_by("index")
    assert turns.count() == session["turns"] > 0
    kinds: set[str] = set()
    for turn in turns:
        body = attribution(client, session["external_id"], turn.index)
        assert body["matches_turn"] is True, turn.index
        stored = {name: tokens for name, tokens in turn.regions.items() if tokens}
        assert {r["region"]: r["tokens"] for r in body["regions"]} == stored
        kinds |= {i["kind"] for r in body["regions"] for i in r["items"]}
    assert "file" in kinds  # each of these sessions reads or writes files
