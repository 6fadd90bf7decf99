"""What attribution yields: one :class:`Item` per thing found in a context (a tool definition, a
call, an output, a file, an instruction block...), the items of a context
(:class:`Attribution`), and items added up by identity (:class:`ItemTotal`, :func:`sum_items`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal, TypeAlias

__all__ = [
    "KINDS",
    "Attribution",
    "Item",
    "ItemKey",
    "ItemKind",
    "ItemTotal",
    "Where",
    "sum_items",
]

ItemKind: TypeAlias = Literal[
    "tool_definition",
    "tool_call",
    "tool_output",
    "file",
    "instruction",
    "system_prompt",
    "message_text",
    "reasoning",
    "image",
    "media",
    "summary",
    "raw",
    "unattributed",
]

#: Every kind of item.
KINDS: tuple[ItemKind, ...] = (
    "tool_definition",
    "tool_call",
    "tool_output",
    "file",
    "instruction",
    "system_prompt",
    "message_text",
    "reasoning",
    "image",
    "media",
    "summary",
    "raw",
    "unattributed",
)

#: Where an item is: ``"request"`` (the request's own overhead), ``"system"`` (the top-level
#: system prompt), ``"tools"`` (the tool definitions), a message's index in the context, or
#: ``"provider"`` (what the provider reported beyond the count).
Where: TypeAlias = str | int

#: What identifies an item across messages and turns: (region, kind, name, detail).
ItemKey: TypeAlias = tuple[str, str, str, str]


@dataclass(frozen=True)
class Item:
    """One thing in a context and its exact tokens.

    ``kind`` says what it is (:data:`KINDS`); ``name`` which one: the tool's name (tool
    definitions, calls, outputs), the file's path, the instruction block's label (``CLAUDE.md``,
    ``AGENTS.md``, ``<system-reminder>``, ``skills list``...), the role's text (``user text``),
    the raw item's type. ``group`` gathers names: the MCP server of an MCP tool, else the tool's
    name (for files: the tool that read or wrote them), the label of an instruction block.
    ``detail`` tells same-named items apart: a memory file's path, a reminder's first line.
    ``region`` is the region the tokens belong to (:mod:`compaction.regions`), ``where`` where
    they are (:data:`Where`).
    """

    kind: ItemKind
    name: str
    group: str
    region: str
    tokens: int
    where: Where
    detail: str = ""

    @property
    def key(self) -> ItemKey:
        """The item's identity: (region, kind, name, detail)."""
        return (self.region, self.kind, self.name, self.detail)


@dataclass(frozen=True)
class ItemTotal:
    """Items of one identity added up: their tokens, how many there are (``count``) and where
    they are (``where``, in order of appearance, each once)."""

    kind: ItemKind
    name: str
    group: str
    region: str
    tokens: int
    count: int
    where: tuple[Where, ...]
    detail: str = ""

    @property
    def key(self) -> ItemKey:
        """The identity the items share: (region, kind, name, detail)."""
        return (self.region, self.kind, self.name, self.detail)


def sum_items(items: Iterable[Item]) -> list[ItemTotal]:
    """Add up ``items`` of the same identity (:attr:`Item.key`), largest first (ties by first
    appearance); each total keeps the group of its first item.

    Example:
        >>> a = Item("tool_output", "Read", "Read", "tool_results", 5, 2)
        >>> b = Item("tool_output", "Read", "Read", "tool_results", 7, 4)
        >>> [(t.name, t.tokens, t.count, t.where) for t in sum_items([a, b])]
        [('Read', 12, 2, (2, 4))]
    """
    firsts: dict[ItemKey, Item] = {}
    tokens: dict[ItemKey, int] = {}
    counts: dict[ItemKey, int] = {}
    wheres: dict[ItemKey, dict[Where, None]] = {}
    for item in items:
        key = item.key
        if key not in firsts:
            firsts[key], tokens[key], counts[key], wheres[key] = item, 0, 0, {}
        tokens[key] += item.tokens
        counts[key] += 1
        wheres[key][item.where] = None
    out = [
        ItemTotal(
            kind=first.kind,
            name=first.name,
            group=first.group,
            region=first.region,
            tokens=tokens[key],
            count=counts[key],
            where=tuple(wheres[key]),
            detail=first.detail,
        )
        for key, first in firsts.items()
    ]
    order = {key: position for position, key in enumerate(firsts)}
    out.sort(key=lambda t: (-t.tokens, order[t.key]))
    return out


def _regions() -> Mapping[str, int]:
    return {}


@dataclass(frozen=True)
class Attribution:
    """A context's items, in order of appearance, and its tokens by region.

    ``regions`` is :func:`compaction.regions.context_regions`' split of the same context with
    the same counter (every used region, zeros included); the items of each region add up to
    exactly that region's tokens (an ``unattributed`` item per region holds the framing).
    ``reported`` is the provider's reported input tokens, when given.
    """

    items: tuple[Item, ...]
    regions: Mapping[str, int] = field(default_factory=_regions)
    reported: int | None = None

    @property
    def total(self) -> int:
        """The tokens of every item (the regions' sum)."""
        return sum(item.tokens for item in self.items)

    def by_region(self) -> dict[str, list[ItemTotal]]:
        """Each region that holds tokens and its items added up (:func:`sum_items`), largest
        first, regions in :data:`compaction.regions.REGIONS` order."""
        grouped: dict[str, list[Item]] = {name: [] for name, n in self.regions.items() if n}
        for item in self.items:
            grouped.setdefault(item.region, []).append(item)
        return {name: sum_items(items) for name, items in grouped.items() if items}
