"""Attribution rollups kept at ingest (issue 36): a hand-made 3-turn session's items exactly
(introduced, token-turns, a dropped message subtracted, a file read twice, an output never
referred to again), the rollups equal to the sum over turns of each turn's attribution, the
rebuild command equal to the live rollups, deletion, and real transcripts imported."""

from __future__ import annotations

from collections import Counter, defaultdict
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from compaction.regions import USED_REGIONS
from ctxweb.contexts.models import (
    AttributionDay,
    AttributionItem,
    AttributionLabel,
    Session,
    ToolUse,
    Turn,
)
from ctxweb.contexts.selectors import attribution as attribution_selectors
from ctxweb.contexts.selectors.attribution import session_attribution, turn_attribution
from ctxweb.contexts.services.attribution import item_labels
from ctxweb.contexts.services.deletion import session_delete
from ctxweb.contexts.services.imports import transcript_import
from tests.support.rollups import (
    APP,
    ASK,
    TURN_0,
    TURN_1,
    TURN_2,
    call,
    ingest,
    snapshot,
)
from tests.support.world import World

pytestmark = pytest.mark.django_db


def expected_items(session: Session, monkeypatch: Any) -> dict[tuple[str, ...], dict[str, int]]:
    """Each item's token-turns, turns present and peak, from every turn's own attribution."""
    monkeypatch.setattr(attribution_selectors, "ITEMS_PER_REGION", 10_000)
    found: dict[tuple[str, ...], dict[str, int]] = defaultdict(
        lambda: {"token_turns": 0, "turns_present": 0, "tokens_peak": 0}
    )
    for turn in Turn.objects.filter(session=session).order_by("index"):
        turn.session = session
        data = turn_attribution(turn=turn)
        assert data["matches_turn"] is True
        for region in data["regions"]:
            for item in region["items"]:
                key = (region["region"], item["kind"], item["name"], item["detail"])
                entry = found[key]
                entry["token_turns"] += item["tokens"]
                entry["turns_present"] += 1
                entry["tokens_peak"] = max(entry["tokens_peak"], item["tokens"])
    return dict(found)


def rolled_up(session: Session) -> dict[tuple[str, ...], dict[str, int]]:
    session.refresh_from_db()
    out = {}
    for row in AttributionItem.objects.filter(session=session):
        token_turns, present, _ = attribution_selectors._held(row, session.turn_count)
        if token_turns:
            key = (row.region, row.kind, row.name, row.detail)
            out[key] = {
                "token_turns": token_turns,
                "turns_present": present,
                "tokens_peak": row.tokens_peak,
            }
    return out


@pytest.fixture
def three(world: World) -> Session:
    ingest(world, "s1", TURN_0)
    ingest(world, "s1", TURN_1)
    ingest(world, "s1", TURN_2, usage={"input_tokens": 50_000, "output_tokens": 10})
    return Session.objects.get(project=world.project, external_id="s1")


def test_a_three_turn_sessions_items_exactly(three: Session, monkeypatch: Any) -> None:
    turns = list(Turn.objects.filter(session=three).order_by("index"))
    expected = expected_items(three, monkeypatch)
    assert rolled_up(three) == expected
    rows = {(r.region, r.kind, r.name): r for r in AttributionItem.objects.filter(session=three)}
    app = rows[("tool_results", "file", "/repo/app.py")]
    first = expected[("tool_results", "file", "/repo/app.py", "")]
    # read on turn 0, held on turn 1, dropped and read again on turn 2: brought in twice
    assert app.count == 2
    assert first["turns_present"] == 3
    assert app.introduced == 2 * app.tokens_now
    lib = rows[("tool_results", "file", "/repo/lib.py")]
    assert (lib.first_turn, lib.count, lib.introduced, lib.tokens_now) == (
        1,
        1,
        lib.tokens_now,
        lib.tokens_now,
    )
    held = expected[("tool_results", "file", "/repo/lib.py", "")]
    assert held["token_turns"] == 2 * lib.tokens_now
    # the provider's remainder on the last turn only
    provider = rows[("unattributed", "unattributed", "unattributed (provider)")]
    assert provider.tokens_now == 50_000 - turns[2].counted_tokens
    data = session_attribution(session=three)
    assert data["turns"] == 3
    assert [f["name"] for f in data["files_reread"]] == ["/repo/app.py"]
    assert data["files_reread"][0]["reads"] == 2
    assert data["files_reread"][0]["turns"] == [0, 2]
    # the log (named by the file the command reads) was never referred to again; lib.py was
    # (the answer names it), app.py's first read too (a later call names the file); the last
    # read of app.py has nothing after it
    unreferenced = {(u["tool"], u["name"], u["turn"]) for u in data["unreferenced_outputs"]}
    assert unreferenced == {("Bash", "worker.log", 1), ("Read", "/repo/app.py", 2)}
    tools = {t["name"]: t for t in data["tools"]}
    assert tools["Read"]["calls"] == 3
    assert tools["Bash"]["calls"] == 1
    read_outputs = sorted(
        ToolUse.objects.filter(session=three, kind="output", tool="Read").values_list(
            "tokens", flat=True
        )
    )
    assert tools["Read"]["output_tokens"] == sum(read_outputs)
    assert tools["Read"]["median_output_tokens"] == read_outputs[1]
    listed = [i["token_turns"] for i in data["items"]]
    assert listed == sorted(listed, reverse=True)
    assert [i["introduced"] for i in data["growth"]] == sorted(
        (i["introduced"] for i in data["growth"]), reverse=True
    )


