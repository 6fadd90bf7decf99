"""Counting inside a plan: the same plan whatever the counter has counted before, no text
tokenized twice, and each shortcut equal to the seed's own loop."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction.messages.model import Context, Message
from compaction.regions import context_regions
from compaction.strategies import get_strategy, list_strategies
from compaction.strategies.llm4s import _MessageTokens
from compaction.strategies.picoclaw import trim_cut
from compaction.tokens import get_tokenizer
from compaction.tokens.estimators import (
    llm4s_message_tokens,
    picoclaw_message_tokens,
    picoclaw_tooldefs_tokens,
)
from tests.support.messages import PARAMS, Counter, atc, contexts, t, u

CL100K = get_tokenizer("cl100k_base")


class SpyTokenizer:
    """cl100k, recording every text it is asked to count."""

    name = CL100K.name

    def __init__(self) -> None:
        self.texts: list[str] = []

    def count(self, text: str) -> int:
        self.texts.append(text)
        return CL100K.count(text)

    def encode(self, text: str) -> list[int]:
        return CL100K.encode(text)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(contexts())
def test_a_plan_is_the_same_with_a_cold_and_a_warm_counter(context: Context) -> None:
    warm = Counter(CL100K)
    context_regions(context, warm)
    for strategy in list_strategies():
        params = PARAMS.get(strategy.id, {})
        cold = strategy.plan(context, params, counter=Counter(CL100K))
        assert strategy.plan(context, params, counter=warm) == cold, strategy.id
        assert strategy.plan(context, params, counter=warm) == cold, strategy.id


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(contexts())
def test_a_plan_tokenizes_each_text_once(context: Context) -> None:
    for strategy in list_strategies():
        spy = SpyTokenizer()
        counter = Counter(spy)
        params = PARAMS.get(strategy.id, {})
        strategy.plan(context, params, counter=counter)
        assert len(spy.texts) == len(set(spy.texts)), strategy.id
        tokenized = len(spy.texts)
        strategy.plan(context, params, counter=counter)
        assert len(spy.texts) == tokenized, strategy.id  # all from the counter's cache


def test_llm4s_counts_each_message_object_once() -> None:
    calls: list[str] = []

    def quarter(text: str) -> int:
        return len(text) // 4

    def count(text: str) -> int:
        calls.append(text)
        return quarter(text)

    tokens = _MessageTokens(count)
    message, equal = atc("c1", text="calling"), atc("c1", text="calling")

    assert tokens(message) == tokens(message) == llm4s_message_tokens(message, quarter)
    assert len(calls) == 3  # text, tool name, arguments
    assert tokens(equal) == tokens(message)
    assert len(calls) == 6
    assert tokens.conversation([message, equal]) == 2 * tokens(message) + 10


def _seed_trim(context: Context, window: int, max_tokens: int) -> list[Message]:
    """picoclaw's trimHistoryToFitContextWindow as written: re-estimate after every cut."""
    system = [m for m in context.messages if m.role in ("system", "developer")]
    history = [m for m in context.messages if m.role not in ("system", "developer")]

    def over(kept: list[Message]) -> bool:
        total = sum(picoclaw_message_tokens(m) for m in (*system, *kept))
        return total + picoclaw_tooldefs_tokens(context.tools) + max_tokens > window

    start = 0
    while over(history[start:]):
        if start >= len(history):
            break
        start += trim_cut(history[start:])
    return history[start:]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(contexts(), st.integers(1, 40_000), st.integers(0, 2_000))
def test_picoclaw_trim_cuts_where_the_seeds_loop_cuts(
    context: Context, window: int, max_tokens: int
) -> None:
    params = {"context_window": window, "max_tokens": max_tokens}
    plan = get_strategy("picoclaw-trim").plan(context, params, counter=Counter(CL100K))
    kept = [m for m in plan.context.messages if m.role not in ("system", "developer")]
    assert kept == _seed_trim(context, window, max_tokens)


def test_picoclaw_trim_cuts_turn_by_turn() -> None:
    history = [u("q1 " * 400), atc("c1"), t("c1", "r " * 400), u("q2 " * 400), u("q3")]
    context = Context("openai-chat", tuple(history))
    for window in (10, 200, 400, 600, 800, 1200, 5000):
        params = {"context_window": window, "max_tokens": 0}
        plan = get_strategy("picoclaw-trim").plan(context, params, counter=Counter(CL100K))
        assert list(plan.context.messages) == _seed_trim(context, window, 0), window
