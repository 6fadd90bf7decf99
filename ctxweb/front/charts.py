"""Reads for the dashboard pages: fill levels, sparklines, chart data and turn diffs.

Every function here runs a constant number of queries whatever the number of sessions on a page,
turns in a session or messages in a turn (DESIGN.md §8).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.core.paginator import Paginator
from django.db.models import Q

from compaction.regions import REGIONS, USED_REGIONS, Budget, Policy, budget
from ctxweb.accounts.models import Project
from ctxweb.contexts import selectors
from ctxweb.contexts.models import KEYFRAME_EVERY, Session, Turn
from ctxweb.contexts.models import Artifact as ArtifactRow
from ctxweb.contexts.models import Message as MessageRow

#: ctxweb's default policy: the trigger drawn on the chart and used to colour fill levels.
POLICY = Policy.ctxweb()
#: Below this share of the usable window a session is "ok" (green); from it to the trigger,
#: "near" (amber); past the trigger, "over" (red): the next turn compacts.
FILL_NEAR = 0.70
FILL_OVER = POLICY.value

#: The fill filter of the sessions list: name -> (label, min_fill, max_fill).
FILL_BANDS: dict[str, tuple[str, float | None, float | None]] = {
    "ok": (f"below {FILL_NEAR:.0%}", None, FILL_NEAR - 1e-9),
    "near": (f"{FILL_NEAR:.0%}–{FILL_OVER:.0%} (nearing the trigger)", FILL_NEAR, FILL_OVER),
    "over": (f"above {FILL_OVER:.0%} (past the trigger)", FILL_OVER + 1e-9, None),
}

SORTS: dict[str, str] = {
    "recent": "Most recent activity",
    "-recent": "Oldest activity",
    "-fill": "Fullest first",
    "fill": "Emptiest first",
    "-turns": "Most turns",
    "turns": "Fewest turns",
    "name": "Name A–Z",
    "-name": "Name Z–A",
}

SPARK_WIDTH = 120
SPARK_HEIGHT = 28
SPARK_POINTS = 60


def fill_level(fill: float) -> str:
    """``ok``, ``near`` or ``over``: how close a fill (share of usable) is to the trigger."""
    if fill > FILL_OVER:
        return "over"
    if fill >= FILL_NEAR:
        return "near"
    return "ok"


def session_budget(session: Session, *, window: int | None = None) -> Budget:
    """The session's window, reserve, usable limit and trigger under ctxweb's default policy."""
    return budget(window or session.context_window, session.output_reserve, POLICY)


def session_models(*, project: Project) -> list[str]:
    """The distinct models of the project's sessions, for the model filter."""
    return sorted(
        m
        for m in Session.objects.filter(project=project)
        .exclude(model="")
        .values_list("model", flat=True)
        .distinct()
    )


def session_totals(*, session_ids: Iterable[int]) -> dict[int, list[int]]:
    """Every listed session's turn totals in turn order, in ONE query."""
    totals: dict[int, list[int]] = defaultdict(list)
    rows = (
        Turn.objects.filter(session_id__in=list(session_ids))
        .order_by("session_id", "index")
        .values_list("session_id", "total_tokens")
    )
    for session_id, total in rows:
        totals[session_id].append(total)
    return dict(totals)


@dataclass(frozen=True)
class Sparkline:
    """A fill-over-turns polyline for an inline SVG (coordinates in a fixed viewBox)."""

    points: str
    trigger_y: float
    last_x: float
    last_y: float
    label: str
    width: int = SPARK_WIDTH
    height: int = SPARK_HEIGHT


