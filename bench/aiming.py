"""How ``bench/strategies.py`` aims each strategy at a token target (:func:`aim`), and the token
counter it counts with."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from compaction.messages.model import Context, Message, TextPart
from compaction.regions import context_regions
from compaction.strategies import Plan, get_strategy
from compaction.summarizers import FactSummarizer
from compaction.tokens import REQUEST_OVERHEAD, TokenCounter, get_tokenizer
from compaction.tokens.estimators import baseagent_message_tokens
from compaction.turns import is_user_turn_start

#: Variants: a label, the strategy and the parameters added to its aim.
VARIANTS = {"ctxweb-auto verbatim": ("ctxweb-auto", {"latest_turn": "verbatim"})}


class Counter(TokenCounter):
    """A counter with the request overhead :func:`context_regions` reads from the counter."""

    REQUEST_OVERHEAD = REQUEST_OVERHEAD


def new_counter(encoding: str = "cl100k_base") -> Counter:
    return Counter(get_tokenizer(encoding))


def _tokens(context: Context, counter: Counter, messages: list[Message]) -> int:
    return int(context_regions(replace(context, messages=tuple(messages)), counter).total)


def _lead(messages: tuple[Message, ...]) -> int:
    lead = 0
    while lead < len(messages) and messages[lead].role in ("system", "developer"):
        lead += 1
    return lead


@dataclass
class Run:
    plan: Plan
    params: dict[str, Any]
    tries: int = 1
    notes: list[str] = field(default_factory=list)


def _calibrated(
    strategy_id: str,
    context: Context,
    counter: Counter,
    target: int,
    knob: int,
    params: Callable[[int], dict[str, Any]],
    floor: int,
) -> Run:
    """Plan with ``params(knob)``; while the result is over the target, lower the knob by the
    overshoot and plan again (up to 4 tries): the strategy's own budget, aimed at the target."""
    strategy = get_strategy(strategy_id)
    run = None
    for attempt in range(1, 5):
        chosen = params(max(knob, floor))
        plan = strategy.plan(context, chosen, counter=counter, summarizer=FactSummarizer())
        run = Run(plan, chosen, attempt)
        over = int(plan.after.total) - target
        if over <= 0 or knob <= floor:
            break
        knob -= over
    assert run is not None
    return run


def aim(strategy_id: str, context: Context, counter: Counter, target: int) -> Run:
    """Plan ``strategy_id`` on ``context`` with the parameters that aim it at ``target``.

    - ``ctxweb-auto``: ``target_tokens`` = the target.
    - ``llm4s-pipeline``: ``budget`` = the target minus what its conversation does not hold
      (top-level system prompt, tools, leading system messages), lowered by the overshoot if it
      lands above.
    - ``nanobot-trim``: ``budget`` (old-history tokens) = the target minus the system message and
      the current user turn, which nanobot never trims; lowered by the overshoot if it lands above.
    - ``copaw-compact``: no target; ``compact_ratio`` 0.3 and ``reserve_ratio`` 0.3 (their limits)
      with ``max_input_length`` sized so the recent tokens kept verbatim are the target minus the
      system prompt and a summary allowance; lowered by the overshoot if it lands above.
    - ``baseagent-compact``: no target; it summarizes everything once over its trigger, so
      ``context_limit`` = its own estimate of the context, ``output_reserve`` 0 and ``threshold``
      = the fraction make the trigger the target (prune at its defaults).
    """
    messages = context.messages
    lead = _lead(messages)
    fixed = _tokens(context, counter, list(messages[:lead]))
    if strategy_id in VARIANTS:
        base, extra = VARIANTS[strategy_id]
        params = {"target_tokens": target, **extra}
        plan = get_strategy(base).plan(
            context, params, counter=counter, summarizer=FactSummarizer()
        )
        return Run(plan, params)
    if strategy_id == "ctxweb-auto":
        params = {"target_tokens": target}
        plan = get_strategy(strategy_id).plan(
            context, params, counter=counter, summarizer=FactSummarizer()
        )
        return Run(plan, params)
    if strategy_id == "baseagent-compact":
        estimate = sum(baseagent_message_tokens(m) for m in messages)
        if context.system:
            estimate += baseagent_message_tokens(Message("system", context.system))
        total = int(context_regions(context, counter).total)
        params = {
            "context_limit": max(estimate, 1000),
            "output_reserve": 0,
            "threshold": max(min(target / total, 1.0), 0.01),
        }
        plan = get_strategy(strategy_id).plan(
            context, params, counter=counter, summarizer=FactSummarizer()
        )
        return Run(plan, params)
    if strategy_id == "llm4s-pipeline":
        return _calibrated(
            strategy_id, context, counter, target, target - fixed, lambda k: {"budget": k}, 1
        )
    if strategy_id == "nanobot-trim":
        starts = [i for i, m in enumerate(messages) if is_user_turn_start(m)]
        current = list(messages[starts[-1] :]) if starts else []
        head = [] if context.system else list(messages[:1])
        kept = _tokens(context, counter, head + current)
        run = _calibrated(
            strategy_id, context, counter, target, target - kept, lambda k: {"budget": k}, 500
        )
        if target - kept < 500:
            run.notes.append("current turn alone is over the target")
        return run
    if strategy_id == "copaw-compact":
        from compaction.tokens.estimators import copaw_message_tokens, copaw_text_tokens

        body = [m for m in messages if m.role not in ("system", "developer")]
        body_est = sum(copaw_message_tokens(m) for m in body)
        system_est = copaw_text_tokens(
            "\n".join(
                [p.text for p in context.system if isinstance(p, TextPart)]
                + [m.text for m in messages if m.role in ("system", "developer")]
            )
        )
        ratio = body_est / max(_tokens(context, counter, body), 1)

        def copaw_params(reserve: int) -> dict[str, Any]:
            # reserve (cl100k) -> copaw's bytes/3.75 units; the window is sized so the reserve
            # is at most 30% of it and the threshold (compact_ratio × window) sits just under
            # the context's own estimate, above the system prompt, so it fires.
            wanted = max(reserve * ratio, 1)
            window = max(math.ceil(wanted / 0.3), math.ceil(system_est / 0.9) + 1, 1000)
            window = min(window, 10_000_000)
            fire = (system_est + body_est * 0.98) / window
            return {
                "max_input_length": window,
                "compact_ratio": round(min(max(fire, 0.3), 0.9), 4),
                "reserve_ratio": round(min(max(wanted / window, 0.05), 0.3), 4),
            }

        return _calibrated(
            strategy_id, context, counter, target, target - fixed - 1500, copaw_params, 1
        )
    raise ValueError(strategy_id)
