"""What fills a turn, item by item (issue 36): its regions, each with its items largest first
(tool definitions by MCP server, tool calls and outputs, files, instruction blocks...), and what
changed since the previous turn. Computed on demand from the stored contexts of the turn and the
one before it (:func:`compaction.attribution.context_items`), counted in the session's encoding
as ingest counts them; three queries whatever the turn (its id lists and its previous turn's,
their messages, the previous turn's row).

A session's attribution (:func:`session_attribution`) and a project's overview
(:func:`project_overview`) read the rollups ingest keeps, never messages or turns.
"""

from __future__ import annotations

import datetime
import statistics
from functools import cache
from typing import Any

from django.db.models import (
    BigIntegerField,
    Case,
    Count,
    ExpressionWrapper,
    F,
    Max,
    Min,
    Q,
    QuerySet,
    Sum,
    Value,
    When,
    Window,
)
from django.db.models.functions import RowNumber

from compaction.attribution import (
    LABEL_RULES,
    Attribution,
    ItemKey,
    ItemTotal,
    PrefixMemo,
    context_items,
    sum_items,
)
from compaction.attribution import TOP_LISTS as TOP_LISTS  # re-exported for the interfaces
from compaction.messages import Message, message_from_dict
from compaction.regions import REGIONS, USED_REGIONS, RegionMemo
from compaction.tokens import TokenCache, TokenCounter, get_tokenizer
from ctxweb.accounts.models import Project
from ctxweb.contexts.models import (
    AttributionDay,
    AttributionItem,
    AttributionLabel,
    Operation,
    Session,
    ToolUse,
    Turn,
)
from ctxweb.contexts.selectors.inspector import turn_message_id_lists
from ctxweb.contexts.selectors.turns import message_data_by_id, turn_context

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


def _attribution(
    turn: Turn, messages: list[Message], counter: TokenCounter, memo: RegionMemo, prefix: PrefixMemo
) -> Attribution:
    context = turn_context(turn=turn, messages=messages)
    return context_items(
        context,
        counter,
        reported_input_tokens=turn.reported_input_tokens,
        memo=memo,
        prefix=prefix,
    )


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
    # Each message read once, the same object in both turns: the memos split a message the two
    # turns share into regions, and into items where the turns share it from the first, once.
    messages = {
        pk: message_from_dict(data)
        for pk, data in message_data_by_id(ids=[*previous_ids, *ids]).items()
    }
    memo, prefix = RegionMemo(), PrefixMemo()
    attribution = _attribution(turn, [messages[i] for i in ids], counter, memo, prefix)
    previous = _previous(turn)
    first = previous is None
    before: dict[ItemKey, ItemTotal] = {}
    if previous is not None:
        before = _totals(
            _attribution(previous, [messages[i] for i in previous_ids], counter, memo, prefix)
        )
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


# A session's and a project's attribution (issue 36), read from the rollups ingest keeps
# (ctxweb.contexts.services.attribution): never a scan of messages or turns.

#: Rows listed per table of a session's attribution; turns listed per file read again.
SESSION_ITEMS, SESSION_GROWTH, SESSION_LIST = 50, 20, 50
TURNS_PER_FILE = 20
#: Rows per top list, sessions near their window listed, of a project's overview.
TOP_ITEMS, NEAR_WINDOW_ROWS = 20, 50
#: A session's peak fill (tokens over window less reserve) that counts as near its window.
NEAR_WINDOW = 0.9
#: The sources a session comes from, as filters name them; any other stored source (the
#: transcript format) is an import.
SOURCES = ("proxy", "otlp", "langfuse", "api", "import")
_STORED_SOURCE = {"proxy": "proxy", "otlp": "otel", "langfuse": "langfuse", "api": "api"}
REGION_COLUMNS = tuple(f"region_{name}" for name in USED_REGIONS)


