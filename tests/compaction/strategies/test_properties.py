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
from tests.support.messages import COUNTER, PARAMS, contexts

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