def sparkline(totals: Sequence[int], usable: int) -> Sparkline | None:
    """The fill (share of ``usable``) of each turn, down-sampled to at most ``SPARK_POINTS``
    points keeping each bucket's peak (a spike before a compaction must stay visible)."""
    if not totals:
        return None
    usable = max(usable, 1)
    fills = [t / usable for t in totals]
    if len(fills) > SPARK_POINTS:
        size = len(fills) / SPARK_POINTS
        fills = [
            max(fills[int(i * size) : max(int((i + 1) * size), int(i * size) + 1)])
            for i in range(SPARK_POINTS)
        ]
    top = max(1.0, max(fills))
    pad = 2.0
    height = SPARK_HEIGHT - 2 * pad

    def y(fill: float) -> float:
        return round(pad + height * (1 - fill / top), 1)

    step = (SPARK_WIDTH - 2 * pad) / max(len(fills) - 1, 1)
    coords = [(round(pad + i * step, 1), y(f)) for i, f in enumerate(fills)]
    if len(coords) == 1:
        coords.append((SPARK_WIDTH - pad, coords[0][1]))
    first, last = totals[0] / usable, totals[-1] / usable
    peak = max(totals) / usable
    label = (
        f"Fill over {len(totals)} turn{'s' if len(totals) != 1 else ''}: "
        f"{first:.0%} at first, peak {peak:.0%}, now {last:.0%}"
    )
    return Sparkline(
        points=" ".join(f"{x},{yy}" for x, yy in coords),
        trigger_y=y(FILL_OVER),
        last_x=coords[-1][0],
        last_y=coords[-1][1],
        label=label,
    )


# --- the session chart ------------------------------------------------------------------------


def chart_turn(turn: Turn) -> dict[str, Any]:
    """One turn as the chart (and the live updates) take it: the chart API's shape, zero
    regions left out to keep a 2,000-turn page small."""
    return {
        "index": turn.index,
        "total_tokens": turn.total_tokens,
        "counted_tokens": turn.counted_tokens,
        "regions": {k: v for k, v in turn.regions.items() if v},
        "reported_input_tokens": turn.reported_input_tokens,
        "events": turn.events,
        "context_window": turn.context_window,
        "max_output_tokens": turn.max_output_tokens,
    }


def chart_data(*, session: Session, turns: Iterable[Turn]) -> dict[str, Any]:
    """Everything the session chart draws, from turns already fetched (one query)."""
    b = session_budget(session)
    return {
        "session": session.external_id,
        "turn_url": f"/sessions/{session.external_id}/turns/",
        "window": b.window,
        "reserve": b.reserve,
        "usable": b.usable,
        "trigger": b.trigger,
        "policy": f"ctxweb default: above {POLICY.value:.0%} of usable",
        "regions": list(REGIONS),
        "turns": [chart_turn(t) for t in turns],
    }


def turn_events(turns: Iterable[Turn]) -> list[dict[str, Any]]:
    """Compactions and operations over the session, oldest first, each with its turn."""
    found = []
    for turn in turns:
        for event in turn.events:
            if event.get("type") in ("compaction", "operation"):
                found.append({"index": turn.index, **event})
    return found


def breakdown(
    regions: dict[str, int], *, window: int, reserve: int, total: int
) -> list[dict[str, Any]]:
    """A turn's regions as table rows (region, tokens, share of the turn, share of the window),
    in the fixed order, with the reserve and the free space after the used regions."""
    rows: list[dict[str, Any]] = []
    for name in USED_REGIONS:
        tokens = regions.get(name, 0)
        if not tokens and name == "unattributed":
            continue
        rows.append(
            {
                "region": name,
                "tokens": tokens,
                "share": tokens / total if total else 0.0,
                "of_window": tokens / window if window else 0.0,
            }
        )
    free = max(0, window - total - reserve)
    for name, tokens in (("reserve", reserve), ("free", free)):
        rows.append(
            {
                "region": name,
                "tokens": tokens,
                "share": None,
                "of_window": tokens / window if window else 0.0,
            }
        )
    return rows


# --- the turn inspector -----------------------------------------------------------------------


def turn_message_id_lists(*, session: Session, index: int) -> tuple[list[int], list[int]]:
    """The message ids of turn ``index - 1`` and of turn ``index``, rebuilt in one query."""
    if index <= 0:
        return [], _ids(session=session, start=index - index % KEYFRAME_EVERY, stop=index)[1]
    previous = index - 1
    start = previous - previous % KEYFRAME_EVERY
    return _ids(session=session, start=start, stop=index)


def _ids(*, session: Session, start: int, stop: int) -> tuple[list[int], list[int]]:
    """The id lists of turns ``stop - 1`` and ``stop`` from the deltas from keyframe ``start``."""
    before: list[int] = []
    ids: list[int] = []
    rows = (
        Turn.objects.filter(session=session, index__gte=start, index__lte=stop)
        .order_by("index")
        .values_list("index", "shared", "tail")
    )
    for index, shared, tail in rows:
        if index == stop:
            before = ids
        ids = ids[:shared] + list(tail)
    return (before if stop > 0 else []), ids