def _held(row: AttributionItem, turns: int) -> tuple[int, int, int]:
    """An item's token-turns, turns present and last turn over a session of ``turns`` turns
    (its rows keep them lazily: see :class:`~ctxweb.contexts.models.AttributionItem`)."""
    held = max(0, turns - row.since) if row.tokens_now > 0 else 0
    last = turns - 1 if row.tokens_now > 0 else row.last_turn
    return row.accrued + row.tokens_now * held, row.present + held, last


def _session_item(row: AttributionItem, turns: int) -> dict[str, Any]:
    token_turns, present, last = _held(row, turns)
    return {
        "kind": row.kind,
        "group": row.group,
        "name": row.name,
        "detail": row.detail,
        "region": row.region,
        "tokens_now": row.tokens_now,
        "tokens_peak": row.tokens_peak,
        "token_turns": token_turns,
        "introduced": row.introduced,
        "first_turn": row.first_turn,
        "last_turn": last,
        "turns_present": present,
    }


def session_attribution(*, session: Session) -> dict[str, Any]:
    """Session ``session``'s items over its turns, from its rollups (four queries).

    ``items``: the top :data:`SESSION_ITEMS` by token-turns (tokens summed over every turn that
    held it: what was paid for), each with its tokens in the latest turn (``tokens_now``, 0 once
    dropped), its peak, its ``introduced`` tokens (what new messages brought in), first and last
    turn held and turns present; ``growth``: the top :data:`SESSION_GROWTH` by tokens
    introduced; ``files_reread``: files whose content tool outputs brought in more than once
    (reads, tokens introduced, the first turns); ``unreferenced_outputs``: tool outputs whose
    file or distinctive lines no later assistant message repeats, largest first;
    ``tools``: per tool its calls and its outputs' total and median tokens.
    """
    turns = session.turn_count
    rows = list(AttributionItem.objects.filter(session=session))
    items = [_session_item(row, turns) for row in rows]
    # ties broken by identity, so that equal rows come in the same order every time
    order = sorted(range(len(rows)), key=lambda i: (-items[i]["token_turns"], rows[i].key))
    growth = sorted(range(len(rows)), key=lambda i: (-rows[i].introduced, rows[i].key))
    reread = sorted(
        (
            row
            for row in rows
            if row.kind == "file" and row.region == "tool_results" and row.count > 1
        ),
        key=lambda row: (-row.introduced, row.name),
    )
    unreferenced = ToolUse.objects.filter(
        session=session, kind="output", referenced=False
    ).order_by("-tokens", "turn", "position")[:SESSION_LIST]
    tools: dict[str, dict[str, Any]] = {}
    #: the turns that brought in each file as a tool's output, in order
    read_on: dict[str, list[int]] = {}
    uses = ToolUse.objects.filter(session=session).order_by("turn", "position", "id")
    for tool, kind, name, turn, tokens in uses.values_list(
        "tool", "kind", "name", "turn", "tokens"
    ).iterator():
        entry = tools.setdefault(tool, {"name": tool, "calls": 0, "outputs": []})
        if kind == "call":
            entry["calls"] += 1
        else:
            entry["outputs"].append(tokens)
            if name != tool:
                read_on.setdefault(name, []).append(turn)
    return {
        "session": session.external_id,
        "turns": turns,
        "items": [items[i] for i in order[:SESSION_ITEMS]],
        "growth": [items[i] for i in growth[:SESSION_GROWTH] if rows[i].introduced],
        "files_reread": [
            {
                "name": row.name,
                "reads": row.count,
                "tokens": row.introduced,
                "turns": sorted(set(read_on.get(row.name, ())))[:TURNS_PER_FILE],
            }
            for row in reread[:SESSION_LIST]
        ],
        "unreferenced_outputs": [
            {"tool": u.tool, "name": u.name, "turn": u.turn, "tokens": u.tokens}
            for u in unreferenced
        ],
        "tools": sorted(
            (
                {
                    "name": name,
                    "calls": entry["calls"],
                    "output_tokens": sum(entry["outputs"]),
                    "median_output_tokens": (
                        statistics.median(entry["outputs"]) if entry["outputs"] else 0
                    ),
                }
                for name, entry in tools.items()
            ),
            key=lambda t: (-t["output_tokens"], -t["calls"], t["name"]),
        ),
    }


