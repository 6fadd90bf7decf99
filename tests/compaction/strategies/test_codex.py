"""Codex conformance (specs §1b, ``compact.rs`` unit tests)."""

from __future__ import annotations

from compaction.strategies import get_strategy
from compaction.strategies.codex import (
    SUMMARY_PREFIX,
    build_compacted_history,
    content_items_to_text,
)
from tests.support.messages import a, ctx, sys, u


def test_build_compacted_history_truncates_the_user_message_to_the_limit():
    out = build_compacted_history(["word " * 200], "SUMMARY", 16)
    assert len(out) == 2
    assert "tokens truncated" in out[0]
    assert out[1] == "SUMMARY"


def test_content_items_to_text():
    assert content_items_to_text(["hello", "", "world"]) == "hello\nworld"
    assert content_items_to_text([]) is None


def test_collect_keeps_real_user_text_and_drops_agents_md_and_environment(counter):
    context = ctx(
        sys("s"),
        u("# AGENTS.md instructions for /repo\nbe nice"),
        u("<environment_context>cwd</environment_context>"),
        u("first request"),
        a("reply"),
        u("second request"),
    )
    plan = get_strategy("codex-compact").plan(context, {}, counter=counter)
    texts = [m.text for m in plan.context.messages]
    assert texts[:3] == [
        "s",
        "# AGENTS.md instructions for /repo\nbe nice",
        "<environment_context>cwd</environment_context>",
    ]
    assert texts[3:5] == ["first request", "second request"]
    assert texts[5].startswith(SUMMARY_PREFIX + "\n")
    assert "reply" not in texts
    assert "  assist with your own analysis:" in SUMMARY_PREFIX
