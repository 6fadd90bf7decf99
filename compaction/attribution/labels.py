"""Which of the overview's top lists an item counts in, and under which name: the one copy of
the rules that the rollups file items by (:func:`item_labels`) and that a query for the items
of one name is built from (:data:`LABEL_RULES`).

Example:
    >>> item_labels("tool_results", "file", "/src/app.py", "Read")
    [('tools', 'Read'), ('files', '/src/app.py')]
    >>> item_labels("tools", "tool_definition", "mcp__github__get_issue", "github")
    [('mcp_servers', 'github')]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["LABEL_RULES", "TOP_LISTS", "LabelRule", "item_labels"]


@dataclass(frozen=True)
class LabelRule:
    """An item counts in top list ``category`` when its region is one of ``regions`` (any region
    when empty), its kind is one of ``kinds`` (any kind when empty) and none of
    ``excluded_kinds``, and, with ``distinct_group``, its group is not its own name; it counts
    under its ``name`` or its ``group`` (``label_field``)."""

    category: str
    label_field: Literal["name", "group"]
    regions: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    excluded_kinds: tuple[str, ...] = ()
    distinct_group: bool = False

    def holds(self, region: str, kind: str, name: str, group: str) -> bool:
        """Whether an item of this region, kind, name and group counts in the list."""
        return (
            (not self.regions or region in self.regions)
            and (not self.kinds or kind in self.kinds)
            and kind not in self.excluded_kinds
            and (not self.distinct_group or group != name)
        )


#: The top lists: ``tools`` (a tool's calls and outputs, files included, by its group: the
#: tool, or its MCP server), ``mcp_servers`` (definitions, calls and outputs of a tool grouped
#: under a server), ``files`` and ``instructions`` (by name).
LABEL_RULES: tuple[LabelRule, ...] = (
    LabelRule(
        "tools",
        "group",
        regions=("tool_calls", "tool_results"),
        excluded_kinds=("unattributed",),
    ),
    LabelRule(
        "mcp_servers",
        "group",
        kinds=("tool_definition", "tool_call", "tool_output"),
        distinct_group=True,
    ),
    LabelRule("files", "name", kinds=("file",)),
    LabelRule("instructions", "name", kinds=("instruction",)),
)

#: The overview's top lists, in the order of :data:`LABEL_RULES`.
TOP_LISTS: tuple[str, ...] = tuple(rule.category for rule in LABEL_RULES)


def item_labels(region: str, kind: str, name: str, group: str) -> list[tuple[str, str]]:
    """The top lists an item counts in, each with the name it counts under.

    Args:
        region: the item's region (``tool_results``, ``system``...).
        kind: its kind (one of :data:`~compaction.attribution.KINDS`).
        name: its name.
        group: its group (a tool's MCP server, or the tool itself).

    Returns:
        ``(category, label)`` pairs in the order of :data:`LABEL_RULES`.
    """
    return [
        (rule.category, group if rule.label_field == "group" else name)
        for rule in LABEL_RULES
        if rule.holds(region, kind, name, group)
    ]
