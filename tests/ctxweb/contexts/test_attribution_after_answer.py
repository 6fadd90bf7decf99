"""A turn posted over HTTP is attributed after its answer is sent (issue 36: the caller does not
wait for the rollups): the work runs once the answer's last byte is handed to the server, and
what it leaves undone (a process stopped first, a turn stored by another request meanwhile, a
transaction rolled back) is caught up, from the stored turns, by whoever reads the rollups. The
rollups come out the same as a session's attributed turn by turn at ingest, whichever turns
waited."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import transaction

from ctxweb.afterwards import answers_pending, run_all
from ctxweb.contexts.models import AttributionItem, Session, Turn
from ctxweb.contexts.services import attribution as attribution_service
from ctxweb.contexts.services import ingest as ingest_service
from ctxweb.contexts.services.attribution import attribution_catch_up, attribution_rebuild
from tests.support.asgi import payload, scope, serve
from tests.support.rollups import (
    ASK,
    BASH,
    READ_LIB,
    TURN_0,
    TURN_1,
    TURN_2,
    assistant,
    body,
    ingest,
    snapshot,
    user,
)
from tests.support.world import World

#: Six turns: the three of the rollups' tests (the third drops a read), one that adds an answer,
#: a compaction (a summary and a new question), and a read after it.
SUMMARY = user("Summary of the work so far: lib.py doubles the value; app.py prints a greeting.")
TURN_3 = [*TURN_2, assistant("Done: app.py is fixed.")]
TURN_4 = [SUMMARY, user("Now look at the worker log again.")]
TURN_5 = [*TURN_4, *BASH, *READ_LIB]
TURNS = [TURN_0, TURN_1, TURN_2, TURN_3, TURN_4, TURN_5]


def ingest_answered(world: World, external_id: str, messages: list[dict[str, Any]]) -> list[Any]:
    """Ingest as a request served by ctxweb.serving does: the turn's attribution is left for
    after the answer; returns that work, not run."""
    with answers_pending() as later:
        ingest(world, external_id, messages)
    assert len(later) == 1
    return list(later)


def stored_then_failed(world: World, external_id: str, messages: list[dict[str, Any]]) -> None:
    """Ingest inside a transaction that then fails: the turn is rolled back."""
    with transaction.atomic():
        ingest(world, external_id, messages)
        raise RuntimeError("the caller's transaction fails after the turn")


def session(world: World, external_id: str) -> Session:
    return Session.objects.get(project=world.project, external_id=external_id)


@pytest.mark.django_db
@pytest.mark.parametrize(
    "left",
    [(), (1,), (0, 2, 3), (4,), (5,), (0, 1, 2, 3, 4, 5)],
    ids=["none", "one", "several", "the-compaction", "the-last", "all"],
)
def test_rollups_equal_ingests_whichever_turns_waited(world: World, left: tuple[int, ...]) -> None:
    for messages in TURNS:
        ingest(world, "inline", messages)
    inline = session(world, "inline")
    assert inline.attributed_turns == 6
    for index, messages in enumerate(TURNS):
        later = ingest_answered(world, "late", messages)
        if index not in left:
            run_all(later, release=False)  # a turn's work runs; it catches up the ones left
    late = session(world, "late")
    # a turn's work catches up every turn before it: only those after the last work run wait
    ran = [index for index in range(6) if index not in left]
    assert late.attributed_turns == (max(ran) + 1 if ran else 0)
    attribution_catch_up(session_id=late.pk)
    late.refresh_from_db()
    assert late.attributed_turns == late.turn_count == 6
    assert snapshot(late) == snapshot(inline)
    assert attribution_catch_up(session_id=late.pk) == 0  # nothing twice


@pytest.mark.django_db
def test_a_turns_work_that_runs_late_attributes_nothing_twice(world: World) -> None:
    for messages in TURNS[:3]:
        ingest(world, "inline", messages)
    works = [ingest_answered(world, "late", messages) for messages in TURNS[:3]]
    for later in reversed(works):  # the last turn's work catches every turn up; the rest: none
        run_all(later, release=False)
    assert snapshot(session(world, "late")) == snapshot(session(world, "inline"))


@pytest.mark.django_db
def test_the_work_of_a_turn_rolled_back_is_not_the_turn_stored_in_its_place(world: World) -> None:
    ingest(world, "inline", TURN_0)
    ingest(world, "inline", TURN_1)
    run_all(ingest_answered(world, "late", TURN_0), release=False)
    with answers_pending() as stale, pytest.raises(RuntimeError):
        stored_then_failed(world, "late", TURN_2)
    assert len(stale) == 1
    later = ingest_answered(world, "late", TURN_1)  # turn 1 again, another turn
    run_all(stale, release=False)  # turn 1 is not the one it knew: read from the database
    late = session(world, "late")
    assert late.attributed_turns == 2
    assert snapshot(late) == snapshot(session(world, "inline"))
    run_all(later, release=False)
    assert snapshot(late) == snapshot(session(world, "inline"))


@pytest.mark.django_db
def test_readers_catch_up_first(world: World) -> None:
    ingest(world, "inline", TURN_0)
    ingest(world, "inline", TURN_1)
    ingest_answered(world, "late", TURN_0)
    ingest_answered(world, "late", TURN_1)
    late = session(world, "late")
    assert late.attributed_turns == 0
    assert not AttributionItem.objects.filter(session=late).exists()
    client = world.api(world.ingest_key)
    answer = client.get("/api/v1/sessions/late/attribution")
    assert answer.status_code == 200, answer.content
    assert answer.json()["turns"] == 2
    assert snapshot(late) == snapshot(session(world, "inline"))
    ingest_answered(world, "late", TURN_2)
    overview = client.get("/api/v1/overview")
    assert overview.status_code == 200, overview.content
    assert session(world, "late").attributed_turns == 3
    assert sum(day["turns"] for day in overview.json()["days"]) == 2 + 3


@pytest.mark.django_db
def test_rebuild_marks_every_turn_attributed(world: World) -> None:
    ingest_answered(world, "late", TURN_0)
    ingest_answered(world, "late", TURN_1)
    assert attribution_rebuild(project=world.project) == {"sessions": 1, "turns": 2}
    assert session(world, "late").attributed_turns == 2


@pytest.mark.django_db(transaction=True)
def test_a_turn_posted_to_the_server_is_attributed_after_its_answer(
    world: World, monkeypatch: Any
) -> None:
    sent: list[dict[str, Any]] = []
    seen: list[int] = []
    real = ingest_service.attribution_catch_up

    def catch_up(**kwargs: Any) -> int:
        seen.append(len(sent))  # what the caller had been sent when it ran
        return real(**kwargs)

    monkeypatch.setattr(ingest_service, "attribution_catch_up", catch_up)
    request = {"format": "anthropic-messages", "request": body([ASK, *BASH])}
    data = json.dumps(request).encode()
    status, _, messages = serve(
        scope(
            "POST",
            "/api/v1/sessions/posted/turns",
            key=world.ingest_key,
            headers=[(b"content-type", b"application/json")],
        ),
        [data],
        sent=sent,
    )
    assert status == 201, payload(messages)
    assert seen == [2]  # the answer's start and its whole body, then the rollups
    posted = session(world, "posted")
    assert posted.attributed_turns == 1
    turn = Turn.objects.get(session=posted)
    outputs = AttributionItem.objects.filter(session=posted, region="tool_results")
    assert turn.regions["tool_results"] > 0
    assert sum(row.tokens_now for row in outputs) == turn.regions["tool_results"]


@pytest.mark.django_db
def test_a_turn_that_cannot_be_attributed_leaves_the_readers_answering(
    world: World, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A turn whose attribution fails every time: the pages and the API answer with the rollups
    they have and say how many turns they lack; the failure is logged, and tried again on the
    next read (once it passes, nothing is lacking)."""
    ingest(world, "fine", TURN_0)
    ingest_answered(world, "poisoned", TURN_0)
    ingest_answered(world, "poisoned", TURN_1)

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise ValueError("a turn nobody can attribute")

    monkeypatch.setattr(attribution_service, "_session_walk", broken)
    api = world.api(world.ingest_key)
    answer = api.get("/api/v1/sessions/poisoned/attribution")
    assert answer.status_code == 200, answer.content
    assert answer.json()["unattributed_turns"] == 2
    overview = api.get("/api/v1/overview")
    assert overview.status_code == 200, overview.content
    assert overview.json()["unattributed_turns"] == 2
    assert "could not be caught up" in caplog.text
    owner = world.login(world.owner)
    for path in ("/sessions/poisoned/attribution/", "/overview/"):
        page = owner.get(path)
        assert page.status_code == 200, path
        assert b'id="unattributed"' in page.content, path
        assert b"2 turns are not in these figures yet" in page.content, path
    monkeypatch.undo()
    healed = api.get("/api/v1/sessions/poisoned/attribution").json()
    assert healed["unattributed_turns"] == 0
    assert healed["turns"] == 2
    assert b'id="unattributed"' not in owner.get("/sessions/poisoned/attribution/").content


@pytest.mark.django_db
def test_a_projects_reader_catches_up_for_a_bounded_time(world: World) -> None:
    """Past its time, the overview's catch-up counts the sessions left as lacking their turns,
    and the next read goes on with them."""
    ingest_answered(world, "first", TURN_0)
    ingest_answered(world, "second", TURN_0)
    ingest_answered(world, "second", TURN_1)
    assert attribution_service.attribution_behind_project(project=world.project, seconds=0) == 3
    assert session(world, "first").attributed_turns == 0
    assert attribution_service.attribution_behind_project(project=world.project) == 0
    assert session(world, "first").attributed_turns == 1
    assert session(world, "second").attributed_turns == 2