def _source_filter(source: str) -> Q:
    if source == "import":
        return ~Q(session__source__in=list(_STORED_SOURCE.values()))
    return Q(session__source=_STORED_SOURCE[source])


def _source_name(stored: str) -> str:
    for name, value in _STORED_SOURCE.items():
        if value == stored:
            return name
    return "import"


def _tops(labels: QuerySet[AttributionLabel]) -> dict[str, list[dict[str, Any]]]:
    """The top :data:`TOP_ITEMS` of each top list by token-turns, from the sessions' labels
    (one narrow row per session and name): one query."""
    held = Case(
        When(tokens_now__gt=0, then=F("session__turn_count") - F("since")),
        default=Value(0),
    )
    rows = (
        labels.values("category", "label")
        .annotate(
            tokens=Sum(F("accrued") + F("tokens_now") * held),
            turns=Sum(F("present") + held),
            sessions=Count("id"),
        )
        .annotate(
            rank=Window(
                RowNumber(),
                partition_by=[F("category")],
                order_by=[F("tokens").desc(), F("label").asc()],
            )
        )
        .filter(rank__lte=TOP_ITEMS)
    )
    tops: dict[str, list[dict[str, Any]]] = {name: [] for name in TOP_LISTS}
    for row in sorted(rows, key=lambda r: (r["category"], r["rank"])):
        if row["category"] in tops and row["tokens"]:
            tops[row["category"]].append(
                {
                    "name": row["label"],
                    "tokens": int(row["tokens"]),
                    "sessions": row["sessions"],
                    "turns": int(row["turns"] or 0),
                }
            )
    return tops


def _days(
    *,
    project: Project,
    start: datetime.date,
    end: datetime.date,
    model: str | None,
    agent: str | None,
    source: str | None,
    session: str | None,
) -> QuerySet[AttributionDay]:
    """The project's day rollups in the range, narrowed by the overview's filters."""
    if source is not None and source not in SOURCES:
        raise ValueError(f"source must be one of {', '.join(SOURCES)}")
    rows = AttributionDay.objects.filter(project=project, day__gte=start, day__lte=end)
    if model:
        rows = rows.filter(session__model=model)
    if agent:
        rows = rows.filter(session__format=agent)
    if source:
        rows = rows.filter(_source_filter(source))
    if session:
        rows = rows.filter(session__external_id__icontains=session)
    return rows


