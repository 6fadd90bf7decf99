"""Regions of a context window, the markers that identify summaries and placeholders, and budgets.

A turn's tokens are split into the named regions of docs/design.md §3, stacked in :data:`REGIONS`
order. The split is exact: the regions of a context always add up to its total, and tokens the
provider reported beyond what ctxweb counted go to ``unattributed``, never spread over the others.

Token counts come from a :class:`Counter` (the protocol :class:`compaction.tokens.TokenCounter`
implements), so this module never tokenizes on its own.

Where a message's tokens go (:func:`message_regions`):

- each part's tokens go to the region of its kind: text to the message's text region (``system``
  for system and developer messages, ``user``, ``assistant``; ``summary`` when the message or
  the text block carries a summary marker), tool calls to ``tool_calls``, tool results to
  ``tool_results`` (except the media inside them, which go to ``media``), reasoning to
  ``reasoning``, media to ``media``; an item or block kept verbatim (a type or role the adapters do
  not know) to the region its type names in :data:`RAW_REGIONS` (tool definitions sent inside the
  conversation to ``tools``, provider-side tool calls to ``tool_calls``...), else to ``other``;
- the message's overhead goes to the region of its role (system and developer to ``system``, user
  to ``user``, assistant to ``assistant``, tool to ``tool_results``), or to ``summary`` for a
  summary message of any role.

Example:
    >>> b = budget(200_000, 32_000, Policy.baseagent())
    >>> b.usable, b.trigger, b.over_trigger(142_800), b.over_trigger(142_801)
    (168000, 142800, False, True)
"""

from __future__ import annotations

from compaction.regions._budget import Budget, Policy, TriggerKind, budget
from compaction.regions._classification import (
    RAW_REGIONS,
    REGIONS,
    USED_REGIONS,
    CountedMessage,
    Counter,
    Region,
    RegionMemo,
    message_regions,
    raw_region,
    region_of_part,
    system_regions,
)
from compaction.regions._placeholders import (
    ANTHROPIC_CLEARED_MARKER,
    PLACEHOLDER_PATTERNS,
    PRUNE_MARKER,
    Placeholder,
    PlaceholderKind,
    PlaceholderPattern,
    find_artifact_pointers,
    part_placeholder,
    placeholder_of,
)
from compaction.regions._summary_markers import (
    BASEAGENT_SUMMARY_PREFIX,
    CLAUDE_CODE_SUMMARY_PREFIX,
    CODEX_SUMMARY_PREFIX,
    CTXWEB_SUMMARY_MARKER,
    PICOCLAW_SUMMARY_PREFIX,
    SUMMARY_MARKERS,
    SummaryMarker,
    is_summary,
    is_summary_text,
)
from compaction.regions._totals import RegionTotals, context_regions, sum_regions

__all__ = [
    "ANTHROPIC_CLEARED_MARKER",
    "BASEAGENT_SUMMARY_PREFIX",
    "CLAUDE_CODE_SUMMARY_PREFIX",
    "CODEX_SUMMARY_PREFIX",
    "CTXWEB_SUMMARY_MARKER",
    "PICOCLAW_SUMMARY_PREFIX",
    "PLACEHOLDER_PATTERNS",
    "PRUNE_MARKER",
    "RAW_REGIONS",
    "REGIONS",
    "SUMMARY_MARKERS",
    "USED_REGIONS",
    "Budget",
    "CountedMessage",
    "Counter",
    "Placeholder",
    "PlaceholderKind",
    "PlaceholderPattern",
    "Policy",
    "Region",
    "RegionMemo",
    "RegionTotals",
    "SummaryMarker",
    "TriggerKind",
    "budget",
    "context_regions",
    "find_artifact_pointers",
    "is_summary",
    "is_summary_text",
    "message_regions",
    "part_placeholder",
    "placeholder_of",
    "raw_region",
    "region_of_part",
    "sum_regions",
    "system_regions",
]
