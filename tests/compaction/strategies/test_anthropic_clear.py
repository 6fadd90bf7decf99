"""anthropic-clear-tool-uses: Anthropic's documented clear_tool_uses_20250919 behaviour."""

from __future__ import annotations

from compaction.regions import ANTHROPIC_CLEARED_MARKER
from compaction.strategies import get_strategy
from tests.support.messages import a, atc, ctx, t, u


def _context():
    messages = [u("go")]
    for i in range(6):
        messages += [atc(f"c{i}", name="grep" if i == 0 else "bash"), t(f"c{i}", f"out {i} " * 500)]
    return ctx(*messages, a("done"))


def test_under_the_trigger_nothing_changes(counter):
    plan = get_strategy("anthropic-clear-tool-uses").plan(_context(), {}, counter=counter)
    assert plan.edits == ()


def test_it_keeps_the_most_recent_uses_and_clears_the_rest(counter):
    params = {"trigger": 100, "keep": 3, "exclude_tools": ["grep"]}
    plan = get_strategy("anthropic-clear-tool-uses").plan(_context(), params, counter=counter)
    texts = [m.tool_results[0].text for m in plan.context.messages if m.role == "tool"]
    assert texts[0].startswith("out 0")  # excluded tool
    assert texts[1:3] == [ANTHROPIC_CLEARED_MARKER] * 2
    assert all(x.startswith("out") for x in texts[3:])
    assert len(plan.artifacts) == 2


def test_clear_at_least_makes_it_all_or_nothing(counter):
    params = {"trigger": 100, "clear_at_least": 10**6}
    plan = get_strategy("anthropic-clear-tool-uses").plan(_context(), params, counter=counter)
    assert plan.edits == ()
    assert plan.warnings


def test_clear_tool_inputs(counter):
    params = {"trigger": 100, "keep": 5, "clear_tool_inputs": True}
    plan = get_strategy("anthropic-clear-tool-uses").plan(_context(), params, counter=counter)
    assert plan.context.messages[1].tool_calls[0].arguments == "{}"