def project_overview(
    *,
    project: Project,
    start: datetime.date,
    end: datetime.date,
    model: str | None = None,
    agent: str | None = None,
    source: str | None = None,
    session: str | None = None,
) -> dict[str, Any]:
    """Project ``project``'s sessions from ``start`` to ``end`` (days, UTC, both included),
    filtered by ``model``, ``agent`` (the session's format), ``source`` (one of
    :data:`SOURCES`) and ``session`` (a substring of its id), from its rollups.

    ``days``: each day with turns: its sessions, turns, ``tokens`` (the turns' totals added up:
    token-turns), estimated ``cost`` (USD at the model's input price when the turn was stored;
    the prompt cache is not modelled) and token-turns by region. ``top``: tools (their calls
    and outputs, a tool of an MCP server under the server), MCP servers (their definitions,
    calls and outputs), files and instruction blocks, by token-turns over the sessions active
    in the range (their whole lifetime: a session spanning the range's edge counts whole),
    each with the sessions and turns that held it. ``near_window``: sessions whose fill reached
    :data:`NEAR_WINDOW` on a day of the range. ``compactions``: by strategy, those the turns
    showed (detected or reported) and the operations applied in the range. ``usage``: the
    providers' reported input tokens against ctxweb's count of the same turns.
    """
    rows = _days(
        project=project,
        start=start,
        end=end,
        model=model,
        agent=agent,
        source=source,
        session=session,
    )
    # Added up by the database: a page reads a few aggregate rows, not a row per session-day.
    region_sums = {f"sum_{column}": Sum(column) for column in REGION_COLUMNS}
    days = []
    for found_day in (
        rows.order_by()
        .values("day")
        .annotate(
            n_sessions=Count("session_id"),
            n_turns=Sum("turns"),
            n_tokens=Sum("tokens"),
            n_cost=Sum("cost"),
            **region_sums,
        )
        .order_by("day")
    ):
        row: dict[str, Any] = dict(found_day)
        regions = {
            name: int(row[f"sum_region_{name}"])
            for name in USED_REGIONS
            if row[f"sum_region_{name}"]
        }
        days.append(
            {
                "day": row["day"],
                "sessions": row["n_sessions"],
                "turns": int(row["n_turns"] or 0),
                "tokens": int(row["n_tokens"] or 0),
                "cost": float(row["n_cost"] or 0.0),
                "regions": regions,
            }
        )
    totals = rows.aggregate(
        reported=Sum("reported"),
        counted=Sum("counted_reported"),
        turns_with_usage=Sum("turns_with_usage"),
    )
    usage = {name: int(value or 0) for name, value in totals.items()}
    near = (
        rows.order_by()
        .values("session_id")
        .annotate(
            fill=Max("peak_fill"),
            n_turns=Sum("turns"),
            over=Sum("over_window_turns"),
            external_id=Max("session__external_id"),
        )
        .filter(fill__gte=NEAR_WINDOW)
        .order_by("-fill", "external_id")[:NEAR_WINDOW_ROWS]
    )
    compactions: dict[str, list[int]] = {}
    for found in rows.exclude(compactions={}).values_list("compactions", flat=True):
        for strategy, (count, saved) in found.items():
            entry = compactions.setdefault(strategy, [0, 0])
            entry[0] += count
            entry[1] += saved
    session_ids = rows.values("session_id")
    operations = (
        Operation.objects.filter(
            session__in=session_ids,
            status=Operation.Status.SUCCEEDED,
            undone_at__isnull=True,
            finished_at__date__gte=start,
            finished_at__date__lte=end,
        )
        .values_list("strategy", "result")
        .iterator()
    )
    for strategy, result in operations:
        entry = compactions.setdefault(strategy, [0, 0])
        entry[0] += 1
        saved = result.get("tokens_saved") if isinstance(result, dict) else None
        entry[1] += max(0, saved) if isinstance(saved, int) else 0
    sessions = Session.objects.filter(project=project).order_by()  # DISTINCT of the column only
    return {
        "start": start,
        "end": end,
        "filters": {"model": model, "agent": agent, "source": source, "session": session},
        "choices": {
            "models": sorted({m for m in sessions.values_list("model", flat=True).distinct() if m}),
            "agents": sorted(set(sessions.values_list("format", flat=True).distinct())),
            "sources": sorted(
                {_source_name(s) for s in sessions.values_list("source", flat=True).distinct()}
            ),
        },
        "days": days,
        "top": _tops(AttributionLabel.objects.filter(session__in=session_ids)),
        "near_window": [
            {
                "session": row["external_id"],
                "peak_fill": row["fill"],
                "turns": int(row["n_turns"] or 0),
                "over_window_turns": int(row["over"] or 0),
            }
            for row in near
        ],
        "compactions": sorted(
            (
                {"strategy": strategy, "count": count, "tokens_saved": saved}
                for strategy, (count, saved) in compactions.items()
            ),
            key=lambda c: (-c["count"], c["strategy"]),
        ),
        "usage": usage,
    }


#: Sessions listed for one name of a top list, at most and by default.
ITEM_SESSIONS_MAX, ITEM_SESSIONS = 200, 50


