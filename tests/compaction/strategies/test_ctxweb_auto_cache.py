"""ctxweb-auto and the provider's prompt cache: ``cache`` = ignore, keep_prefix or prefer."""

from __future__ import annotations

from dataclasses import replace

from compaction.cache import cache_impact
from compaction.messages.model import TextPart
from compaction.strategies import get_strategy
from tests.support.messages import a, atc, ctx, sys, t, u


def _context(turns=12, size=3000, breakpoint_at=None):
    messages = [sys("You are an agent.")]
    for i in range(turns):
        messages += [
            u(f"step {i}: edit src/mod{i}.py"),
            atc(f"c{i}", name="bash"),
            t(f"c{i}", f"ERROR: failure {i} in tests/test_{i}.py\n" + "z" * size),
            a(f"fixed {i}"),
        ]
    if breakpoint_at is not None:
        marked = messages[breakpoint_at]
        part = replace(marked.parts[0], extra={"cache_control": {"type": "ephemeral"}})
        messages[breakpoint_at] = replace(marked, parts=(part, *marked.parts[1:]))
    return ctx(*messages, fmt="anthropic-messages")


def _edited(plan):
    return {e.message_index for e in plan.edits if e.kind != "insert-summary"}


def test_keep_prefix_edits_nothing_before_the_last_cache_breakpoint(counter):
    context = _context(breakpoint_at=20)
    target = 15_000
    plan = get_strategy("ctxweb-auto").plan(
        context, {"target_tokens": target, "cache": "keep_prefix"}, counter=counter
    )
    assert plan.edits
    assert min(_edited(plan)) > 20
    assert plan.context.messages[:21] == context.messages[:21]
    impact = cache_impact(context, plan.context, counter)
    assert impact.prefix_messages >= 21
    ignoring = get_strategy("ctxweb-auto").plan(context, {"target_tokens": target}, counter=counter)
    assert cache_impact(context, ignoring.context, counter).prefix_tokens < impact.prefix_tokens


def test_keep_prefix_says_so_when_the_target_needs_the_prefix(counter):
    context = _context(breakpoint_at=44)
    plan = get_strategy("ctxweb-auto").plan(
        context, {"target_tokens": 3000, "cache": "keep_prefix"}, counter=counter
    )
    assert plan.after.total > 3000
    assert plan.context.messages[:45] == context.messages[:45]
    assert any("cache=keep_prefix" in w and "cannot be met" in w for w in plan.warnings)


def test_prefer_keeps_the_prefix_until_the_target_needs_it(counter):
    context = _context(breakpoint_at=44)
    plan = get_strategy("ctxweb-auto").plan(
        context, {"target_tokens": 3000, "cache": "prefer"}, counter=counter
    )
    assert plan.after.total <= 3000
    assert any("cache=prefer" in w for w in plan.warnings)
    easy = get_strategy("ctxweb-auto").plan(
        context, {"target_tokens": 30_000, "cache": "prefer"}, counter=counter
    )
    assert easy.after.total <= 30_000
    assert easy.context.messages[:45] == context.messages[:45]


def test_a_prefix_in_tokens_protects_the_messages_inside_it(counter):
    context = _context()
    plan = get_strategy("ctxweb-auto").plan(
        context,
        {"target_tokens": 15_000, "cache": "keep_prefix", "cache_prefix_tokens": 8000},
        counter=counter,
    )
    impact = cache_impact(context, plan.context, counter)
    assert impact.prefix_tokens >= 7000
    assert impact.prefix_tokens <= 8000


def test_without_a_breakpoint_keep_prefix_warns_and_keeps_nothing(counter):
    context = _context()
    plan = get_strategy("ctxweb-auto").plan(
        context, {"target_tokens": 15_000, "cache": "keep_prefix"}, counter=counter
    )
    assert plan.after.total <= 15_000
    assert any("no cache_control breakpoint" in w for w in plan.warnings)


def test_the_text_part_breakpoint_is_found_on_a_user_message(counter):
    from compaction.cache import last_breakpoint

    context = _context(breakpoint_at=9)
    assert last_breakpoint(context) == 9
    assert isinstance(context.messages[9].parts[0], TextPart)
    assert last_breakpoint(_context()) == -1
