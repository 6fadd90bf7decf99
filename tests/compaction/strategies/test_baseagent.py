"""BaseAgent and OpenCode conformance (specs §1, §1a): prune, middle-out and compact."""

from __future__ import annotations

from compaction.strategies import get_strategy
from compaction.strategies.baseagent import (
    PRUNE_MARKER,
    SUMMARY_PREFIX,
    middle_out_truncate,
    prune_targets,
)
from tests.support.messages import a, atc, ctx, sys, t, u


def test_opencode_prune_clears_an_old_big_output():
    """OpenCode's test: U first, A with bash output x*200000, U second, U third -> compacted."""
    messages = (u("first"), atc("b1", name="bash"), t("b1", "x" * 200_000), u("second"), u("third"))
    assert prune_targets(messages) == [(2, 0)]


def test_prune_needs_strictly_more_than_40k_and_20k():
    # 240,000 chars = 60,000 tokens: crosses 40K, the crossing output is pruned whole (60K > 20K).
    old = (u("q"), atc("c1"), t("c1", "x" * 160_000), atc("c2"), t("c2", "x" * 80_000))
    recent = (u("r1"), a("ok"), u("r2"))
    assert prune_targets(old + recent) == [(2, 0)]
    # Exactly 40,000 protected tokens and 20,000 prunable: neither is strictly over, nothing.
    exact = (u("q"), atc("c1"), t("c1", "x" * 80_000), atc("c2"), t("c2", "x" * 160_000))
    assert prune_targets(exact + recent) == []


def test_prune_counts_every_user_message_as_a_turn():
    messages = (u("q"), atc("c1"), t("c1", "x" * 400_000), u("image injected"))
    assert prune_targets(messages) == []  # only 1 user message after the output


def test_prune_stops_at_an_already_cleared_output(counter):
    messages = (
        u("q"),
        atc("c0"),
        t("c0", "x" * 400_000),
        atc("c1"),
        t("c1", PRUNE_MARKER),
        atc("c2"),
        t("c2", "y" * 400_000),
        u("r1"),
        u("r2"),
    )
    assert prune_targets(messages) == [(6, 0)] or prune_targets(messages) == []
    assert (2, 0) not in prune_targets(messages)


def test_prune_plan_keeps_the_original_as_an_artifact(counter):
    context = ctx(
        sys("s"),
        u("first"),
        atc("b1", name="bash"),
        t("b1", "x" * 200_000),
        u("second"),
        u("third"),
    )
    plan = get_strategy("baseagent-prune").plan(context, {}, counter=counter)
    assert plan.context.messages[3].tool_results[0].text == PRUNE_MARKER
    (edit,) = plan.edits
    assert (edit.kind, edit.message_index, edit.part_index) == ("clear", 3, 0)
    (artifact,) = plan.artifacts
    assert artifact.id == edit.artifact_id
    assert artifact.content == "x" * 200_000
    assert plan.after.total < plan.before.total


def test_middle_out_is_byte_based_with_the_exact_marker():
    text = "a" * 10_000 + "b" * 4 + "c" * 10_000
    out = middle_out_truncate(text)
    assert out == "a" * 5000 + "\n\n...2501 tokens truncated...\n\n" + "c" * 5000
    assert middle_out_truncate("x" * 10_003) == "x" * 10_003  # floor(10003/4) = 2500, kept


def test_middle_out_drops_broken_utf8_characters():
    out = middle_out_truncate("a" + "é" * 6000 + "z", max_tokens=1)  # 4 bytes kept: 2 + 2
    head, _, tail = out.partition("\n\n...")
    assert head == "a"  # the cut half of the first "é" is dropped
    assert tail.endswith("tokens truncated...\n\nz")


def test_compact_replaces_history_with_system_and_summary(counter):
    context = ctx(sys("You are an agent."), u("Fix src/app.py"), a("done"))
    plan = get_strategy("baseagent-compact").plan(context, {"force": True}, counter=counter)
    roles = [m.role for m in plan.context.messages]
    assert roles == ["system", "user"]
    assert plan.context.messages[1].text.startswith(SUMMARY_PREFIX)
    assert "src/app.py" in plan.context.messages[1].text


def test_compact_does_nothing_under_the_threshold(counter):
    context = ctx(sys("s"), u("hi"), a("hello"))
    plan = get_strategy("baseagent-compact").plan(context, {}, counter=counter)
    assert plan.context == context
    assert plan.edits == ()
