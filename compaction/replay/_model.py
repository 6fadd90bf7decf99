"""What a replay takes (:class:`ReplayTurn`, :class:`ReplayPolicy`) and gives back
(:class:`ReplayResult` and its parts), all frozen; :meth:`ReplayResult.to_dict` is JSON-ready.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from compaction.messages.model import Context

#: How many examples of facts lost for good a result lists.
MAX_FACT_EXAMPLES = 20


def _params() -> Mapping[str, Any]:
    return {}


@dataclass(frozen=True)
class ReplayTurn:
    """One recorded model call, as the caller gives it.

    ``context`` is what the agent sent (its whole history); consecutive turns should share their
    message objects, which makes a turn cost a lookup per message. ``window`` and ``reserve``
    are the session's context window and output reserve at that call (0 for an unknown window).
    ``reported_input_tokens`` is the provider's input count for the call when it is known: what
    it reported beyond ctxweb's count is ``unattributed``, as ingest stores it, and stays in
    every replayed call (see :mod:`compaction.replay`).
    """

    index: int
    context: Context
    window: int
    reserve: int
    reported_input_tokens: int | None = None


@dataclass(frozen=True)
class ReplayPolicy:
    """A policy to replay: a strategy with its parameters and the trigger that fires it.

    ``strategy=None`` is "as recorded": the turns as they were sent, never compacted. Otherwise
    exactly one trigger is set: ``trigger_fraction`` of the usable limit (window minus reserve)
    or ``trigger_tokens``; the policy fires at a call whose total is strictly above it.
    ``params`` are the strategy's parameters (validated again, an error raises
    :class:`~compaction.errors.StrategyError` before any turn is replayed).
    """

    label: str
    strategy: str | None = None
    params: Mapping[str, Any] = field(default_factory=_params)
    trigger_fraction: float | None = None
    trigger_tokens: int | None = None


@dataclass(frozen=True)
class TurnReplay:
    """One call as the policy would have sent it: its tokens, regions and prompt-cache effect.

    ``regions`` holds the regions with tokens (zeros left out), adding up to ``total``.
    ``over_window``: the total is above the usable limit (a known window only). ``compacted``:
    the policy compacted after this call (the next call builds on the result). ``cost`` is
    ``None`` without a price.
    """

    index: int
    total: int
    regions: Mapping[str, int]
    usable: int
    window: int
    over_window: bool
    compacted: bool
    cache_read: int
    cache_write: int
    uncached: int
    cost: float | None

    def to_dict(self) -> dict[str, Any]:
        """The turn as JSON-ready data: ints, and the cost rounded to 6 places."""
        return {
            "index": self.index,
            "total": self.total,
            "regions": dict(self.regions),
            "usable": self.usable,
            "window": self.window,
            "over_window": self.over_window,
            "compacted": self.compacted,
            "cache_read": self.cache_read,
            "cache_write": self.cache_write,
            "uncached": self.uncached,
            "cost": None if self.cost is None else round(self.cost, 6),
        }


@dataclass(frozen=True)
class Compaction:
    """The policy fired at call ``turn``: the sent total ``before``, the total of the context the
    next call builds on ``after``, and how many ``artifacts`` the plan kept."""

    turn: int
    before: int
    after: int
    artifacts: int


@dataclass(frozen=True)
class PlanFailure:
    """A plan that raised at call ``turn`` (the replay went on without compacting)."""

    turn: int
    error: str


@dataclass(frozen=True)
class LostFact:
    """A fact removed at the compaction of call ``turn`` and never visible again."""

    kind: str
    text: str
    turn: int


@dataclass(frozen=True)
class FactsLost:
    """The facts that left the context for good: how many, by kind, and a few examples."""

    count: int = 0
    by_kind: Mapping[str, int] = field(default_factory=_params)
    examples: tuple[LostFact, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "count": self.count,
            "by_kind": dict(self.by_kind),
            "examples": [{"kind": f.kind, "text": f.text, "turn": f.turn} for f in self.examples],
        }


@dataclass(frozen=True)
class ReplayResult:
    """A whole replay: every call, the compactions, the failed plans and the facts lost."""

    policy: ReplayPolicy
    turns: tuple[TurnReplay, ...]
    compactions: tuple[Compaction, ...]
    errors: tuple[PlanFailure, ...]
    facts_lost: FactsLost
    priced: bool
    #: how many times the strategy planned (compactions, plans that edited nothing, failures)
    plans: int = 0

    @property
    def input_tokens(self) -> int:
        """Every call's total, added up."""
        return sum(t.total for t in self.turns)

    @property
    def cost(self) -> float | None:
        """The input cost of the whole session in USD, ``None`` without a price."""
        if not self.priced:
            return None
        return sum(t.cost or 0.0 for t in self.turns)

    def totals(self) -> dict[str, Any]:
        """The session's totals, the shape of ``to_dict()["totals"]``."""
        turns = self.turns
        fills = [t.total / t.usable for t in turns if t.usable > 0]
        cost = self.cost
        return {
            "input_tokens": self.input_tokens,
            "cache_read": sum(t.cache_read for t in turns),
            "cache_write": sum(t.cache_write for t in turns),
            "uncached": sum(t.uncached for t in turns),
            "cost": None if cost is None else round(cost, 6),
            "compactions": len(self.compactions),
            "peak_tokens": max((t.total for t in turns), default=0),
            "peak_fill": round(max(fills, default=0.0), 4),
            "turns_over_window": sum(1 for t in turns if t.over_window),
            "facts_lost": self.facts_lost.count,
        }

    def to_dict(self) -> dict[str, Any]:
        """The replay as JSON-ready data (see :mod:`compaction.replay` for the shape)."""
        policy = self.policy
        trigger: dict[str, Any] | None = None
        if policy.strategy is not None:
            if policy.trigger_fraction is not None:
                trigger = {"fraction": policy.trigger_fraction}
            else:
                trigger = {"tokens": policy.trigger_tokens}
        return {
            "label": policy.label,
            "strategy": policy.strategy,
            "params": _plain(policy.params),
            "trigger": trigger,
            "turns": [t.to_dict() for t in self.turns],
            "compactions": [
                {"turn": c.turn, "before": c.before, "after": c.after, "artifacts": c.artifacts}
                for c in self.compactions
            ],
            "errors": [{"turn": e.turn, "error": e.error} for e in self.errors],
            "totals": self.totals(),
            "facts_lost": self.facts_lost.to_dict(),
        }


def _plain(value: Any) -> Any:
    """``value`` with mappings as dicts and tuples as lists (parameters hold str-list tuples)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value
