"""The demo session generator: deterministic, parseable, growing; its ingestion stays cheap."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from compaction.messages import parse
from compaction.regions import BASEAGENT_SUMMARY_PREFIX
from ctxweb.accounts.models import Project
from ctxweb.contexts import services
from ctxweb.contexts.demo import coding_session
from ctxweb.contexts.models import Turn


def test_the_same_seed_gives_the_same_session() -> None:
    first = coding_session(25, seed=5, target_tokens=10_000)
    assert json.dumps(first) == json.dumps(coding_session(25, seed=5, target_tokens=10_000))
    assert json.dumps(first) != json.dumps(coding_session(25, seed=6, target_tokens=10_000))


@pytest.mark.parametrize("format", ["openai-chat", "anthropic-messages"])
def test_every_body_parses_and_the_context_only_grows(format: str) -> None:
    bodies = coding_session(40, seed=3, target_tokens=15_000, format=format)  # type: ignore[arg-type]
    sizes = []
    previous: tuple[object, ...] = ()
    for body in bodies:
        assert body["format"] == format
        context = parse(format, body["request"])
        # Each call resends the previous call's messages unchanged, then adds to them.
        assert context.messages[: len(previous)] == previous
        previous = context.messages
        sizes.append(len(json.dumps(body["request"])))
    assert sizes == sorted(sizes)
    assert 0.7 < bodies[-1]["usage"].get("prompt_tokens", 15_000) / 15_000 < 1.3


def test_a_compaction_drops_the_context_to_system_and_summary() -> None:
    bodies = coding_session(30, seed=2, target_tokens=12_000, compact_at=20)
    usage = [b["usage"]["prompt_tokens"] for b in bodies]
    assert usage[:20] == sorted(usage[:20])
    assert usage[20:] == sorted(usage[20:])
    assert usage[20] < usage[19] * 0.3
    messages = bodies[20]["request"]["messages"]
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[1]["content"].startswith(BASEAGENT_SUMMARY_PREFIX)
    history = coding_session(
        30, seed=2, target_tokens=12_000, compact_at=20, summary_marker="history"
    )
    assert history[20]["request"]["messages"][1]["content"].startswith("[HISTORY_SUMMARY]")


@pytest.mark.django_db
def test_ingesting_a_turn_costs_the_same_queries_late_as_early() -> None:
    project = Project.objects.create(name="demo")
    counts = []
    for body in coding_session(30, seed=4, target_tokens=20_000):
        context = parse(body["format"], body["request"])
        with CaptureQueriesContext(connection) as queries:
            services.turn_ingest(
                project=project,
                external_id="s",
                context=context,
                model=body["model"],
                usage=body["usage"],
                turn_id=body["turn_id"],
                body=body,
            )
        counts.append(len(queries))
    assert Turn.objects.filter(session__external_id="s").count() == 30
    assert abs(counts[29] - counts[5]) <= 2, counts
    assert max(counts[1:]) <= counts[5] + 4, counts
