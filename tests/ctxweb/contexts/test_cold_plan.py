"""A big turn that the storing process remembers no previous turn of (a first turn, another
process's session, the first after a restart) is hashed, looked up and counted before its
transaction opens (``ingest._cold_plan``): SQLite's write lock, which its transaction takes,
holds the whole database, and a recorder counting a 24 MB call inside it kept every other
writer waiting for seconds. What it stores is what the count inside the transaction stored."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection

from compaction.messages import message_to_dict, parse
from ctxweb.accounts.models import Project
from ctxweb.contexts import selectors, services
from ctxweb.contexts.models import Message, Turn
from ctxweb.contexts.services import ingest as ingest_module
from ctxweb.contexts.services import storage
from tests.support.world import World

pytestmark = pytest.mark.django_db(transaction=True)

#: A tool's output above the threshold (``COLD_PLAN_BYTES``: 256 KiB).
BIG = "".join(f"line {n}: the build log goes on and on\n" for n in range(12_000))


def request(big: str = BIG, *, turns: int = 1) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Build the project and tell me what failed."},
    ]
    for n in range(turns):
        messages += [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{n}",
                        "type": "function",
                        "function": {"name": "shell", "arguments": '{"cmd": "make"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": f"call_{n}", "content": f"run {n}\n{big}"},
        ]
    return {"model": "gpt-4o", "messages": messages}


def store(project: Project, external_id: str, body: dict[str, Any]) -> Turn:
    """The turn stored as another process would store it: remembering no turn of the session."""
    with services.as_another_process():
        context = parse("openai-chat", body)
        return services.turn_ingest(project=project, external_id=external_id, context=context).turn


def assert_holds(turn: Turn, body: dict[str, Any]) -> None:
    ids = selectors.turn_message_ids(session=turn.session, index=turn.index)
    rows = Message.objects.in_bulk(set(ids))
    stored = selectors.turn_context(turn=turn, rows=[rows[i] for i in ids])
    sent = parse("openai-chat", body)
    assert stored.messages == sent.messages
    assert stored.system == sent.system


@pytest.fixture
def counted_where(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, bool]]:
    """For each message counted: its text's size and whether a transaction was open."""
    seen: list[tuple[int, bool]] = []
    counting: Callable[..., Any] = storage.message_regions

    def probe(message: Any, counter: Any) -> Any:
        size = len(json.dumps(message_to_dict(message)))
        seen.append((size, connection.in_atomic_block))
        return counting(message, counter)

    monkeypatch.setattr(storage, "message_regions", probe)
    return seen


@pytest.mark.parametrize("planned_before", [True, False])
def test_a_big_turn_no_process_remembers_is_counted_before_its_transaction_opens(
    world: World,
    monkeypatch: pytest.MonkeyPatch,
    counted_where: list[tuple[int, bool]],
    planned_before: bool,
) -> None:
    if not planned_before:  # as before: the probe sees the count inside the transaction
        monkeypatch.setattr(ingest_module, "COLD_PLAN_BYTES", 1 << 40)
    assert not connection.in_atomic_block
    body = request()
    turn = store(world.project, "s", body)
    assert_holds(turn, body)
    big = [inside for size, inside in counted_where if size >= len(BIG)]
    assert big == [not planned_before]
    # the small messages of a big turn are planned with it
    assert all(inside != planned_before for _, inside in counted_where)


def test_a_big_turn_planned_before_stores_what_the_count_inside_stored(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = request(turns=2)
    before = store(world.project, "s", body)
    monkeypatch.setattr(ingest_module, "COLD_PLAN_BYTES", 1 << 40)
    inside = store(world.other_project, "s", body)
    for turn in (before, inside):
        assert_holds(turn, body)
    assert before.regions == inside.regions
    assert before.total_tokens == inside.total_tokens > 2 * len(BIG) // 10
    assert (before.shared, before.keyframe) == (inside.shared, inside.keyframe)
    # the rows inserted in the same order (in the projects' own ids)
    assert [i - min(before.tail) for i in before.tail] == [
        i - min(inside.tail) for i in inside.tail
    ]
    ours = Message.objects.filter(project=world.project).order_by("hash")
    theirs = Message.objects.filter(project=world.other_project).order_by("hash")
    assert [(m.hash, m.counts, m.secrets) for m in ours] == [
        (m.hash, m.counts, m.secrets) for m in theirs
    ]


def test_the_next_big_turn_counts_only_its_new_messages_before_the_transaction(
    world: World, counted_where: list[tuple[int, bool]]
) -> None:
    store(world.project, "s", request(turns=1))
    counted_where.clear()
    body = request(turns=2)
    turn = store(world.project, "s", body)
    assert_holds(turn, body)
    assert turn.index == 1
    # the first turn's messages are found stored: only the new call and its output are counted
    assert len(counted_where) == 2
    assert not any(inside for _, inside in counted_where)
    assert Message.objects.filter(project=world.project).count() == 6


def test_a_big_message_stored_after_the_plan_looked_is_found_not_stored_twice(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = request()
    first = store(world.project, "a", body)
    rows = Message.objects.filter(project=world.project).count()
    # the plan's look-up misses the rows (stored by another writer after it looked)
    monkeypatch.setattr(ingest_module, "_rows_by_hash", lambda project, hashes: {})
    second = store(world.project, "b", body)
    assert_holds(second, body)
    assert Message.objects.filter(project=world.project).count() == rows
    assert selectors.turn_message_ids(
        session=second.session, index=0
    ) == selectors.turn_message_ids(session=first.session, index=0)
    assert second.total_tokens == first.total_tokens


def test_a_plan_counted_with_another_encoding_than_the_sessions_is_counted_again(
    world: World, monkeypatch: pytest.MonkeyPatch, counted_where: list[tuple[int, bool]]
) -> None:
    """The session's encoding is read before the plan counts; a session created meanwhile
    with another one (the plan guessed a new session's) has its turn counted in the
    transaction, with its own."""
    monkeypatch.setattr(ingest_module, "encoding_for", lambda model: ("cl100k_base", False))
    body = request()
    turn = store(world.project, "s", body)
    assert turn.session.encoding == "o200k_base"  # gpt-4o's
    assert_holds(turn, body)
    assert [inside for size, inside in counted_where if size >= len(BIG)] == [False, True]
    for message in Message.objects.filter(project=world.project):
        assert set(message.counts) == {"o200k_base"}


def test_a_small_turn_no_process_remembers_is_hashed_once(
    world: World, monkeypatch: pytest.MonkeyPatch, counted_where: list[tuple[int, bool]]
) -> None:
    """Under the threshold the messages are hashed before the transaction and counted in it,
    each serialized once (the plan is carried out, not made again in the transaction)."""
    serialized: list[int] = []
    canonical: Callable[[Any], str] = storage._canonical_json

    def probe(data: Any) -> str:
        serialized.append(1)
        return canonical(data)

    monkeypatch.setattr(storage, "_canonical_json", probe)
    body = request("a short build log", turns=2)
    turn = store(world.project, "s", body)
    assert_holds(turn, body)
    # each message once (the system prompt by its own row)
    assert len(serialized) == len(body["messages"])
    assert len(counted_where) == len(body["messages"])
    assert all(inside for _, inside in counted_where)
