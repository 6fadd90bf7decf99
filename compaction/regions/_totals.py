"""A context's tokens by region: region dicts added up (:func:`sum_regions`), and the split of a
whole context (:func:`context_regions`) into :class:`RegionTotals`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from compaction.messages.model import Context
from compaction.regions._budget import Budget
from compaction.regions._classification import (
    REGIONS,
    USED_REGIONS,
    Counter,
    RegionMemo,
    message_regions,
    system_regions,
)


def _zeros() -> dict[str, int]:
    return dict.fromkeys(USED_REGIONS, 0)


def sum_regions(parts: Iterable[Mapping[str, int]]) -> dict[str, int]:
    """Add region dicts (stored per message, system, tools) into one, in :data:`REGIONS` order.

    The used regions are always present (zeros included); ``reserve`` and ``free`` appear only if
    an input has them. An unknown region name is an error.

    Example:
        >>> sum_regions([{"user": 3}, {"user": 2, "tools": 7}])["user"]
        5
    """
    total = _zeros()
    for regions in parts:
        for name, tokens in regions.items():
            if name not in REGIONS:
                raise ValueError(f"unknown region {name!r}")
            total[name] = total.get(name, 0) + tokens
    return {name: total[name] for name in REGIONS if name in total}


@dataclass(frozen=True)
class RegionTotals:
    """A context's tokens by region.

    ``counted`` is what ctxweb counted; ``unattributed`` is what the provider reported beyond it
    (0 without a report, or when the report is not larger); ``total = counted + unattributed``
    and always equals the sum of ``regions``, which lists every used region in order.
    """

    regions: dict[str, int]
    counted: int
    reported: int | None = None
    unattributed: int = 0
    total: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "total", self.counted + self.unattributed)

    def stacked(self, budget: Budget) -> dict[str, int]:
        """The regions plus ``reserve`` (window minus usable) and ``free`` (usable left), for
        the stacked chart. ``free`` is 0 once the total passes the usable limit."""
        return {
            **self.regions,
            "reserve": budget.window - budget.usable,
            "free": max(0, budget.usable - self.total),
        }


def context_regions(
    context: Context,
    counter: Counter,
    *,
    reported_input_tokens: int | None = None,
    memo: RegionMemo | None = None,
) -> RegionTotals:
    """Split ``context``'s tokens into regions.

    ``system`` holds the top-level system parts, system and developer messages, and the
    counter's ``REQUEST_OVERHEAD`` (the per-request priming tokens belong to no message; the
    system prompt is the request's fixed cost, so that is where they are shown). A system block
    that is a summary (picoclaw's ``CONTEXT_SUMMARY:``) goes to ``summary``. ``tools`` is the
    tool definitions' count. Empty system and tools are not counted at all.

    With ``reported_input_tokens`` above the counted total, the difference is ``unattributed``.
    With a ``memo`` (for this counter), a message object it has seen is not split again.

    Example:
        >>> from compaction.messages.model import Context
        >>> class Zero:
        ...     REQUEST_OVERHEAD = 3
        >>> context_regions(Context("openai-chat", ()), Zero(), reported_input_tokens=10).total
        10
    """
    head: dict[str, int] = {"system": counter.REQUEST_OVERHEAD}
    if context.tools:
        head["tools"] = counter.count_tools(context.tools)
    split = memo.regions if memo is not None else message_regions
    regions = sum_regions(
        [
            head,
            system_regions(context.system, counter),
            *(split(m, counter) for m in context.messages),
        ]
    )
    counted = sum(regions.values())
    unattributed = 0
    if reported_input_tokens is not None and reported_input_tokens > counted:
        unattributed = reported_input_tokens - counted
    regions["unattributed"] = unattributed
    return RegionTotals(regions, counted, reported_input_tokens, unattributed)
