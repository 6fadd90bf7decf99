"""What an agent sent comes back key for key: a tool's schema and a kept item read back from the
database have their keys in the order they were sent (PostgreSQL's jsonb sorts them, shorter
first), so the managed context is the same bytes the agent sent and recounting a stored context
gives what ingest counted. On SQLite and PostgreSQL."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import connection

from compaction.regions import context_regions
from ctxweb.contexts import selectors
from ctxweb.contexts.models import Message, ToolSet, Turn
from ctxweb.contexts.services.counting import counter_for
from tests.support.servers import require_postgresql
from tests.support.world import World

pytestmark = pytest.mark.django_db

# Every object's keys in an order jsonb would change (it puts shorter keys first).
TOOL = {
    "type": "function",
    "name": "search_files",
    "description": "Search the project's files for a pattern.",
    "parameters": {
        "properties": {
            "pattern": {"description": "A regular expression.", "type": "string"},
            "max_results": {"minimum": 1, "type": "integer", "description": "At most this many."},
        },
        "type": "object",
        "required": ["pattern"],
        "additionalProperties": False,
    },
    "strict": True,
}
ITEM = {
    "type": "from_the_future",
    "payload": {"zeta_is_longer": {"bb": 1, "a": [{"yy": 2, "x": 3}]}, "alpha": "x"},
    "id": "item-1",
}
REQUEST = {
    "model": "gpt-4o",
    "input": [
        {"role": "user", "content": "Find the settings file."},
        ITEM,
    ],
    "tools": [TOOL],
}


def text(value: Any) -> str:
    """``value``'s JSON with its keys in their order (what a prompt cache sees)."""
    return json.dumps(value, separators=(",", ":"))


@pytest.fixture
def turn(world: World) -> Turn:
    response = world.api(world.ingest_key).post(
        "/api/v1/sessions/key-order/turns",
        data=json.dumps({"format": "openai-responses", "request": REQUEST}),
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    return Turn.objects.select_related("session", "system", "toolset").get(
        session__external_id="key-order", index=0
    )


def test_the_managed_context_gives_back_the_tools_and_items_key_for_key(
    world: World, turn: Turn
) -> None:
    response = world.api(world.operator_key).get("/api/v1/sessions/key-order/context")
    assert response.status_code == 200, response.content
    request = json.loads(response.content)["request"]
    assert text(request["input"]) == text(REQUEST["input"])
    (tool,) = request["tools"]
    assert text(tool["parameters"]) == text(TOOL["parameters"])
    # (the Responses adapter writes a tool's own keys in an order of its own, "strict" first,
    # on every database: the tool is the one sent, its schema the same bytes)
    assert tool == TOOL


def test_the_turn_detail_gives_back_the_tools_and_items_key_for_key(
    world: World, turn: Turn
) -> None:
    response = world.api(world.ingest_key).get("/api/v1/sessions/key-order/turns/0")
    assert response.status_code == 200, response.content
    detail = json.loads(response.content)
    (tool,) = detail["tools"]["tools"]
    assert text(tool["parameters"]) == text(TOOL["parameters"])
    kept = [
        part["extra"]["ctxweb:raw"]
        for message in detail["messages"]
        for part in message["message"]["parts"]
        if "ctxweb:raw" in part.get("extra", {})
    ]
    assert [text(item) for item in kept] == [text(ITEM)]


def test_recounting_the_stored_context_gives_the_stored_totals(turn: Turn) -> None:
    context = selectors.turn_context(turn=turn)
    recounted = context_regions(context, counter_for(turn.session.encoding))
    assert turn.reported_input_tokens is None  # nothing the provider reported beyond the count
    assert recounted.total == turn.counted_tokens == turn.total_tokens
    assert recounted.regions["tools"] == turn.regions["tools"] > 0
    assert selectors.turn_attribution(turn=turn)["matches_turn"] is True


def test_the_rows_read_back_as_written(world: World) -> None:
    """Through the ORM (``save()``, ``values_list``): objects in their order, and a JSON string
    stays a string (the driver decodes a ``json`` column itself: it is not decoded twice)."""
    data = [{"zz_long": "12", "a": {"long_first": 1, "b": None}}, "12", "null"]
    toolset = ToolSet.objects.create(project=world.project, hash="h" * 64, data=data)
    toolset.refresh_from_db()
    assert text(toolset.data) == text(data)
    (read,) = ToolSet.objects.filter(pk=toolset.pk).values_list("data", flat=True)
    assert text(read) == text(data)
    message = Message.objects.create(
        project=world.project, hash="m" * 64, role="user", data=data[0], size=0
    )
    (read,) = Message.objects.filter(pk=message.pk).values_list("data", flat=True)
    assert text(read) == text(data[0])


def test_the_columns_are_json_on_postgresql() -> None:
    require_postgresql("its column types")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_name, data_type FROM information_schema.columns"
            " WHERE table_name IN (%s, %s) AND column_name = 'data' ORDER BY table_name",
            [Message._meta.db_table, ToolSet._meta.db_table],
        )
        assert cursor.fetchall() == [
            (Message._meta.db_table, "json"),
            (ToolSet._meta.db_table, "json"),
        ]


def test_lookups_into_the_columns_compare_as_on_any_json_field(world: World) -> None:
    """A key read keeps its order; lookups (a key's ``in``, equality, text and key tests, the
    whole column's equality) find what they found on ``jsonb``."""
    data = {"zz_long": {"long_first": 1, "b": [1, 2]}, "parts": [{"type": "text", "text": "hi"}]}
    message = Message.objects.create(
        project=world.project, hash="k" * 64, role="user", data=data, size=0
    )
    Message.objects.create(
        project=world.project, hash="o" * 64, role="user", data={"parts": []}, size=0
    )
    mine = Message.objects.filter(project=world.project)
    (key,) = mine.filter(pk=message.pk).values_list("data__zz_long", flat=True)
    assert text(key) == text(data["zz_long"])
    for found in (
        mine.filter(data__parts__0__text__in=["hi", "other"]),
        mine.filter(data__parts__0__text="hi"),
        mine.filter(data__parts__0__text__startswith="h"),
        mine.filter(data__zz_long__long_first__gt=0),
        mine.filter(data__has_key="zz_long"),
        mine.filter(data__zz_long__has_key="b"),
        mine.filter(data__zz_long__b__isnull=False),
        mine.filter(data=data),
    ):
        assert list(found) == [message]
    assert mine.filter(data__parts__0__text__in=["other"]).count() == 0
