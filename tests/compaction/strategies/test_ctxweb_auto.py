"""ctxweb-auto: escalation, user-turn cuts, tool-pair integrity and fact keeping."""

from __future__ import annotations

from compaction.strategies import get_strategy
from compaction.strategies.ctxweb_auto import SUMMARY_HEADER
from compaction.turns import orphans

from .builders import a, atc, ctx, sys, t, u


def _context(turns=20, size=3000):
    messages = [sys("You are an agent.")]
    for i in range(turns):
        messages += [
            u(f"step {i}: edit src/mod{i}.py"),
            atc(f"c{i}", name="bash"),
            t(f"c{i}", f"ERROR: failure {i} in tests/test_{i}.py\n" + "z" * size),
            a(f"fixed {i}"),
        ]
    return ctx(*messages)


def test_it_stops_after_the_lossless_step_when_that_suffices(counter):
    context = _context(size=20_000)
    before = get_strategy("ctxweb-auto").plan(context, {"target_tokens": 10**7}, counter=counter)
    assert before.edits == ()
    plan = get_strategy("ctxweb-auto").plan(context, {"target_tokens": 80_000}, counter=counter)
    assert {e.kind for e in plan.edits} == {"externalize"}
    assert plan.after.total <= 80_000
    for edit in plan.edits:
        assert any(x.id == edit.artifact_id for x in plan.artifacts)


def test_it_summarizes_old_turns_keeping_facts_and_the_latest_turn(counter):
    context = _context()
    plan = get_strategy("ctxweb-auto").plan(context, {"target_tokens": 1500}, counter=counter)
    messages = plan.context.messages
    assert messages[0] == context.messages[0]
    assert messages[1].text.startswith(SUMMARY_HEADER)
    assert "src/mod0.py" in messages[1].text
    assert messages[-4:] == context.messages[-4:]
    assert orphans(messages).ok
