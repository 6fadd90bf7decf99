"""Ingestion's hand-written SQL: the JSON columns it writes with msgspec read back as what was
sent (text beyond ASCII, integers past 64 bits), on SQLite and on PostgreSQL."""

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
