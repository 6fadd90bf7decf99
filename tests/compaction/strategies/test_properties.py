"""Properties of every strategy over generated contexts (hypothesis).

For each strategy: deterministic; message order preserved (kept messages are a subsequence of the
input, apart from inserted summaries); tokens after ≤ before or a warning; no orphaned tool pair
unless the seed orphans (then the plan warns); the system prompt kept.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction.messages.model import Context, Message
from compaction.strategies import get_strategy, list_strategies
from compaction.turns import orphans

from .builders import a, atc, sys, t, u
from .conftest import COUNTER

_words = st.text(alphabet="abc xyz/._-\n0123456789É", min_size=0, max_size=400)


@st.composite
def contexts(draw: st.DrawFn) -> Context:
    messages: list[Message] = [sys(draw(_words))] if draw(st.booleans()) else []
    counter = 0
    for _ in range(draw(st.integers(0, 8))):
        messages.append(u(draw(_words)))
        for _ in range(draw(st.integers(0, 3))):
            ids = [f"c{counter + k}" for k in range(draw(st.integers(1, 2)))]
            counter += len(ids)
            messages.append(atc(*ids))
            size = draw(st.sampled_from([10, 3000, 12_000, 50_000]))
            messages.extend(t(i, draw(_words) + "x" * size) for i in ids)
        if draw(st.booleans()):
            messages.append(a(draw(_words)))
    return Context("openai-chat", tuple(messages))


PARAMS = {
    "baseagent-prune": {"protect_tokens": 2000, "minimum_savings": 100},
    "baseagent-compact": {"context_limit": 20_000, "output_reserve": 1000},
    "opencode-prune": {"protect_tokens": 2000, "minimum_savings": 100},
    "picoclaw-summarize": {"context_window": 20_000, "message_threshold": 4},
    "picoclaw-trim": {"context_window": 20_000, "max_tokens": 1000},
    "llm4s-pipeline": {"budget": 3000},
    "nanobot-trim": {"budget": 500, "estimator": "fallback"},
    "copaw-compact": {"max_input_length": 20_000},
    "anthropic-clear-tool-uses": {"trigger": 1000, "keep": 1},
    "ctxweb-auto": {"target_tokens": 3000},
}


#: Further parameter sets checked beside each strategy's entry above (the seeds' deviations on).
EXTRA_PARAMS = {
    "llm4s-pipeline": [
        {"budget": 800, "max_semantic_blocks": 2},
        {"budget": 3000, "keep_tool_pairs": True, "no_growth": True, "digest_in_place": True},
    ],
}


def _is_subsequence(kept: list[Message], original: tuple[Message, ...]) -> bool:
    it = iter(original)
    return all(any(m == o for o in it) for m in kept)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(contexts())
def test_every_strategy_behaves(context: Context) -> None:
    runs = [
        (strategy, params)
        for strategy in list_strategies()
        for params in [PARAMS.get(strategy.id, {}), *EXTRA_PARAMS.get(strategy.id, [])]
    ]
    for strategy, params in runs:
        plan = strategy.plan(context, params, counter=COUNTER)
        assert strategy.plan(context, params, counter=COUNTER) == plan, strategy.id
        originals = {i for e in plan.edits if e.kind != "insert-summary" for i in [e.message_index]}
        untouched = [m for m in plan.context.messages if m in context.messages]
        assert _is_subsequence(untouched, context.messages), strategy.id
        assert plan.after.total <= plan.before.total or plan.warnings, strategy.id
        if orphans(context.messages).ok and not orphans(plan.context.messages).ok:
            assert plan.warnings, strategy.id
        for message in context.messages:
            if message.role == "system":
                assert any(m.role == "system" for m in plan.context.messages), strategy.id
        for edit in plan.edits:
            if edit.artifact_id is not None:
                assert any(x.id == edit.artifact_id for x in plan.artifacts), strategy.id
        del originals


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(contexts(), st.sampled_from([300, 800, 3000]), st.integers(0, 3))
def test_llm4s_with_keep_tool_pairs_never_orphans(context: Context, budget: int, k: int) -> None:
    params = {"budget": budget, "max_semantic_blocks": k, "keep_tool_pairs": True}
    plan = get_strategy("llm4s-pipeline").plan(context, params, counter=COUNTER)
    if orphans(context.messages).ok:
        assert orphans(plan.context.messages).ok
        assert not any("orphaned" in w for w in plan.warnings)
