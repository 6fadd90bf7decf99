"""Ingestion's hand-written SQL: JSON columns written with msgspec read back as ``save()``'s
would, and rows loaded as model instances whatever the query's columns."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import connection

from ctxweb.contexts import services
from ctxweb.contexts.models import Message, Session, Turn
from ctxweb.contexts.services._sql import _json_text, _loaded
from tests.support.world import World

pytestmark = pytest.mark.django_db

TRICKY: list[Any] = [
    {"text": "naïve café — 日本語 🙂", "n": 2**80, "neg": -(2**70), "f": 1.5e-300},
    {"nested": [[[{"a": None, "b": True, "c": False}]]], "empty": {}, "list": []},
    {1: "an integer key", "2": "a string key"},
    ["a", 'quote " and backslash \\ and control \n\t\x01', 0, -0.0, 12345678901234567890],
    "plain",
    None,
]


@pytest.mark.parametrize("value", TRICKY)
def test_json_text_reads_back_as_json_dumps_does(value: Any) -> None:
    assert json.loads(_json_text(value)) == json.loads(json.dumps(value))


def test_json_text_falls_back_to_json_dumps_for_what_msgspec_refuses() -> None:
    # a bool key (json.dumps writes "true"), and a lone surrogate (stored escaped)
    assert _json_text({True: 1}) == json.dumps({True: 1})
    assert _json_text({"s": "\ud800"}) == json.dumps({"s": "\ud800"})


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


def test_rows_load_whatever_columns_the_query_reads(world: World) -> None:
    services.turn_ingest(
        project=world.project,
        external_id="loaded",
        context=services.turn_request_parse(
            project=world.project,
            external_id="loaded",
            format="openai-chat",
            request={"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]},
        ),
    )
    table = connection.ops.quote_name(Session._meta.db_table)
    session = Session.objects.get(external_id="loaded")
    queries = [
        f"SELECT * FROM {table} WHERE id = %s",
        # other columns, in another order, with one that is no field (an attribute)
        f"SELECT turn_count, id, external_id, 41 + 1 AS answer FROM {table} WHERE id = %s",
        f"SELECT * FROM {table} WHERE id = %s",  # the first shape again
    ]
    for sql in queries:
        with connection.cursor() as cursor:
            cursor.execute(sql, [session.pk])
            (loaded,) = _loaded(Session, cursor)
        assert (loaded.pk, loaded.external_id, loaded.turn_count) == (session.pk, "loaded", 1)
        if "answer" in sql:
            assert loaded.answer == 42
        else:
            assert loaded.policy == session.policy
            assert loaded.last_activity_at == session.last_activity_at
