"""How a part's tokens are shared among its items: the instruction blocks carved out of a text
(each its own text counted alone, capped so that the blocks never take more than the part), the
rest to the part's own item, and each region balanced against the split of the regions with an
``unattributed`` item (names, groups and details bounded on the way out).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Final

from compaction.attribution._blocks import Block, instruction_blocks
from compaction.attribution._model import Item, ItemKind, Where
from compaction.regions import Counter

__all__ = [
    "MAX_NAME_CHARS",
    "UNATTRIBUTED",
    "UNATTRIBUTED_KIND",
    "balance",
    "json_escaped",
    "text_items",
]

UNATTRIBUTED: Final = "unattributed"
UNATTRIBUTED_KIND: ItemKind = "unattributed"
#: The longest name, group or detail an item keeps (a path or a tool's name comes from the
#: request): longer ones are cut, ending with an ellipsis.
MAX_NAME_CHARS: Final = 500


def _nested(blocks: Iterable[Block]) -> list[tuple[Block, list[Block]]]:
    """Blocks at the top with the blocks inside each; a block that straddles another is left
    out (its text stays with whatever holds it)."""
    tops: list[tuple[Block, list[Block]]] = []
    for block in blocks:
        if tops and block.start < tops[-1][0].end:
            top = tops[-1][0]
            if block.end <= top.end:
                tops[-1][1].append(block)
            continue
        tops.append((block, []))
    return tops


def text_items(
    text: str,
    tokens: int,
    counter: Counter,
    *,
    base: tuple[ItemKind, str, str, str],
    region: str,
    where: Where,
    group: str | None = None,
    as_counted: Callable[[str], str] | None = None,
) -> list[Item]:
    """The items of a text worth ``tokens``: its instruction blocks, then ``base`` (kind, name,
    group, detail) for the rest. ``as_counted`` turns a block's text into the text the counter
    saw (JSON-escaped inside a tool definition). A block's group is ``group``, else its label."""
    items: list[Item] = []
    left = tokens
    for top, inner in _nested(instruction_blocks(text)):
        whole = counter.count_text(_form(text[top.start : top.end], as_counted))
        shares: list[tuple[Block, int]] = []
        for block in inner:
            share = min(counter.count_text(_form(text[block.start : block.end], as_counted)), whole)
            whole -= share
            shares.append((block, share))
        for block, share in [(top, whole), *shares]:
            share = min(share, left)
            left -= share
            if share:
                items.append(
                    Item(
                        "instruction",
                        block.name,
                        group or block.name,
                        region,
                        share,
                        where,
                        block.detail,
                    )
                )
    if left:
        kind, name, base_group, detail = base
        items.append(Item(kind, name, base_group, region, left, where, detail))
    return items


def _form(text: str, as_counted: Callable[[str], str] | None) -> str:
    return as_counted(text) if as_counted is not None else text


def json_escaped(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)[1:-1]


def balance(items: list[Item], expected: Mapping[str, int], where: Where) -> list[Item]:
    """``items`` plus an ``unattributed`` item per region for what they leave of ``expected``;
    should they hold more than a region (they never do by construction), the last are trimmed."""
    held: dict[str, int] = {}
    for item in items:
        held[item.region] = held.get(item.region, 0) + item.tokens
    out = list(items)
    for region, tokens in expected.items():
        rest = tokens - held.pop(region, 0)
        if rest > 0:
            out.append(Item(UNATTRIBUTED_KIND, UNATTRIBUTED, UNATTRIBUTED, region, rest, where))
        elif rest < 0:
            out = _trim(out, region, -rest)
    for region, tokens in held.items():  # a region the split does not have: nothing of it
        out = _trim(out, region, tokens)
    return [_bounded(item) for item in out if item.tokens]


def _cut(text: str) -> str:
    return text if len(text) <= MAX_NAME_CHARS else text[: MAX_NAME_CHARS - 1] + "…"


def _bounded(item: Item) -> Item:
    """``item`` with its name, group and detail cut at :data:`MAX_NAME_CHARS`."""
    if max(len(item.name), len(item.group), len(item.detail)) <= MAX_NAME_CHARS:
        return item
    return Item(
        item.kind,
        _cut(item.name),
        _cut(item.group),
        item.region,
        item.tokens,
        item.where,
        _cut(item.detail),
    )


def _trim(items: list[Item], region: str, excess: int) -> list[Item]:
    out = list(items)
    for k in range(len(out) - 1, -1, -1):
        if excess <= 0:
            break
        item = out[k]
        if item.region != region:
            continue
        cut = min(item.tokens, excess)
        excess -= cut
        out[k] = Item(
            item.kind,
            item.name,
            item.group,
            item.region,
            item.tokens - cut,
            item.where,
            item.detail,
        )
    return out