def test_rollup_day_rows_add_up_to_the_turns(three: Session) -> None:
    turns = list(Turn.objects.filter(session=three))
    [day] = AttributionDay.objects.filter(session=three)
    assert day.turns == 3
    assert day.tokens == sum(t.total_tokens for t in turns)
    regions: Counter[str] = Counter()
    for turn in turns:
        regions.update(turn.regions)
    columns = {name: getattr(day, f"region_{name}") for name in USED_REGIONS}
    assert {k: v for k, v in columns.items() if v} == {k: v for k, v in regions.items() if v}
    assert (day.reported, day.turns_with_usage) == (50_000, 1)
    assert day.cost > 0


def test_rebuild_equals_the_live_rollups(world: World, three: Session) -> None:
    ingest(world, "s2", TURN_1)
    live = snapshot(three)
    other = snapshot(Session.objects.get(external_id="s2"))
    out = StringIO()
    call_command("attribution_rebuild", "--project", world.project.name, stdout=out)
    assert "2 sessions, 4 turns" in out.getvalue()
    assert snapshot(three) == live
    assert snapshot(Session.objects.get(external_id="s2")) == other
    # and again: idempotent
    call_command("attribution_rebuild", stdout=StringIO())
    assert snapshot(three) == live


def test_deleting_a_session_deletes_its_rollups_only(world: World, three: Session) -> None:
    ingest(world, "s2", TURN_0)
    other = Session.objects.get(external_id="s2")
    kept = snapshot(other)
    session_delete(session=three)
    for model in (AttributionItem, AttributionDay, ToolUse):
        assert not model.objects.filter(session_id=three.pk).exists()
    assert snapshot(other) == kept


@pytest.mark.parametrize(
    "relative",
    [
        "claude-code/viewer-sample-1af7fc5e.jsonl",
        "codex/agentcmd-rollout-0924-2012.jsonl",
        "swe-agent/marshmallow-1867-function-calling.traj",
    ],
)
def test_imported_transcripts_rollups_equal_the_sum_of_each_turns_items(
    world: World, transcripts: Path, relative: str, monkeypatch: Any
) -> None:
    path = transcripts / relative
    result = transcript_import(project=world.project, data=path.read_bytes(), name=path.name)
    [external_id, *_] = [s.external_id for s in result.sessions]
    session = Session.objects.get(project=world.project, external_id=external_id)
    assert session.turn_count > 1
    assert rolled_up(session) == expected_items(session, monkeypatch)
    kinds = set(AttributionItem.objects.filter(session=session).values_list("kind", flat=True))
    assert "file" in kinds


def test_labels_add_up_the_items_of_each_top_list(three: Session) -> None:
    three.refresh_from_db()
    expected: Counter[tuple[str, str]] = Counter()
    for row in AttributionItem.objects.filter(session=three):
        token_turns, _, _ = attribution_selectors._held(row, three.turn_count)
        for label in item_labels(row.region, row.kind, row.name, row.group):
            expected[label] += token_turns
    n = three.turn_count
    found = {
        (row.category, row.label): row.accrued
        + (row.tokens_now * (n - row.since) if row.tokens_now > 0 else 0)
        for row in AttributionLabel.objects.filter(session=three)
    }
    assert {k: v for k, v in found.items() if v} == {k: v for k, v in expected.items() if v}
    assert ("files", "/repo/app.py") in found
    assert ("tools", "Read") in found


def test_one_file_from_two_tools_counts_under_each_tool(world: World) -> None:
    # turn 1 drops the Read of app.py and shows it with cat: the same item (the file's
    # output), first under Read, then under Bash
    ingest(world, "s3", TURN_0)
    ingest(world, "s3", [ASK, *call("b2", "Bash", {"command": "cat /repo/app.py"}, APP)])
    session = Session.objects.get(external_id="s3")
    labels = {
        (row.category, row.label): row for row in AttributionLabel.objects.filter(session=session)
    }
    assert all(row.tokens_now >= 0 for row in labels.values())
    assert labels[("tools", "Read")].tokens_now == 0
    assert labels[("tools", "Bash")].tokens_now > 0
    assert labels[("files", "/repo/app.py")].tokens_now > 0
