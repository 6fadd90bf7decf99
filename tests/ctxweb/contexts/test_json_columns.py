"""Ingestion's hand-written SQL: the JSON columns it writes with msgspec read back as what was
sent (text beyond ASCII, integers past 64 bits), and every column gets what ``save()`` would send
it, on SQLite and on PostgreSQL."""

from __future__ import annotations

import json

import pytest

from ctxweb.contexts.models import Message, Turn
from tests.support.world import World

pytestmark = pytest.mark.django_db


def test_a_turn_s_json_columns_read_back_as_they_were_sent(world: World) -> None:
    content = "naïve café 🙂 " + "x" * 5_000
    request = {
        "model": "gpt-4o",
        "messages": [
            {"role": "user", "content": content},
            {"role": "assistant", "content": "ok", "name": "agent-名前"},
        ],
        "metadata": {"big": 2**70, "tags": ["ä", "b"]},
    }
    response = world.api(world.ingest_key).post(
        "/api/v1/sessions/json-columns/turns",
        data=json.dumps(
            {"format": "openai-chat", "request": request, "usage": {"input_tokens": 7}}
        ),
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    turn = Turn.objects.get(session__external_id="json-columns")
    assert turn.request_extra["metadata"] == {"big": 2**70, "tags": ["ä", "b"]}
    assert turn.usage["input_tokens"] == 7
    stored = [m.data for m in Message.objects.filter(project=world.project)]
    assert any(content in json.dumps(data, ensure_ascii=False) for data in stored)
    # what the API gives back is what was sent
    detail = world.api(world.ingest_key).get("/api/v1/sessions/json-columns/turns/0").json()
    assert content in json.dumps(detail, ensure_ascii=False)


def test_rows_are_written_with_the_values_save_sends(world: World) -> None:
    """The inserts and updates written by hand send each column what Django's ``save()`` would
    (``get_db_prep_save``), values of every kind the models hold: the ones passed through as
    they are (strings, integers, booleans, floats, keys, ``None``) and the ones converted."""
    from django.db import connection
    from django.utils.safestring import mark_safe

    from ctxweb.contexts.models import Session
    from ctxweb.contexts.services._sql import _db_value, _insert_sql, _update_sql

    session = Session.objects.create(
        project=world.project,
        external_id="prepared",
        format="openai-chat",
        model="gpt-4o",
        context_window=128_000,
    )
    turns = [
        Turn(session=session, index=0, turn_id=None, body_hash="", keyframe=True,
             context_window=128_000, total_tokens=10, counted_tokens=10, usage=None,
             max_output_tokens=None, response={"content": None, "n": 1.5}),
        Turn(session=session, index=1, turn_id=mark_safe("t-1"), body_hash="ab", keyframe=False,
             context_window=128_000, total_tokens=True, counted_tokens=7, regions={"tools": 3},
             max_output_tokens=4096, unknown=["x"], events=[{"type": "compaction"}]),
    ]  # fmt: skip
    for turn in turns:
        _, params = _insert_sql([turn])
        assert turn.created_at is not None  # auto_now_add, as save() sets it
        fields = [f for f in Turn._meta.concrete_fields if not f.primary_key]
        # (the time just set read back: add=False)
        expected = [_db_value(f, f.pre_save(turn, False), connection) for f in fields]
        assert [_plain(p) for p in params] == [_plain(p) for p in expected]
        assert [type(_plain(p)) for p in params] == [type(_plain(p)) for p in expected]
    session.last_fill = 1  # an int in a float column: converted, as save() converts it
    session.turn_count = 3
    names = ("turn_count", "last_fill", "last_activity_at")
    _, params = _update_sql(session, names)
    fields = [f for f in Session._meta.concrete_fields if f.name in names]
    expected = [_db_value(f, getattr(session, f.attname), connection) for f in fields]
    assert params == [*expected, session.pk]
    assert [type(p) for p in params] == [type(p) for p in [*expected, session.pk]]
    fill = params[[f.name for f in fields].index("last_fill")]
    assert fill == 1.0
    assert type(fill) is float


def _plain(value: object) -> object:
    """A parameter as the driver sees it (psycopg's JSON wrapper compared by its value)."""
    return getattr(value, "obj", value)
