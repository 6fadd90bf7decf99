"""A property of both receivers' service (:mod:`ctxweb.contexts.services.capture`), on the
test's database (SQLite or PostgreSQL): whatever a span or a Langfuse generation holds (NULs, lone
surrogates and control characters in values and keys, numbers past 64 bits, NaN and infinities,
wrong shapes), it is stored, or rejected with a reason naming the field; nothing raises (each
exception was a 500). Every example runs in a transaction rolled back after it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction.telemetry import Span
from ctxweb.contexts.services.capture import langfuse_batch_ingest, spans_ingest
from tests.support.world import World

pytestmark = pytest.mark.django_db

HOSTILE = st.sampled_from(
    ["\x00", "\ud800", "\n", "\x01", "²", "9" * 50, "-1", "NaN", "", " ", "/", "..", "turns", "é"]
)
TEXT = st.one_of(
    st.text(max_size=6), HOSTILE, st.builds(lambda a, b: a + b, st.text(max_size=3), HOSTILE)
)
LEAF = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(), TEXT)
NAMES = st.one_of(
    st.sampled_from(
        ["role", "content", "parts", "type", "id", "name", "arguments", "function", "tool_calls"]
    ),
    st.sampled_from(["messages", "input", "model", "tools", "max_tokens", "text", "tool_call_id"]),
    TEXT,
)
JSONISH = st.recursive(
    LEAF,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(NAMES, inner, max_size=4)),
    max_leaves=10,
)
MESSAGE = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "tool", "system"]), "content": JSONISH},
    optional={"tool_calls": JSONISH, "tool_call_id": TEXT, "name": TEXT},
)
REQUEST = st.fixed_dictionaries(
    {"model": LEAF, "messages": st.lists(MESSAGE, max_size=3)},
    optional={"tools": JSONISH, "max_tokens": LEAF, "system": JSONISH, "temperature": LEAF},
)
ATTRIBUTES = st.sampled_from(
    [
        "gen_ai.request.model",
        "gen_ai.usage.input_tokens",
        "gen_ai.usage.output_tokens",
        "gen_ai.request.max_tokens",
        "session.id",
        "gen_ai.conversation.id",
        "gen_ai.prompt.0.role",
        "gen_ai.prompt.0.content",
        "gen_ai.prompt.1.tool_calls.0.id",
        "gen_ai.completion.0.content",
        "llm.model_name",
    ]
)


def dumps(value: Any) -> str:
    return json.dumps(value, allow_nan=True)


def span_attributes(dialect: str, request: dict[str, Any], output: Any) -> dict[str, Any]:
    if dialect == "raw":
        return {"input.value": dumps(request), "input.mime_type": "application/json"}
    if dialect == "gen_ai":
        messages = [
            {"role": m["role"], "parts": [{"type": "text", "content": m["content"]}]}
            for m in request["messages"]
        ]
        return {"gen_ai.input.messages": dumps(messages), "gen_ai.output.messages": dumps(output)}
    return {
        "langfuse.observation.type": "generation",
        "langfuse.observation.input": dumps(request),
        "langfuse.observation.output": dumps(output),
    }


class RolledBack(Exception):
    """Ends an example's transaction."""


@settings(max_examples=300, suppress_health_check=list(HealthCheck), deadline=None, database=None)
@given(
    request=REQUEST,
    attributes=st.dictionaries(ATTRIBUTES, st.one_of(LEAF, JSONISH.map(dumps)), max_size=5),
    dialect=st.sampled_from(["raw", "gen_ai", "langfuse"]),
    session=st.dictionaries(st.sampled_from(["session.id", "langfuse.session.id"]), TEXT),
    output=JSONISH,
)
def check_any_capture(
    world: World,
    request: dict[str, Any],
    attributes: dict[str, Any],
    dialect: str,
    session: dict[str, str],
    output: Any,
) -> None:
    attributes = {**attributes, **span_attributes(dialect, request, output)}
    generation = {
        "id": "g",
        "traceId": str(attributes.get("session.id", "trace")),
        "model": attributes.get("gen_ai.request.model"),
        "input": request["messages"],
        "output": output,
        "usageDetails": {"input": attributes.get("gen_ai.usage.input_tokens")},
    }
    update = {"id": "g", "usage": {"input": attributes.get("gen_ai.usage.output_tokens")}}
    batch = [
        {"id": "e1", "type": "generation-create", "body": generation},
        {"id": "e2", "type": "generation-update", "body": update},
    ]
    try:
        with transaction.atomic():
            span = Span("a" * 32, "b" * 16, "chat", 1, attributes, (), session)
            result = spans_ingest(project=world.project, spans=[span])
            assert all(reason for _, reason in result.rejected)
            outcomes = langfuse_batch_ingest(project=world.project, batch=batch)
            assert all(o.message for o in outcomes if o.status >= 400)
            raise RolledBack
    except RolledBack:
        pass


def test_any_span_or_generation_is_stored_or_rejected_naming_why(world: World) -> None:
    check_any_capture(world)
