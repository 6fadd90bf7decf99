"""ctxweb-auto: escalation, user-turn cuts, tool-pair integrity and fact keeping."""

from __future__ import annotations

import hashlib

from compaction.strategies import get_strategy
from compaction.strategies.ctxweb_auto import SUMMARY_HEADER, pointer
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


def _reachable(plan):
    """The result's text plus every artifact the result points at."""
    text = "\n".join(
        [m.text for m in plan.context.messages]
        + [p.text for m in plan.context.messages for p in m.tool_results]
    )
    pointed = [a.content for a in plan.artifacts if pointer(a.id) in text]
    return text + "\n" + "\n".join(pointed)


def test_every_fact_of_what_it_removes_stays_reachable(counter):
    context = _context(turns=60, size=200)
    plan = get_strategy("ctxweb-auto").plan(context, {"target_tokens": 1200}, counter=counter)
    assert any(e.kind == "summarize-range" for e in plan.edits)
    reachable = _reachable(plan)
    # more paths than the summary has room for (40): the full text behind its pointer keeps them
    for i in range(60):
        assert f"src/mod{i}.py" in reachable
        assert f"ERROR: failure {i} in tests/test_{i}.py" in reachable


def test_the_summary_points_at_the_full_text_of_what_it_summarized(counter):
    context = _context(turns=10, size=200)
    plan = get_strategy("ctxweb-auto").plan(context, {"target_tokens": 800}, counter=counter)
    summary = plan.context.messages[1].text
    [full] = [a for a in plan.artifacts if a.kind == "summarized_messages"]
    assert summary.endswith(pointer(full.id))
    assert "step 0: edit src/mod0.py" in full.content
    assert full.id == hashlib.sha256(full.content.encode()).hexdigest()


def test_a_second_summary_keeps_the_pointers_of_the_first(counter):
    strategy = get_strategy("ctxweb-auto")
    first = strategy.plan(_context(turns=10, size=200), {"target_tokens": 800}, counter=counter)
    [old] = [a for a in first.artifacts if a.kind == "summarized_messages"]
    grown = ctx(*first.context.messages, *_context(turns=10, size=200).messages[1:])
    second = strategy.plan(grown, {"target_tokens": 800}, counter=counter)
    summary = second.context.messages[1].text
    [new] = [a for a in second.artifacts if a.kind == "summarized_messages"]
    assert summary.count("[EXTERNALIZED:") >= 2
    assert pointer(old.id) in summary
    assert pointer(new.id) in summary
    assert orphans(second.context.messages).ok


def _agent_turn(calls=12, size=6000):
    messages = [sys("You are an agent."), u("fix the failing tests in src/")]
    for i in range(calls):
        messages += [
            atc(f"c{i}", name="bash"),
            t(f"c{i}", f"ERROR: out {i} src/f{i}.py\n" + "y" * size),
        ]
    return ctx(*messages)


def test_by_default_it_leaves_the_latest_user_turn_alone(counter):
    context = _agent_turn()
    plan = get_strategy("ctxweb-auto").plan(context, {"target_tokens": 5000}, counter=counter)
    assert plan.context.messages == context.messages
    assert any("above the target" in w for w in plan.warnings)


def test_with_latest_turn_outputs_it_externalizes_older_outputs_of_the_latest_turn(counter):
    context = _agent_turn()
    params = {"target_tokens": 6000, "latest_turn": "outputs", "keep_recent_outputs": 3}
    plan = get_strategy("ctxweb-auto").plan(context, params, counter=counter)
    messages = plan.context.messages
    assert len(messages) == len(context.messages)
    assert messages[:2] == context.messages[:2]
    assert messages[-6:] == context.messages[-6:]
    assert {e.kind for e in plan.edits} <= {"externalize", "compact-inline", "clear"}
    assert plan.after.total <= 6000
    reachable = _reachable(plan)
    for i in range(12):
        assert f"ERROR: out {i} src/f{i}.py" in reachable
    assert orphans(messages).ok
