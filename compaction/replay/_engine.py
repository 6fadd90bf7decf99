"""The replay itself: the recorded calls walked under a policy, as managed mode would send them."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sized
from dataclasses import dataclass, replace
from typing import Any

from compaction.cache import ModelPrice
from compaction.errors import CompactionError, StrategyError
from compaction.facts import KINDS, Fact, text_facts
from compaction.messages import without_cache_markers
from compaction.messages.model import Context, Message, Part
from compaction.regions import Budget, Policy, budget, find_artifact_pointers
from compaction.replay._cache import CACHE_RULES, anthropic_cached, openai_cached
from compaction.replay._meter import Meter, Sent, part_texts
from compaction.replay._model import (
    MAX_FACT_EXAMPLES,
    Compaction,
    FactsLost,
    LostFact,
    PlanFailure,
    ReplayPolicy,
    ReplayResult,
    ReplayTurn,
    TurnReplay,
)
from compaction.strategies import Plan, Strategy, get_strategy
from compaction.summarizers import FactSummarizer, Summarizer
from compaction.tokens import TokenCounter

#: The largest token trigger a policy may name.
MAX_TRIGGER_TOKENS = 100_000_000
#: ``progress`` is called after at least this share of the turns, or this many seconds.
PROGRESS_SHARE = 0.02
PROGRESS_SECONDS = 0.5


@dataclass(frozen=True)
class _Rewrite:
    """What managed mode substitutes: the agent's ``original`` messages by ``replacement``, and
    its system prompt ``system`` by ``new_system`` (a summary put into it)."""

    original: tuple[Message, ...]
    replacement: tuple[Message, ...]
    system: tuple[Part, ...]
    new_system: tuple[Part, ...]

    def applied(self, context: Context, meter: Meter) -> Context | None:
        """What the model receives for the agent's ``context``; None when it no longer starts
        with the original (the agent compacted itself or branched)."""
        if not meter.starts_with(context.messages, self.original):
            return None
        system = context.system
        if system is self.system or system == self.system:
            system = self.new_system
        messages = self.replacement + context.messages[len(self.original) :]
        return replace(context, messages=messages, system=system)


def _checked(
    policy: ReplayPolicy, cache_rule: str
) -> tuple[Strategy | None, dict[str, Any], Policy]:
    if cache_rule not in CACHE_RULES:
        raise StrategyError("cache_rule", f"must be one of {', '.join(CACHE_RULES)}")
    never = Policy("as-recorded", "tokens", 0)
    if policy.strategy is None:
        return None, {}, never
    strategy = get_strategy(policy.strategy)
    params = strategy.validate(policy.params)
    fraction, tokens = policy.trigger_fraction, policy.trigger_tokens
    if (fraction is None) == (tokens is None):
        raise StrategyError("trigger", "give one of trigger_fraction and trigger_tokens")
    if fraction is not None:
        if isinstance(fraction, bool) or not isinstance(fraction, int | float):
            raise StrategyError("trigger_fraction", "must be a number")
        if not 0 < fraction <= 1:
            raise StrategyError("trigger_fraction", "must be above 0 and at most 1")
        return strategy, params, Policy("replay", "ratio_of_usable", fraction, strict=True)
    if isinstance(tokens, bool) or not isinstance(tokens, int):
        raise StrategyError("trigger_tokens", "must be an integer")
    if not 1 <= tokens <= MAX_TRIGGER_TOKENS:
        raise StrategyError("trigger_tokens", f"must be between 1 and {MAX_TRIGGER_TOKENS}")
    return strategy, params, Policy("replay", "tokens", tokens, strict=True)


class _Ticker:
    """Calls ``progress`` after each :data:`PROGRESS_SHARE` of the turns or
    :data:`PROGRESS_SECONDS`, whichever comes first, and once at the end."""

    def __init__(self, progress: Callable[[int], None] | None, turns: Iterable[ReplayTurn]) -> None:
        self.progress = progress
        size = len(turns) if isinstance(turns, Sized) else 0
        self.step = max(1, int(size * PROGRESS_SHARE)) if size else 0
        self.done = 0
        self.at = time.monotonic()

    def tick(self, n: int) -> None:
        if self.progress is None:
            return
        now = time.monotonic()
        if (self.step and n - self.done >= self.step) or now - self.at >= PROGRESS_SECONDS:
            self.progress(n)
            self.done, self.at = n, now

    def end(self, n: int) -> None:
        if self.progress is not None and n != self.done:
            self.progress(n)


def _pointed(plan: Plan, before: Context) -> set[Fact]:
    """The facts of the plan's artifacts that its result points at (new messages and a changed
    system prompt are where such pointers are)."""
    if not plan.artifacts:
        return set()
    seen = {id(m) for m in before.messages}
    parts: list[Part] = [p for m in plan.context.messages if id(m) not in seen for p in m.parts]
    if plan.context.system != before.system:
        parts.extend(plan.context.system)
    pointers = {
        found
        for p in parts
        for text in part_texts(p)
        for _, _, found in find_artifact_pointers(text)
    }
    if not pointers:
        return set()
    lengths = {len(p) for p in pointers}
    facts: set[Fact] = set()
    for artifact in plan.artifacts:
        if any(artifact.id[:n] in pointers for n in lengths):
            facts |= text_facts(artifact.content)
    return facts


def _facts_lost(lost: Mapping[Fact, int], last: set[Fact]) -> FactsLost:
    gone = sorted(
        (
            (turn, KINDS.index(kind), kind, text)
            for (kind, text), turn in lost.items()
            if (kind, text) not in last
        ),
    )
    by_kind = dict.fromkeys(KINDS, 0)
    for _, _, kind, _ in gone:
        by_kind[kind] += 1
    examples = tuple(LostFact(kind, text, turn) for turn, _, kind, text in gone[:MAX_FACT_EXAMPLES])
    return FactsLost(len(gone), by_kind, examples)


def replay(
    turns: Iterable[ReplayTurn],
    *,
    policy: ReplayPolicy,
    counter: TokenCounter,
    cache_rule: str = "openai",
    price: ModelPrice | None = None,
    summarizer: Summarizer | None = None,
    progress: Callable[[int], None] | None = None,
) -> ReplayResult:
    """Replay recorded ``turns`` under ``policy``: what the model would have received at each call,
    what the prompt cache would have saved, and what the compactions would have lost.

    Args:
        turns: the recorded calls in order (consecutive turns sharing message objects).
        policy: the strategy, its parameters and trigger; ``strategy=None`` is "as recorded".
        counter: the token counter of the session's encoding.
        cache_rule: ``"openai"``, ``"anthropic"`` or ``"anthropic-end"`` (see
            :mod:`compaction.replay`).
        price: the model's prices; without one every cost is ``None``.
        summarizer: for summarizing strategies; the offline ``FactSummarizer`` by default.
        progress: called with the number of turns done, now and then and at the end.

    Raises:
        StrategyError: an unknown strategy, bad parameters, a missing or bad trigger, an unknown
            cache rule (before any turn is replayed). A plan that raises is recorded instead.
    """
    strategy, params, trigger = _checked(policy, cache_rule)
    anthropic = cache_rule in ("anthropic", "anthropic-end")
    at_end = cache_rule == "anthropic-end"
    summarizer = summarizer if summarizer is not None else FactSummarizer()
    meter = Meter(counter)
    budgets: dict[tuple[int, int], Budget] = {}
    ticker = _Ticker(progress, turns)
    rows: list[TurnReplay] = []
    compactions: list[Compaction] = []
    failures: list[PlanFailure] = []
    lost: dict[Fact, int] = {}
    rewrite: _Rewrite | None = None
    previous: Sent | None = None
    previous_extra = 0
    previous_breakpoints: list[int] = []
    agent_sent: Sent | None = None  # the agent's own context, measured while a rewrite stands
    plans = 0
    n = 0
    for n, turn in enumerate(turns, 1):
        agent = turn.context
        context = agent
        if rewrite is not None:
            applied = rewrite.applied(agent, meter)
            if applied is None:
                rewrite = None
            else:
                context = applied
        sent, shared_messages = meter.measure(context, previous)
        # What the provider counted beyond ctxweb (a system prompt or tools the transcript does
        # not record, another tokenizer) is sent whatever the policy: it stays, at the head.
        extra = 0
        reported = turn.reported_input_tokens
        if reported is not None:
            own = sent
            if context is not agent:
                own = agent_sent = meter.measure(agent, agent_sent)[0]
            extra = max(0, reported - own.total)
        total = sent.total + extra
        shared = 0  # leading tokens sent as the previous call sent them
        if previous is not None:
            shared = sent.shared_with(previous, shared_messages)
            if shared:
                shared += min(extra, previous_extra)
        if anthropic:
            breakpoints = [b + extra for b in sent.breakpoints()]
            if at_end and (not breakpoints or breakpoints[-1] < total):
                breakpoints.append(total)
            read, write = anthropic_cached(
                shared=shared, breakpoints=breakpoints, previous=previous_breakpoints
            )
            previous_breakpoints = breakpoints
        else:
            read, write = openai_cached(shared), 0
        uncached = total - read - write
        cost = None
        if price is not None:
            cost = (
                uncached * price.input + write * price.cache_write + read * price.cache_read
            ) / 1e6
        limits = budgets.get((turn.window, turn.reserve))
        if limits is None:
            limits = budgets[turn.window, turn.reserve] = budget(turn.window, turn.reserve, trigger)
        compacted = False
        if strategy is not None and limits.over_trigger(total):
            plans += 1
            try:
                plan = strategy.plan(
                    context, params, counter=counter, summarizer=summarizer, memo=meter.memo
                )
            except CompactionError as error:
                failures.append(PlanFailure(turn.index, str(error) or type(error).__name__))
            else:
                if plan.edits:
                    replacement = tuple(without_cache_markers(m) for m in plan.context.messages)
                    rewrite = _Rewrite(
                        agent.messages, replacement, agent.system, plan.context.system
                    )
                    result = replace(context, messages=replacement, system=plan.context.system)
                    after = meter.measure(result, sent)[0].total + extra
                    compactions.append(Compaction(turn.index, total, after, len(plan.artifacts)))
                    removed = meter.facts(context) - meter.facts(result) - _pointed(plan, context)
                    for fact in removed:
                        lost[fact] = turn.index
                    compacted = True
        rows.append(
            TurnReplay(
                index=turn.index,
                total=total,
                regions=sent.all_regions(extra),
                usable=limits.usable,
                window=turn.window,
                over_window=turn.window > 0 and total > limits.usable,
                compacted=compacted,
                cache_read=read,
                cache_write=write,
                uncached=uncached,
                cost=cost,
            )
        )
        previous, previous_extra = sent, extra
        ticker.tick(n)
    ticker.end(n)
    facts_lost = FactsLost(by_kind=dict.fromkeys(KINDS, 0))
    if lost and previous is not None:
        facts_lost = _facts_lost(lost, meter.facts(previous.context))
    return ReplayResult(
        policy=policy,
        turns=tuple(rows),
        compactions=tuple(compactions),
        errors=tuple(failures),
        facts_lost=facts_lost,
        priced=price is not None,
        plans=plans,
    )
