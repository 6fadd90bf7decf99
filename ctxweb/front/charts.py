"""Chart maths for the dashboard pages: fill levels, sparklines, the session chart's data and a
turn's region breakdown. No queries: the pages read through selectors (a constant number of
queries whatever the number of sessions, turns or messages) and hand the rows here."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ctxweb.contexts.selectors import (
    POLICY,
    REGIONS,
    USED_REGIONS,
    policy_label,
    session_budget,
    session_policy,
)
from ctxweb.shapes import TurnOutput

if TYPE_CHECKING:
    from ctxweb.contexts.models import Session, Turn

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


def chart_data(*, session: Session, turns: Iterable[Turn], turn_url: str) -> dict[str, Any]:
    """Everything the session chart draws, from turns already fetched (one query)."""
    b = session_budget(session)
    policy = session_policy(session)
    origin = "ctxweb default" if policy == POLICY else "the session's policy"
    return {
        "session": session.external_id,
        "turn_url": turn_url,
        "window": b.window,
        "reserve": b.reserve,
        "usable": b.usable,
        "trigger": b.trigger,
        "policy": f"{origin}: {policy_label(policy)}",
        "regions": list(REGIONS),
        "turns": TurnOutput(turns, many=True, context={"nonzero_regions": True}).data,
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
