"""Ingestion's hand-written SQL: the JSON columns it writes with msgspec read back as what was
sent (text beyond ASCII, integers past 64 bits), and every column gets what ``save()`` would send
it, on SQLite and on PostgreSQL."""

from __future__ import annotations

import datetime
import json
import re
from typing import Any

import pytest
from django.db import connection
from django.db.models import JSONField

from ctxweb.contexts.models import Message, Session, Turn
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


def test_a_turn_row_is_the_row_save_writes(world: World) -> None:
    """The hand-written insert of a turn and update of its session store what Django's
    ``save()`` stores for the same values, column by column (strings, integers, booleans,
    floats, keys, ``None``, times; JSON compared as the values it reads back as)."""
    client = world.api(world.ingest_key)
    for index, extra in enumerate(({}, {"turn_id": "t-1", "usage": {"input_tokens": 5}})):
        body = {
            "format": "openai-chat",
            "request": {
                "model": "gpt-4o",
                "max_tokens": 1000 + index,
                "messages": [
                    {"role": "user", "content": f"question {k}"} for k in range(index + 1)
                ],
            },
            "response": {"role": "assistant", "content": None, "n": 1.5},
            **extra,
        }
        answer = client.post(
            "/api/v1/sessions/row-as-saved/turns",
            data=json.dumps(body),
            content_type="application/json",
        )
        assert answer.status_code == 201, answer.content
    session = Session.objects.get(external_id="row-as-saved")
    other = Session.objects.create(
        project=world.project,
        external_id="saved-by-the-orm",
        format=session.format,
        model=session.model,
        context_window=session.context_window,
    )
    for turn in Turn.objects.filter(session=session):
        assert_saved_alike(turn, session=other)
    assert_saved_alike(session, external_id="session-saved-by-the-orm")


def assert_saved_alike(obj: Any, **changes: Any) -> None:
    """``obj``'s row equals the row ``save()`` inserts for a copy of it with ``changes`` (and
    its own id), but for the columns changed."""
    model = type(obj)
    ingested = _row(model, obj.pk)
    for name, value in changes.items():
        setattr(obj, name, value)
    obj.pk = None
    obj._state.adding = True
    obj.save()
    saved = _row(model, obj.pk)
    for name in ("id", *(model._meta.get_field(name).column for name in changes)):
        ingested.pop(name), saved.pop(name)
    assert _times_as_shapes(ingested) == _times_as_shapes(saved)


def _times_as_shapes(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` with its times (written at different moments) as their shapes: the text's with
    every digit a 9 (SQLite), or whether the time has a zone (PostgreSQL)."""
    shaped = dict(row)
    for name in ("created_at", "last_activity_at"):
        value = shaped.get(name)
        if isinstance(value, str):
            shaped[name] = re.sub(r"\d", "9", value)
        elif isinstance(value, datetime.datetime):
            shaped[name] = value.tzinfo is not None
    return shaped


def _row(model: Any, pk: int) -> dict[str, Any]:
    """The row of ``model`` ``pk`` as the database holds it: each column's value and, on SQLite,
    its storage class (an integer and a real are told apart); JSON columns parsed."""
    table = model._meta.db_table
    json_columns = {f.column for f in model._meta.concrete_fields if isinstance(f, JSONField)}
    with connection.cursor() as cursor:
        cursor.execute(f'SELECT * FROM "{table}" WHERE id = %s', [pk])
        names = [d[0] for d in cursor.description]
        values = dict(zip(names, cursor.fetchone(), strict=True))
        if connection.vendor == "sqlite":
            kinds = ", ".join(f'typeof("{name}")' for name in names)
            cursor.execute(f'SELECT {kinds} FROM "{table}" WHERE id = %s', [pk])
            values |= {f"{n} (stored as)": k for n, k in zip(names, cursor.fetchone(), strict=True)}
    for name in json_columns:
        if isinstance(values[name], str):
            values[name] = json.loads(values[name])
    return values
