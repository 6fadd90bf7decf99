"""picoclaw conformance (specs §2.5): Legacy Compact and trimHistoryToFitContextWindow."""

from __future__ import annotations

from compaction.strategies import get_strategy
from compaction.strategies.picoclaw import CONTEXT_SUMMARY_PREFIX
from compaction.tokens.estimators import picoclaw_message_tokens
from tests.support.messages import a, ctx, u


def _summary(plan) -> str:
    first = plan.context.messages[0]
    assert first.role == "system"
    return first.text


def test_force_compression_drops_the_oldest_half_of_turns(counter):
    context = ctx(u("msg 1"), a("resp 1"), u("msg 2"), a("resp 2"), u("msg 3"))
    plan = get_strategy("picoclaw-force-compress").plan(context, {}, counter=counter)
    history = [m.text for m in plan.context.messages if m.role != "system"]
    assert history == ["msg 2", "resp 2", "msg 3"]
    summary = _summary(plan)
    assert summary.startswith(CONTEXT_SUMMARY_PREFIX)
    assert "[Emergency compression dropped 2 oldest messages due to context limit]" in summary


def test_force_compression_leaves_short_histories(counter):
    for context in (ctx(u("only one")), ctx(u("q"), a("r"))):
        plan = get_strategy("picoclaw-force-compress").plan(context, {}, counter=counter)
        assert plan.context == context


def test_post_turn_summarize_needs_a_trigger(counter):
    context = ctx(u("q1"), a("a1"))
    assert get_strategy("picoclaw-summarize").plan(context, {}, counter=counter).context == context


def test_post_turn_summarize_cuts_at_a_safe_boundary(counter):
    context = ctx(u("q1"), a("a1"), u("q2"), a("a2"), u("q3"), a("a3"))
    params = {"context_window": 8000, "message_threshold": 2}
    plan = get_strategy("picoclaw-summarize").plan(context, params, counter=counter)
    history = [m.text for m in plan.context.messages if m.role != "system"]
    assert history == ["q2", "a2", "q3", "a3"]
    assert CONTEXT_SUMMARY_PREFIX in _summary(plan)


def test_trim_drops_the_first_turn_to_fit(counter):
    messages = [
        u("u1 " * 120),
        a("a1 " * 120),
        u("u2 " * 120),
        a("a2 " * 120),
        u("u3 " * 120),
        a("a3 " * 120),
    ]
    assert [picoclaw_message_tokens(m) for m in messages] == [148] * 6
    plan = get_strategy("picoclaw-trim").plan(
        ctx(*messages), {"context_window": 700, "max_tokens": 0}, counter=counter
    )
    assert [m.text for m in plan.context.messages] == [m.text for m in messages[2:]]


def test_trim_can_empty_the_history(counter):
    messages = [u("oversized " * 200), a("oversized " * 200)]
    assert picoclaw_message_tokens(messages[0]) == 804
    plan = get_strategy("picoclaw-trim").plan(
        ctx(*messages), {"context_window": 200, "max_tokens": 0}, counter=counter
    )
    assert plan.context.messages == ()
