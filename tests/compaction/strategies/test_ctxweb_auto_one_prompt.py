"""ctxweb-auto on a session of one prompt and its tool rounds: the latest turn is all there is,
so its protected last tool calls (``keep_recent_outputs``) give way when nothing else reaches the
target, the oldest first, externalized behind artifacts before anything lossy, no call orphaned."""

from __future__ import annotations

from compaction.strategies import get_strategy
from compaction.strategies.ctxweb_auto import pointer
from compaction.turns import orphans
from tests.support.messages import a, atc, ctx, sys, t, u

PROMPT = "Fix the failing build in src/app.py."
LOSSLESS = {"externalize", "compact-inline"}


def _output(i: int, words: int) -> str:
    return f"ERROR: failure {i} in tests/test_{i}.py\n" + "z y " * words


def one_prompt(rounds: int, words: int = 20_000):
    messages = [sys("You are an agent."), u(PROMPT)]
    for i in range(rounds):
        messages += [atc(f"c{i}", name="bash"), t(f"c{i}", _output(i, words))]
    return ctx(*messages, a("Done."))


def _results(plan) -> dict[str, str]:
    return {p.tool_call_id: p.text for m in plan.context.messages for p in m.tool_results}


def test_the_only_tool_output_gives_way_with_the_default_parameters(counter):
    context = one_prompt(1)  # about 40,000 tokens; the target is half of 100,000 - 32,000
    plan = get_strategy("ctxweb-auto").plan(context, {"context_window": 100_000}, counter=counter)
    assert plan.before.total > 34_000
    assert plan.after.total <= 34_000
    assert {e.kind for e in plan.edits} <= LOSSLESS
    [artifact] = plan.artifacts
    assert artifact.content == _output(0, 20_000)
    assert pointer(artifact.id) in _results(plan)["c0"]
    assert plan.context.messages[:3] == context.messages[:3]  # system, prompt, the call
    assert orphans(plan.context.messages).ok


def test_the_oldest_protected_output_gives_way_first(counter):
    context = one_prompt(3, words=5_000)  # three outputs of about 10,000 tokens
    target = context_total(context, counter) - 5_000
    plan = get_strategy("ctxweb-auto").plan(context, {"target_tokens": target}, counter=counter)
    assert plan.after.total <= target
    results = _results(plan)
    assert results["c0"] != _output(0, 5_000)
    assert results["c1"] == _output(1, 5_000)
    assert results["c2"] == _output(2, 5_000)
    assert {e.kind for e in plan.edits} <= LOSSLESS


def test_every_protected_output_is_externalized_before_anything_lossy(counter):
    context = one_prompt(3, words=5_000)
    plan = get_strategy("ctxweb-auto").plan(context, {"target_tokens": 4_000}, counter=counter)
    assert plan.after.total <= 4_000
    assert {e.kind for e in plan.edits} <= LOSSLESS
    assert all(_results(plan)[f"c{i}"] != _output(i, 5_000) for i in range(3))
    assert sorted(a.content for a in plan.artifacts) == sorted(_output(i, 5_000) for i in range(3))
    assert [m.role for m in plan.context.messages] == [m.role for m in context.messages]
    assert orphans(plan.context.messages).ok


def test_it_says_the_protected_calls_gave_way(counter):
    plan = get_strategy("ctxweb-auto").plan(
        one_prompt(1), {"context_window": 100_000}, counter=counter
    )
    [warning] = plan.warnings
    assert "of its last 3 tool calls (keep_recent_outputs) gave way" in warning
    assert "oldest first, each behind a pointer to its full text" in warning


def test_latest_turn_verbatim_still_keeps_them(counter):
    context = one_prompt(1)
    plan = get_strategy("ctxweb-auto").plan(
        context, {"context_window": 100_000, "latest_turn": "verbatim"}, counter=counter
    )
    assert plan.edits == ()
    assert plan.context.messages == context.messages
    assert any("remain above the target" in w for w in plan.warnings)


def test_a_later_turns_protected_outputs_stay_when_older_turns_were_shrunk(counter):
    older = [u("Look at the logs."), atc("old", name="bash"), t("old", _output(9, 5_000)), a("ok")]
    latest = [u(PROMPT), atc("new", name="bash"), t("new", _output(0, 20_000)), a("Done.")]
    context = ctx(sys("You are an agent."), *older, *latest)
    plan = get_strategy("ctxweb-auto").plan(context, {"target_tokens": 30_000}, counter=counter)
    assert _results(plan)["new"] == _output(0, 20_000)
    assert _results(plan)["old"] != _output(9, 5_000)
    assert any("remain above the target" in w for w in plan.warnings)


def context_total(context, counter) -> int:
    plan = get_strategy("ctxweb-auto").plan(context, {"target_tokens": 10**7}, counter=counter)
    return int(plan.before.total)
