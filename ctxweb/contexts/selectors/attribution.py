"""What fills a turn, item by item (issue 36): its regions, each with its items largest first
(tool definitions by MCP server, tool calls and outputs, files, instruction blocks...), and what
changed since the previous turn. Computed on demand from the stored contexts of the turn and the
one before it (:func:`compaction.attribution.context_items`), counted in the session's encoding
as ingest counts them; three queries whatever the turn (its id lists and its previous turn's,
their messages, the previous turn's row).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from compaction.attribution import Attribution, ItemKey, ItemTotal, context_items, sum_items
from compaction.regions import REGIONS
from compaction.tokens import TokenCache, TokenCounter, get_tokenizer
from ctxweb.contexts.models import Turn
from ctxweb.contexts.selectors.inspector import turn_message_id_lists
from ctxweb.contexts.selectors.turns import messages_by_id, turn_context

#: Items listed per region; the rest are folded into one "N more" row.
ITEMS_PER_REGION = 40
#: Items listed per kind of change (new, grown, shrunk, gone), largest change first.
CHANGES_PER_KIND = 20
#: Message positions listed per item (``where``); ``where_count`` says how many there are.
WHERE_PER_ITEM = 20

#: Texts counted for attribution in this process. Ingest's counters live in the services,
#: which selectors may not import; counts are the same for the same encoding, only the cache
#: is not shared.
_CACHE = TokenCache(maxsize=100_000)


@cache
def _counter(encoding: str) -> TokenCounter:
    return TokenCounter(get_tokenizer(encoding), cache=_CACHE)


def _where(where: tuple[Any, ...]) -> dict[str, Any]:
    return {"where": list(where[:WHERE_PER_ITEM]), "where_count": len(where)}


def _change(tokens: int, before: int | None, first: bool) -> dict[str, Any] | None:
    """An item's change since the previous turn (None on a session's first turn)."""
    if first:
        return None
    if before is None:
        return {"status": "new", "previous": 0, "delta": tokens}
    status = "grown" if tokens > before else "shrunk" if tokens < before else "same"
    return {"status": status, "previous": before, "delta": tokens - before}


def _item(
    total: ItemTotal, *, turn_total: int, before: dict[ItemKey, int], first: bool
) -> dict[str, Any]:
    return {
        "kind": total.kind,
        "name": total.name,
        "group": total.group,
        "detail": total.detail,
        "tokens": total.tokens,
        "share": total.tokens / turn_total if turn_total else 0.0,
        "count": total.count,
        **_where(total.where),
        "change": _change(total.tokens, before.get(total.key), first),
    }


def _totals(attribution: Attribution) -> dict[ItemKey, ItemTotal]:
    return {total.key: total for total in sum_items(attribution.items)}


def _changes(
    now: dict[ItemKey, ItemTotal], before: dict[ItemKey, ItemTotal]
) -> dict[str, list[dict[str, Any]]]:
    """Items new, grown, shrunk and gone since the previous turn, largest change first."""
    found: dict[str, list[dict[str, Any]]] = {"new": [], "grown": [], "shrunk": [], "gone": []}
    for key, total in now.items():
        old = before.get(key)
        previous = old.tokens if old is not None else 0
        if old is None:
            status = "new"
        elif total.tokens > previous:
            status = "grown"
        elif total.tokens < previous:
            status = "shrunk"
        else:
            continue
        found[status].append(_change_row(total, total.tokens, previous))
    for key, old in before.items():
        if key not in now:
            found["gone"].append(_change_row(old, 0, old.tokens))
    out: dict[str, list[dict[str, Any]]] = {}
    for status, rows in found.items():
        rows.sort(key=lambda row: -abs(row["delta"]))
        out[status] = rows[:CHANGES_PER_KIND]
    out["counts"] = [{"status": s, "count": len(rows)} for s, rows in found.items()]
    return out


def _change_row(total: ItemTotal, tokens: int, previous: int) -> dict[str, Any]:
    return {
        "region": total.region,
        "kind": total.kind,
        "name": total.name,
        "group": total.group,
        "detail": total.detail,
        "tokens": tokens,
        "previous": previous,
        "delta": tokens - previous,
    }


def _attribution(turn: Turn, rows: list[Any], counter: TokenCounter) -> Attribution:
    context = turn_context(turn=turn, rows=rows)
    return context_items(context, counter, reported_input_tokens=turn.reported_input_tokens)


def _previous(turn: Turn) -> Turn | None:
    """The turn before ``turn`` with its system prompt and tools, in one query that runs on the
    first turn too (it finds nothing), so every turn costs the same queries."""
    # ``index=-1`` on a positive field would be answered without a query; ``__in`` still asks.
    found = (
        Turn.objects.filter(session=turn.session, index__in=[turn.index - 1])
        .select_related("system", "toolset")
        .first()
    )
    if found is not None:
        found.session = turn.session
    return found


def turn_attribution(*, turn: Turn) -> dict[str, Any]:
    """Turn ``turn``'s items by region and their changes since the previous turn.

    Returns ``regions`` (each used region with tokens, in stacking order: its ``tokens``,
    ``share`` of the turn, ``items`` largest first, at most :data:`ITEMS_PER_REGION`, and
    ``more``: the count and tokens of the rest, or None), ``changes`` (``new``, ``grown``,
    ``shrunk``, ``gone``: at most :data:`CHANGES_PER_KIND` each, largest change first, and
    ``counts`` of each), the turn's ``total_tokens`` as attributed (``matches_turn`` says
    whether it equals the stored total), and ``previous`` (the previous turn's index or None).
    Each item has ``kind``, ``name``, ``group``, ``detail``, ``tokens``, ``share``, ``count``,
    ``where`` (``"system"``, ``"tools"``, ``"request"``, ``"provider"`` or message positions) and
    ``change`` (``status``: new, grown, shrunk or same, ``previous`` tokens and ``delta``; None
    on the first turn).
    """
    session = turn.session
    # One job: a scoped counter remembers each text it counts, so the two turns' shared
    # messages are looked up by value rather than hashed again.
    counter = _counter(session.encoding).scoped()
    previous_ids, ids = turn_message_id_lists(session=session, index=turn.index)
    rows = messages_by_id(ids=[*previous_ids, *ids])
    attribution = _attribution(turn, [rows[i] for i in ids], counter)
    previous = _previous(turn)
    first = previous is None
    before: dict[ItemKey, ItemTotal] = {}
    if previous is not None:
        before = _totals(_attribution(previous, [rows[i] for i in previous_ids], counter))
    before_tokens = {key: total.tokens for key, total in before.items()}
    total = attribution.total
    grouped = attribution.by_region()
    regions = []
    for name in REGIONS:
        items = grouped.get(name)
        if not items:
            continue
        tokens = sum(item.tokens for item in items)
        shown, rest = items[:ITEMS_PER_REGION], items[ITEMS_PER_REGION:]
        regions.append(
            {
                "region": name,
                "tokens": tokens,
                "share": tokens / total if total else 0.0,
                "items": [
                    _item(item, turn_total=total, before=before_tokens, first=first)
                    for item in shown
                ],
                "more": (
                    {"count": len(rest), "tokens": sum(item.tokens for item in rest)}
                    if rest
                    else None
                ),
            }
        )
    return {
        "session": session.external_id,
        "index": turn.index,
        "previous": None if previous is None else previous.index,
        "total_tokens": total,
        "matches_turn": total == turn.total_tokens,
        "reported_input_tokens": turn.reported_input_tokens,
        "regions": regions,
        "changes": None if first else _changes(_totals(attribution), before),
    }
