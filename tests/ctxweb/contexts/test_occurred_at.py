"""Turns dated when their call happened (issue 36): the timestamp parser, imported transcripts
on the days they were made, re-dating on re-import and rebuild, the API and the turn page."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from hypothesis import given
from hypothesis import strategies as st

from compaction.transcripts import parse_transcript
from ctxweb.contexts.models import AttributionDay, Session, Turn
from ctxweb.contexts.selectors.attribution import project_overview
from ctxweb.contexts.services import turn_ingest, turn_request_parse
from ctxweb.contexts.services.attribution import turn_day
from ctxweb.contexts.services.imports import transcript_import
from ctxweb.contexts.services.moments import EARLIEST, occurred_at_parse
from tests.support.world import World

UTC = datetime.UTC
NOW = datetime.datetime(2026, 1, 10, 12, 0, tzinfo=UTC)
MOMENT = datetime.datetime(2025, 9, 25, 2, 12, 23, 966000, tzinfo=UTC)


# --- the parser ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        "2025-09-25T02:12:23.966Z",
        "2025-09-25T02:12:23.966z",
        "2025-09-25T02:12:23.966+00:00",
        "2025-09-25T04:12:23.966+02:00",
        "2025-09-24T21:12:23.966-05:00",
        "2025-09-25T02:12:23.966",  # naive: UTC
        "2025-09-25 02:12:23.966",
        "2025-09-25T02:12:23.966000123Z",  # nanoseconds: cut to microseconds
        " 2025-09-25T02:12:23.966Z ",
        datetime.datetime(2025, 9, 25, 2, 12, 23, 966000),  # naive: UTC
        datetime.datetime(
            2025, 9, 25, 4, 12, 23, 966000, tzinfo=datetime.timezone(datetime.timedelta(hours=2))
        ),
        1_758_766_343.966,  # seconds
        1_758_766_343_966,  # milliseconds
        1_758_766_343_966_000,  # microseconds
        1_758_766_343_966_000_000,  # nanoseconds (OTLP)
        "1758766343966",  # numeric text
        "1758766343.966",
    ],
)
def test_it_reads_iso_8601_and_epoch_forms_as_utc(value: object) -> None:
    moment = occurred_at_parse(value, now=NOW)
    assert moment is not None
    assert moment.tzinfo is not None
    assert moment.utcoffset() == datetime.timedelta(0)
    assert abs(moment - MOMENT) < datetime.timedelta(milliseconds=1)


def test_a_date_alone_is_midnight_utc() -> None:
    assert occurred_at_parse("2025-09-25", now=NOW) == datetime.datetime(2025, 9, 25, tzinfo=UTC)


@pytest.mark.parametrize(
    "value",
    [
        None,
        "",
        "   ",
        "yesterday",
        "2025-13-01T00:00:00Z",
        "2025-09-25T25:00:00Z",
        "1999-12-31T23:59:59Z",  # before 2000
        "1970-01-01T00:00:00Z",
        0,
        -5,
        946_684_799,  # 1999-12-31T23:59:59Z in seconds
        "2026-01-11T12:00:01Z",  # more than a day ahead of NOW
        4_102_444_800,  # 2100
        10**25,  # no unit
        float("nan"),
        float("inf"),
        True,
        [2025, 9, 25],
        {"timestamp": "2025-09-25T02:12:23Z"},
        "2025-09-25T02:12:23Z" + " " * 100,  # longer than any timestamp
        "nan",
    ],
)
def test_unreadable_or_absurd_timestamps_are_ignored(value: object) -> None:
    assert occurred_at_parse(value, now=NOW) is None


def test_the_bounds_are_inclusive() -> None:
    assert occurred_at_parse(EARLIEST, now=NOW) == EARLIEST
    ahead = NOW + datetime.timedelta(days=1)
    assert occurred_at_parse(ahead.isoformat(), now=NOW) == ahead


@given(
    st.datetimes(min_value=datetime.datetime(2000, 1, 1), max_value=datetime.datetime(2026, 1, 1))
)
def test_any_moment_in_range_survives_its_iso_text_and_epoch_milliseconds(
    naive: datetime.datetime,
) -> None:
    moment = naive.replace(tzinfo=UTC)
    assert occurred_at_parse(moment.isoformat(), now=NOW) == moment
    assert occurred_at_parse(moment.isoformat().replace("+00:00", "Z"), now=NOW) == moment
    millis = occurred_at_parse(int(moment.timestamp() * 1000), now=NOW)
    assert millis is not None
    assert abs(millis - moment) < datetime.timedelta(milliseconds=1)


# --- ingest -------------------------------------------------------------------------------------


def post(world: World, external_id: str, text: str, **extra: Any) -> Turn:
    request = {"model": "gpt-4o", "messages": [{"role": "user", "content": text}]}
    context = turn_request_parse(
        project=world.project, external_id=external_id, format="openai-chat", request=request
    )
    return turn_ingest(
        project=world.project, external_id=external_id, context=context, **extra
    ).turn


def test_a_turn_keeps_its_source_time_and_counts_on_that_day(world: World) -> None:
    turn = post(world, "s", "hello", occurred_at="2024-03-01T23:30:00-02:00")
    turn.refresh_from_db()
    assert turn.occurred_at == datetime.datetime(2024, 3, 2, 1, 30, tzinfo=UTC)
    assert turn.called_at == turn.occurred_at
    assert turn_day(turn) == datetime.date(2024, 3, 2)
    [day] = AttributionDay.objects.filter(session=turn.session)
    assert (day.day, day.turns) == (datetime.date(2024, 3, 2), 1)


def test_a_bad_timestamp_is_ignored_and_the_turn_is_dated_when_recorded(world: World) -> None:
    turn = post(world, "s", "hello", occurred_at="3024-01-01T00:00:00Z")
    turn.refresh_from_db()
    assert turn.occurred_at is None
    assert turn.called_at == turn.created_at
    [day] = AttributionDay.objects.filter(session=turn.session)
    assert day.day == turn.created_at.astimezone(UTC).date()


# --- real transcripts ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "relative",
    ["claude-code/viewer-sample-1af7fc5e.jsonl", "codex/agentcmd-rollout-0924-2012.jsonl"],
)
def test_an_imported_transcripts_turns_are_dated_by_its_timestamps(
    world: World, transcripts: Path, relative: str
) -> None:
    path = transcripts / relative
    data = path.read_bytes()
    [parsed, *_] = parse_transcript(data, format=relative.split("/", 1)[0], name=path.name)
    result = transcript_import(project=world.project, data=data, name=path.name)
    session = Session.objects.get(project=world.project, external_id=result.sessions[0].external_id)
    turns = list(Turn.objects.filter(session=session).order_by("index"))
    assert len(turns) == len(parsed.turns) > 1
    expected = [occurred_at_parse(t.timestamp) for t in parsed.turns]
    assert all(moment is not None for moment in expected)
    assert [t.occurred_at for t in turns] == expected
    # the file's own text, read independently of the parser under test
    first = datetime.datetime.fromisoformat(str(parsed.turns[0].timestamp).replace("Z", "+00:00"))
    assert turns[0].occurred_at == first.astimezone(UTC)
    days: dict[datetime.date, int] = {}
    for moment in expected:
        assert moment is not None
        days[moment.date()] = days.get(moment.date(), 0) + 1
    overview = project_overview(project=world.project, start=min(days), end=max(days))
    assert {d["day"]: d["turns"] for d in overview["days"]} == days
    today = datetime.datetime.now(UTC).date()
    assert today not in days  # the transcripts are older than the import
    assert project_overview(project=world.project, start=today, end=today)["days"] == []


def test_reimporting_dates_turns_stored_undated_and_rebuild_keeps_the_days(
    world: World, transcripts: Path
) -> None:
    path = transcripts / "codex/agentcmd-rollout-0924-2012.jsonl"
    data = path.read_bytes()
    result = transcript_import(project=world.project, data=data, name=path.name)
    session = Session.objects.get(project=world.project, external_id=result.sessions[0].external_id)
    dated = dict(Turn.objects.filter(session=session).values_list("index", "occurred_at"))
    days = dict(AttributionDay.objects.filter(session=session).values_list("day", "turns"))
    # as a ctxweb before occurred_at stored them: undated, on the day of the import
    Turn.objects.filter(session=session).update(occurred_at=None)
    call_command("attribution_rebuild", stdout=_Null())
    today = datetime.datetime.now(UTC).date()
    assert dict(AttributionDay.objects.filter(session=session).values_list("day", "turns")) == {
        today: session.turn_count
    }
    again = transcript_import(project=world.project, data=data, name=path.name)
    assert (again.turns, again.skipped) == (0, session.turn_count)
    assert dict(Turn.objects.filter(session=session).values_list("index", "occurred_at")) == dated
    assert dict(AttributionDay.objects.filter(session=session).values_list("day", "turns")) == days
    call_command("attribution_rebuild", stdout=_Null())
    assert dict(AttributionDay.objects.filter(session=session).values_list("day", "turns")) == days


class _Null:
    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        return None


# --- the API and the turn page ------------------------------------------------------------------


def test_the_api_and_the_turn_page_show_when_the_call_happened(world: World) -> None:
    post(world, "dated", "hello", occurred_at=1_758_766_343_966)
    client = world.api(world.operator_key)
    listed = client.get("/api/v1/sessions/dated/turns").json()
    [turn] = listed if isinstance(listed, list) else listed["results"]
    assert turn["occurred_at"].startswith("2025-09-25T02:12:23.966")
    assert turn["created_at"]
    detail = client.get("/api/v1/sessions/dated/turns/0").json()
    assert detail["occurred_at"].startswith("2025-09-25T02:12:23.966")
    page = world.login(world.owner).get("/sessions/dated/turns/0/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'datetime="2025-09-25T02:12:23.966000+00:00"' in html
    assert "called 2025-09-25 02:12 UTC" in html


def test_an_undated_turn_page_shows_when_it_was_recorded(world: World) -> None:
    turn = post(world, "plain", "hello")
    html = world.login(world.owner).get("/sessions/plain/turns/0/").content.decode()
    assert f"recorded {turn.created_at.astimezone(UTC):%Y-%m-%d %H:%M} UTC" in html
    assert turn.occurred_at is None