def _removed(before: list[int], ids: list[int]) -> list[int]:
    """The ids in ``before`` that are gone from ``ids``, each once, in their first order."""
    seen = set(ids)
    return [i for i in dict.fromkeys(before) if i not in seen]


def _diff(
    *,
    before: list[int],
    ids: list[int],
    index: int,
    rows: dict[int, MessageRow],
    encoding: str,
) -> dict[str, Any]:
    """The diff of two id lists, the removed messages taken from ``rows`` (no query)."""
    if index <= 0:
        return {"first": True, "added": [], "removed": [], "removed_tokens": 0}
    kept = set(before)
    added = [position for position, i in enumerate(ids) if i not in kept]
    first_position: dict[int, int] = {}
    for position, i in enumerate(before):
        first_position.setdefault(i, position)
    removed = []
    for i in _removed(before, ids):
        row = rows.get(i)
        if row is None:
            continue
        removed.append(
            {
                "id": row.hash,
                "role": row.role,
                "position": first_position[i],
                "tokens": row.counts.get(encoding, {}).get("total", 0),
                "message": row.data,
            }
        )
    return {
        "first": False,
        "added": added,
        "removed": removed,
        "removed_tokens": sum(r["tokens"] for r in removed),
    }


def turn_diff(*, session: Session, index: int) -> dict[str, Any]:
    """What changed since the previous turn, by message content (hash): the positions of the
    messages added in this turn, and the messages that disappeared (two queries)."""
    before, ids = turn_message_id_lists(session=session, index=index)
    gone = _removed(before, ids) if index > 0 else []
    rows = selectors.messages_by_id(ids=gone)
    return _diff(before=before, ids=ids, index=index, rows=rows, encoding=session.encoding)


def turn_inspector(
    *,
    turn: Turn,
    order: str = "position",
    page_number: Any = None,
    page_size: int = 200,
) -> dict[str, Any]:
    """One page of ``turn``'s messages for the inspector, in order or largest first
    (``order="size"``), with the diff against the previous turn.

    Three queries whatever the number of messages: the id lists of the turn and the one before,
    every message's tokens (for the order and the bars), and the rows of the page's and the
    removed messages. Only the page's messages are loaded and decoded.

    Returns ``page`` (a :class:`~django.core.paginator.Page` of positions), ``messages``
    (:func:`~ctxweb.contexts.selectors.message_detail` of the page's, in page order),
    ``count`` (messages in the turn), ``largest`` (the most tokens of one) and ``diff``
    (as :func:`turn_diff`).
    """
    session = turn.session
    encoding = session.encoding
    before, ids = turn_message_id_lists(session=session, index=turn.index)
    tokens = selectors.message_tokens(ids=ids, encoding=encoding)
    positions: Sequence[int] = range(len(ids))
    if order == "size":
        positions = sorted(positions, key=lambda p: (-tokens.get(ids[p], 0), p))
    page = Paginator(positions, page_size).get_page(page_number)
    gone = _removed(before, ids) if turn.index > 0 else []
    rows = selectors.messages_by_id(ids=[*(ids[p] for p in page.object_list), *gone])
    messages = [
        selectors.message_detail(position=p, row=rows[ids[p]], encoding=encoding)
        for p in page.object_list
    ]
    return {
        "page": page,
        "messages": messages,
        "count": len(ids),
        "largest": max(tokens.values(), default=0),
        "diff": _diff(before=before, ids=ids, index=turn.index, rows=rows, encoding=encoding),
    }


def artifacts_by_id(*, project: Project, ids: Iterable[str]) -> dict[str, ArtifactRow]:
    """The project's artifacts named by ``ids`` (content keys or row ids), in one query, without
    their content; unknown ids are left out."""
    wanted = {i for i in ids if i}
    if not wanted:
        return {}
    keys = [i for i in wanted if not (i.isdigit() and len(i) < 19)]
    pks = [int(i) for i in wanted if i.isdigit() and len(i) < 19]
    rows = ArtifactRow.objects.filter(project=project).filter(Q(key__in=keys) | Q(pk__in=pks))
    found: dict[str, ArtifactRow] = {}
    for row in rows.defer("content"):
        found[row.key] = row
        found[str(row.pk)] = row
    return {i: found[i] for i in wanted if i in found}