def label_items(*, category: str, label: str) -> Q:
    """The :class:`AttributionItem` rows counted under ``label`` in the top list ``category``:
    the query form of the rule :func:`compaction.attribution.item_labels` files items by."""
    for rule in LABEL_RULES:
        if rule.category == category:
            query = Q(**{rule.label_field: label})
            if rule.regions:
                query &= Q(region__in=rule.regions)
            if rule.kinds:
                query &= Q(kind__in=rule.kinds)
            if rule.excluded_kinds:
                query &= ~Q(kind__in=rule.excluded_kinds)
            if rule.distinct_group:
                query &= ~Q(name=F("group"))
            return query
    raise ValueError(f"category must be one of {', '.join(TOP_LISTS)}")


def overview_item_sessions(
    *,
    project: Project,
    category: str,
    label: str,
    start: datetime.date,
    end: datetime.date,
    model: str | None = None,
    agent: str | None = None,
    source: str | None = None,
    session: str | None = None,
    limit: int = ITEM_SESSIONS,
) -> dict[str, Any]:
    """The sessions of :func:`project_overview`'s range and filters whose rollups hold
    ``label`` in the top list ``category``, largest token-turns first, at most ``limit``.

    Each: ``session`` (its external id), ``token_turns`` of the label in it, its ``tokens_now``
    (in the session's latest turn), ``turns_present`` (summed per item, as the overview counts
    them), the session's ``turns``, and ``first_turn`` and ``last_turn``: the first and last
    turn where one of the label's items was in the context. ``count``: how many sessions hold
    it. Rollup rows only: two queries (labels, then items of the sessions listed), a third to
    count when the list is full, whatever the sessions' length.
    """
    if category not in TOP_LISTS:
        raise ValueError(f"category must be one of {', '.join(TOP_LISTS)}")
    if not 1 <= limit <= ITEM_SESSIONS_MAX:
        raise ValueError(f"limit must be from 1 to {ITEM_SESSIONS_MAX}")
    session_ids = _days(
        project=project,
        start=start,
        end=end,
        model=model,
        agent=agent,
        source=source,
        session=session,
    ).values("session_id")
    held = Case(
        When(tokens_now__gt=0, then=F("session__turn_count") - F("since")),
        default=Value(0),
        output_field=BigIntegerField(),
    )
    labels = (
        AttributionLabel.objects.filter(session__in=session_ids, category=category, label=label)
        .annotate(
            token_turns=ExpressionWrapper(
                F("accrued") + F("tokens_now") * held, output_field=BigIntegerField()
            ),
            turns=ExpressionWrapper(F("present") + held, output_field=BigIntegerField()),
        )
        .filter(token_turns__gt=0)
    )
    rows = list(
        labels.order_by("-token_turns", "session__external_id").values(
            "session_id",
            "session__external_id",
            "session__turn_count",
            "tokens_now",
            "token_turns",
            "turns",
        )[:limit]
    )
    count = labels.count() if len(rows) == limit else len(rows)
    last = Case(
        When(tokens_now__gt=0, then=F("session__turn_count") - 1),
        default=F("last_turn"),
        output_field=BigIntegerField(),
    )
    spans = (
        {
            found["session_id"]: (found["first"], found["last"])
            for found in AttributionItem.objects.filter(
                label_items(category=category, label=label),
                session_id__in=[row["session_id"] for row in rows],
            )
            .order_by()
            .values("session_id")
            .annotate(first=Min("first_turn"), last=Max(last))
        }
        if rows
        else {}
    )
    sessions = []
    for row in rows:
        first_turn, last_turn = spans.get(row["session_id"], (None, None))
        sessions.append(
            {
                "session": row["session__external_id"],
                "token_turns": int(row["token_turns"]),
                "tokens_now": row["tokens_now"],
                "turns_present": int(row["turns"] or 0),
                "turns": row["session__turn_count"],
                "first_turn": first_turn,
                "last_turn": last_turn,
            }
        )
    return {
        "category": category,
        "label": label,
        "start": start,
        "end": end,
        "filters": {"model": model, "agent": agent, "source": source, "session": session},
        "count": count,
        "sessions": sessions,
    }
