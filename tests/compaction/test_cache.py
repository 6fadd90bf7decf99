"""compaction.cache: the prefix a plan keeps, the tokens it rewrites, and the next call's cost."""

from __future__ import annotations

import pytest

from compaction.cache import (
    PRICES,
    CacheImpact,
    ModelPrice,
    cache_impact,
    call_cost,
    prefix_messages,
    price_for,
)
from compaction.messages.model import TextPart
from compaction.regions import context_regions
from tests.support.messages import COUNTER, Counter, ctx, sys, u


@pytest.fixture
def counter() -> Counter:
    return COUNTER


def test_the_longest_prefix_of_a_model_name_gives_its_price():
    assert price_for("gpt-4o-mini-2024-07-18") == ("gpt-4o-mini", PRICES["gpt-4o-mini"])
    assert price_for("anthropic/claude-sonnet-4-5")[0] == "claude-sonnet-4"
    assert price_for("llama-3") is None
    assert price_for(None) is None
    own = {"llama": ModelPrice(1, 1, 0.5)}
    assert price_for("llama-3", own) == ("llama", own["llama"])


def test_an_unchanged_context_keeps_its_whole_prefix(counter):
    context = ctx(sys("s"), u("hello " * 50), u("again"))
    impact = cache_impact(context, context, counter)
    assert impact.prefix_messages == 3
    assert impact.prefix_tokens == impact.after_tokens == impact.before_tokens
    assert impact.rewrite_tokens == 0


def test_an_edit_keeps_the_messages_before_it_and_rewrites_the_rest(counter):
    before = ctx(sys("s"), u("one " * 100), u("two " * 100), u("three " * 100))
    after = ctx(sys("s"), u("one " * 100), u("2"), u("three " * 100))
    impact = cache_impact(before, after, counter)
    assert prefix_messages(before, after) == 2
    head = int(context_regions(ctx(sys("s"), u("one " * 100)), counter).total)
    assert impact.prefix_tokens == head
    assert impact.rewrite_tokens == impact.after_tokens - head
    changed_system = ctx(sys("t"), *after.messages[1:])
    assert cache_impact(before, changed_system, counter).prefix_tokens == 0
    assert isinstance(before.messages[0].parts[0], TextPart)


def test_the_next_call_reads_the_prefix_and_writes_the_rest():
    impact = CacheImpact(
        before_tokens=100_000,
        after_tokens=40_000,
        prefix_messages=3,
        prefix_tokens=10_000,
        rewrite_tokens=30_000,
    )
    before, after = call_cost(impact, ModelPrice(3.0, 3.75, 0.30))
    assert before == pytest.approx(0.03)
    assert after == pytest.approx(0.003 + 0.1125)
