"""nanobot conformance (specs §4.4, ``tests/test_trim_history_for_budget.py``).

Exact counts use nanobot's documented fallback ``len(payload)//4 + 4`` (:func:`fallback_tokens`),
which differs from cl100k; the cases only depend on orderings and bounds.
"""

from __future__ import annotations

from compaction.strategies import get_strategy
from compaction.strategies.nanobot import clamp_budget, fallback_tokens, trim_history_for_budget
from compaction.turns import orphans
from tests.support.messages import a, atc, ctx, sys, t, u


def S():
    return sys("You are a bot.")


def call(i):
    return atc(i, name="exec", args="{}")


def test_off_or_first_iteration_returns_the_same_object():
    messages = [S(), u("x" * 2000), a("y" * 2000), u("current")]
    assert trim_history_for_budget(messages, 3, 2, 0, fallback_tokens) is messages
    assert trim_history_for_budget(messages, 3, 1, 1000, fallback_tokens) is messages
    short = [S(), u("current")]
    assert trim_history_for_budget(short, 1, 2, 1000, fallback_tokens) is short
    fits = [S(), u("short msg"), a("short reply"), u("current")]
    assert trim_history_for_budget(fits, 3, 2, 50_000, fallback_tokens) is fits


def test_forty_old_pairs_are_trimmed_under_the_budget():
    old = []
    for i in range(40):
        old += [
            u(f"old message number {i} padding extra text here"),
            a(f"reply to message {i} with more padding"),
        ]
    current = [u("current task"), call("tc1"), t("tc1", "done")]
    messages = [S(), *old, *current]
    out = trim_history_for_budget(messages, 1 + len(old), 2, 500, fallback_tokens)
    assert out[0] == messages[0]
    assert out[-3:] == current
    kept_old = out[1:-3]
    assert len(kept_old) < len(old)
    assert sum(fallback_tokens(m) for m in kept_old) <= 500


def test_no_kept_tool_result_lacks_its_call():
    old = [
        u("padding " * 200),
        call("old_tc1"),
        t("old_tc1", "short result"),
        u("recent msg"),
        a("recent reply"),
    ]
    messages = [S(), *old, u("current")]
    out = trim_history_for_budget(messages, len(messages) - 1, 2, 500, fallback_tokens)
    assert not orphans(out).results


def test_input_is_not_mutated_and_ends_are_kept():
    messages = [S(), u("x" * 2000), a("y" * 2000), u("current")]
    copy = list(messages)
    out = trim_history_for_budget(messages, 3, 2, 500, fallback_tokens)
    assert messages == copy
    assert out is not messages
    assert out[0] == messages[0]
    assert out[-1] == messages[-1]


def test_budget_one_keeps_the_current_turn_verbatim():
    current = [u("current"), call("tc1"), t("tc1", "done")]
    messages = [S(), u("x" * 2000), a("y" * 2000), *current]
    assert trim_history_for_budget(messages, 3, 2, 1, fallback_tokens)[-3:] == current


def test_loop_clamp():
    assert clamp_budget(50) == 500
    assert clamp_budget(0) == 0
    assert clamp_budget(4000) == 4000


def test_strategy_trims_old_history(counter):
    context = ctx(S(), u("x" * 4000), a("y" * 4000), u("current"))
    plan = get_strategy("nanobot-trim").plan(context, {"budget": 500}, counter=counter)
    assert [m.text for m in plan.context.messages] == ["You are a bot.", "current"]
    assert {e.kind for e in plan.edits} == {"drop"}


def test_a_history_estimated_at_once_counts_as_each_message_alone(monkeypatch):
    """The cl100k estimates of a whole history, its payloads encoded on every core, are nanobot's
    ``estimate_message_tokens`` of each message (tool results, calls and reasoning included)."""
    from compaction.messages.model import Message, ReasoningPart, TextPart, ToolResultPart
    from compaction.strategies import nanobot
    from compaction.tokens import _counter, get_tokenizer
    from compaction.tokens.estimators import nanobot_message_tokens

    monkeypatch.setattr(_counter, "PRIME_PARALLEL_CHARS", 0)
    nanobot._cl100k_estimate.cache_clear()
    results = Message(
        "user",
        (
            ToolResultPart("c1", (TextPart("out one " * 50),)),
            ToolResultPart("c2", (TextPart("out two " * 70),)),
        ),
    )
    thinking = Message("assistant", (ReasoningPart("think " * 30), TextPart("answer")))
    history = [u(f"question {k} " * (k + 1)) for k in range(30)] + [call(7), results, thinking]
    estimate = nanobot._cl100k_estimate().estimates(history)
    cl100k = get_tokenizer("cl100k_base")
    assert [estimate(m) for m in history] == [nanobot_message_tokens(m, cl100k) for m in history]
    other = u("not in the history")
    assert estimate(other) == nanobot_message_tokens(other, cl100k)
