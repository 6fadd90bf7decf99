"""How ``ctxweb-auto`` spends its budget: the steps are coarse (a whole turn digested, a whole
output externalized, many turns summarized at once), so one pass aimed at the target can land
far under it, or at it with no room left for the facts it took out. The plan is therefore
searched: the same steps aimed lower, to make room for the facts, or higher, to give back what
a coarse step took beyond need, and the attempt kept is the one that keeps the most facts
visible and lands closest under the target."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from compaction.strategies.base import Draft
from compaction.summarizers import Summarizer

__all__ = ["ATTEMPTS", "LAND", "Attempt", "search"]

#: The share of the target a plan should land at or above, when the floor allows.
LAND = 0.9
#: The share of the facts of the input a plan should keep visible.
KEEP = 0.95
#: At most this many attempts (each a full pass of the steps) per plan.
ATTEMPTS = 8


@dataclass
class Attempt:
    """One pass of the steps aimed at ``aim``: the draft, its total after the steps alone
    (``steps``) and after the facts were written back (``total``), the facts still lost, the
    facts of the input, and what writing the lost ones would take (``lost_tokens``: their own
    tokens, written compact; 0 when unknown)."""

    draft: Draft
    aim: int
    steps: int
    total: int
    lost: int
    facts: int
    lost_tokens: int = 0

    def key(self, target: int) -> tuple[bool, bool, int, int]:
        """Smaller is better: within the target first, then keeping 95% of the facts, landing
        at 90% of the target or more, the fewest facts lost, the most tokens kept."""
        short = self.lost > (1 - KEEP) * self.facts
        return (short, self.total < LAND * target, self.lost, -self.total)


Run = Callable[[Draft, dict[str, Any], Summarizer | None, int, int], Attempt]


def search(
    run: Run,
    draft: Draft,
    params: dict[str, Any],
    summarizer: Summarizer | None,
    target: int,
    original: int,
) -> Attempt:
    """The best attempt of at most :data:`ATTEMPTS`: aimed at the target first; lower while
    facts are lost (by what carrying them would cost: their tokens); then higher, halving the
    gap, while the best lands under 90% of the target. Deterministic: the aims depend only on
    the input."""
    tried: dict[int, Attempt] = {}

    def attempt(aim: int) -> Attempt:
        aim = max(1, min(aim, original))
        if aim not in tried:
            tried[aim] = run(draft, params, summarizer, target, aim)
        return tried[aim]

    first = attempt(target)
    if first.steps > target:
        return first  # the floor: the steps cannot go lower whatever the aim
    best = first
    current = first
    # lower: make room for the facts the steps took out
    while current.lost and len(tried) < ATTEMPTS // 2:
        room = target - current.total
        # what carrying the lost facts takes: their own tokens when known (a long path costs
        # tens), else a few a fact
        need = max(current.lost_tokens, current.lost * 6)
        shortfall = max(need - room, target // 50, 1)
        # below where the steps landed, not only below the aim: a coarse step may already
        # land under the aim, and aiming between the two changes nothing
        lower = attempt(min(current.aim, current.steps) - shortfall)
        if lower.aim == current.aim or lower.steps >= current.steps:
            break
        current = lower
        best = min(best, current, key=lambda a: a.key(target))
    # higher: give back what a coarse step took beyond need
    lo, hi = best.aim, original
    while best.total < LAND * target and len(tried) < ATTEMPTS and hi - lo > target // 100:
        mid = (lo + hi) // 2
        trial = attempt(mid)
        if trial.steps <= target:
            lo = mid
            best = min(best, trial, key=lambda a: a.key(target))
        else:
            hi = mid
    return best
