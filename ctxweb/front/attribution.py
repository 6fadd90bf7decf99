"""Attribution pages: a session's attribution (what grew its context, how long each item stayed,
files read again, outputs never referred to, per tool) and the project overview (tokens by day by
region, top tools, MCP servers, files and instructions, sessions near their window, compactions,
reported usage), each table also served as CSV (``?format=csv&table=<name>``).

The numbers come from the rollups kept at ingest, through
:func:`ctxweb.contexts.selectors.attribution.session_attribution` and
:func:`~ctxweb.contexts.selectors.attribution.project_overview`: a page never scans turns.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, date, timedelta
from typing import Any
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone

from ctxweb.contexts.selectors import USED_REGIONS
from ctxweb.contexts.selectors import attribution as attribution_selectors
from ctxweb.contexts.services.attribution import (
    attribution_behind,
    attribution_behind_project,
)
from ctxweb.front.access import page_access, page_session
from ctxweb.front.turns import GROUPED
from ctxweb.tables import (
    DEFAULT_DAYS,
    ITEM_SESSION_COLUMNS,
    MAX_FILTER_CHARS,
    MAX_LABEL_CHARS,
    MAX_RANGE_DAYS,
    OVERVIEW_FILTERS,
    OVERVIEW_TABLE_COLUMNS,
    SESSION_TABLE_COLUMNS,
    csv_download,
    day_rows,
    label_fits,
    overview_text_filters,
    parse_day,
    range_error,
)

#: The overview's preset ranges, in days ending today (``range=custom`` takes ``start``/``end``).
RANGES = {"7": "Last 7 days", "30": "Last 30 days", "90": "Last 90 days", "custom": "Custom"}
DEFAULT_RANGE = str(DEFAULT_DAYS)


def _titled(
    titles: dict[str, str], columns: dict[str, tuple[str, ...]]
) -> dict[str, tuple[str, tuple[str, ...]]]:
    return {name: (title, columns[name]) for name, title in titles.items()}


#: The overview's tables: name -> (title, columns). Each is a CSV download.
OVERVIEW_TABLES = _titled(
    {
        "tools": "Top tools",
        "mcp_servers": "MCP servers",
        "files": "Files",
        "instructions": "Instruction blocks",
        "near_window": "Sessions near or past their window",
        "compactions": "Compactions by strategy",
        "days": "Days",
    },
    OVERVIEW_TABLE_COLUMNS,
)
#: The session page's tables: name -> (title, columns).
SESSION_TABLES = _titled(
    {
        "items": "Items by token-turns",
        "growth": "Items that grew the context most",
        "files_reread": "Files read more than once",
        "unreferenced_outputs": "Tool outputs never referred to again",
        "tools": "Per tool",
    },
    SESSION_TABLE_COLUMNS,
)


def _csv_table(
    request: HttpRequest,
    tables: dict[str, tuple[str, tuple[str, ...]]],
    rows: Mapping[str, list[dict[str, Any]]],
    name: Callable[[str], str],
) -> HttpResponse:
    """The table ``?table=`` names as a CSV download named ``name(table)``, or a 400."""
    table = request.GET.get("table", "")
    if table not in tables:
        return HttpResponse(
            f"Unknown table {table[:40]!r}: one of {', '.join(tables)}.",
            status=400,
            content_type="text/plain; charset=utf-8",
        )
    return csv_download(name=name(table), columns=tables[table][1], rows=rows[table])


# --- overview -----------------------------------------------------------------------------------


def overview_filters(params: Any, *, today: date) -> tuple[dict[str, Any], list[str]]:
    """The overview's filters from a query string, bounded, and the errors to show (a bad value
    falls back to the default, and says so)."""
    errors: list[str] = []
    range_ = params.get("range", DEFAULT_RANGE)
    if range_ not in RANGES:
        errors.append(f"Unknown range: showing the {RANGES[DEFAULT_RANGE].lower()}.")
        range_ = DEFAULT_RANGE
    start: date | None
    end: date | None
    if range_ == "custom":
        start = parse_day(params.get("start", "").strip())
        end = parse_day(params.get("end", "").strip())
        if start is None or end is None:
            errors.append("A custom range needs a start and an end date (YYYY-MM-DD).")
        elif range_error(start, end) == "order":
            errors.append("The end date is before the start date.")
        elif range_error(start, end) == "length":
            errors.append(f"A range holds at most {MAX_RANGE_DAYS} days.")
        if errors:
            range_, start, end = DEFAULT_RANGE, None, None
    if range_ != "custom" or start is None or end is None:
        end = today
        start = today - timedelta(days=int(range_) - 1)
    text, faults = overview_text_filters(params)
    for name, problem in faults.items():
        if problem == "length":
            errors.append(f"The {name} filter holds at most {MAX_FILTER_CHARS} characters.")
        else:
            errors.append(f"Unknown source: one of {', '.join(attribution_selectors.SOURCES)}.")
    return {"range": range_, "start": start, "end": end, **text}, errors


def _selected(filters: dict[str, Any]) -> dict[str, Any]:
    # The selectors' arguments: no filter is None.
    return {
        "start": filters["start"],
        "end": filters["end"],
        **{name: filters[name] or None for name in OVERVIEW_FILTERS},
    }


def _query(filters: dict[str, Any], **changes: str) -> str:
    merged = {**filters, **changes}
    params = {"range": merged["range"]}
    if merged["range"] == "custom":
        params["start"] = merged["start"].isoformat()
        params["end"] = merged["end"].isoformat()
    for name in ("model", "agent", "source", "session", "category", "label", "format", "table"):
        if merged.get(name):
            params[name] = merged[name]
    return "?" + urlencode(params)


def _share_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    top = max((r["tokens"] for r in rows), default=0)
    return [{**r, "bar": (r["tokens"] / top) if top else 0.0} for r in rows]


def every_day(days: list[dict[str, Any]], *, start: date, end: date) -> list[dict[str, Any]]:
    """Each day from ``start`` to ``end``: the selector's row, or zeros for a day without turns
    (the selector lists days with turns only; the chart's axis and the CSV keep every day)."""
    held = {d["day"]: d for d in days}
    out = []
    for n in range((end - start).days + 1):
        day = start + timedelta(days=n)
        out.append(
            held.get(day)
            or {"day": day, "sessions": 0, "turns": 0, "tokens": 0, "cost": 0.0, "regions": {}}
        )
    return out


@login_required
def overview(request: HttpRequest) -> HttpResponse:
    """``/overview/``: the project's tokens, tools, files and windows over a range of days."""
    access = page_access(request)
    # Days are UTC days, as the rollups count them.
    filters, errors = overview_filters(request.GET, today=timezone.now().astimezone(UTC).date())
    behind = attribution_behind_project(project=access.project)
    data = attribution_selectors.project_overview(
        project=access.project,
        **_selected(filters),
    )
    data["unattributed_turns"] = behind
    days = every_day(data["days"], start=filters["start"], end=filters["end"])
    tables: dict[str, list[dict[str, Any]]] = {
        **data["top"],
        "near_window": data["near_window"],
        "compactions": data["compactions"],
        "days": day_rows(days),
    }
    if request.GET.get("format") == "csv":
        span = f"{filters['start'].isoformat()}-{filters['end'].isoformat()}"
        return _csv_table(request, OVERVIEW_TABLES, tables, lambda t: f"overview-{t}-{span}")
    top = [
        {
            "name": name,
            "title": OVERVIEW_TABLES[name][0],
            "rows": [
                # Each row leads to the sessions holding it, in the same range and filters.
                {
                    **r,
                    "url": reverse("overview-items")
                    + _query(filters, category=name, label=r["name"]),
                }
                for r in _share_rows(data["top"].get(name, []))
            ],
            "csv": _query(filters, format="csv", table=name),
        }
        for name in ("tools", "mcp_servers", "files", "instructions")
    ]
    totals = {
        "turns": sum(d["turns"] for d in data["days"]),
        "tokens": sum(d["tokens"] for d in data["days"]),
        "cost": sum(d["cost"] or 0 for d in data["days"]),
    }
    usage = data["usage"]
    chart = {
        "regions": list(USED_REGIONS),
        "days": [
            {
                "day": str(d["day"]),
                "sessions": d["sessions"],
                "turns": d["turns"],
                "tokens": d["tokens"],
                "cost": d["cost"],
                "regions": d["regions"],
            }
            for d in days
        ],
    }
    present = {r for d in data["days"] for r, n in d["regions"].items() if n}
    return render(
        request,
        "contexts/overview.html",
        {
            "access": access,
            "data": data,
            "days": days,
            "filters": filters,
            "errors": errors,
            "ranges": list(RANGES.items()),
            "top": top,
            "totals": totals,
            "usage": usage,
            "usage_gap": usage["reported"] - usage["counted"],
            "usage_gap_share": (
                (usage["reported"] - usage["counted"]) / usage["counted"]
                if usage["counted"]
                else None
            ),
            "chart": chart,
            "regions": [r for r in USED_REGIONS if r in present],
            "csv": {
                name: _query(filters, format="csv", table=name)
                for name in ("near_window", "compactions", "days")
            },
            "empty": not any(d["turns"] for d in data["days"]),
        },
    )


@login_required
def overview_items(request: HttpRequest) -> HttpResponse:
    """``/overview/items/?category=&label=``: the sessions of the overview's range and filters
    that hold one tool, MCP server, file or instruction block, with the turns that held it."""
    access = page_access(request)
    filters, errors = overview_filters(request.GET, today=timezone.now().astimezone(UTC).date())
    category = request.GET.get("category", "")
    label = request.GET.get("label", "")
    problem = None
    if category not in OVERVIEW_TABLES or category not in attribution_selectors.TOP_LISTS:
        titles = ", ".join(
            OVERVIEW_TABLES[name][0].lower() for name in attribution_selectors.TOP_LISTS
        )
        problem = f"Unknown list {category[:40]!r}: one of {titles}."
    elif not label_fits(label):
        problem = f"Which name? A name of the list, 1 to {MAX_LABEL_CHARS} characters."
    data = None
    if problem is None:
        behind = attribution_behind_project(project=access.project)
        data = attribution_selectors.overview_item_sessions(
            project=access.project,
            category=category,
            label=label,
            **_selected(filters),
        )
        data["unattributed_turns"] = behind
    if request.GET.get("format") == "csv":
        if data is None:
            return HttpResponse(problem, status=400, content_type="text/plain; charset=utf-8")
        return csv_download(
            name=f"overview-{category}-sessions-{filters['start'].isoformat()}",
            columns=ITEM_SESSION_COLUMNS,
            rows=data["sessions"],
        )

    def turn_url(external_id: str, index: int | None) -> str | None:
        if index is None:
            return None
        return reverse("turn-detail", args=[external_id, index]) + "#attribution"

    rows = []
    if data is not None:
        top = max((r["token_turns"] for r in data["sessions"]), default=0)
        for r in data["sessions"]:
            rows.append(
                {
                    **r,
                    "bar": r["token_turns"] / top if top else 0.0,
                    "url": reverse("session-attribution", args=[r["session"]]) + "#items",
                    "first_url": turn_url(r["session"], r["first_turn"]),
                    "last_url": turn_url(r["session"], r["last_turn"]),
                }
            )
    return render(
        request,
        "contexts/overview_items.html",
        {
            "access": access,
            "filters": filters,
            "errors": [*errors, *([problem] if problem else [])],
            "category": category,
            "title": OVERVIEW_TABLES[category][0] if problem is None else None,
            "label": label,
            "data": data,
            "rows": rows,
            "overview_url": reverse("overview") + _query(filters),
            "csv": _query(filters, category=category, label=label, format="csv")
            if problem is None
            else None,
        },
    )


# --- session attribution ------------------------------------------------------------------------


def _span_rows(
    rows: list[dict[str, Any]], *, turns: int, turn_url: Callable[[int], str]
) -> list[dict[str, Any]]:
    span = max(turns, 1)
    return [
        {
            **r,
            "span_left": r["first_turn"] / span,
            "span_width": (r["last_turn"] - r["first_turn"] + 1) / span,
            "first_url": turn_url(r["first_turn"]),
            "last_url": turn_url(r["last_turn"]),
        }
        for r in rows
    ]


@login_required
def session_attribution(request: HttpRequest, external_id: str) -> HttpResponse:
    """``/sessions/<id>/attribution/``: what grew a session's context and what it carried."""
    access = page_access(request)
    session = page_session(access, external_id)
    behind = attribution_behind(session_id=session.pk)
    data = attribution_selectors.session_attribution(session=session)
    data["unattributed_turns"] = behind
    if request.GET.get("format") == "csv":
        return _csv_table(
            request, SESSION_TABLES, data, lambda t: f"{session.external_id}-attribution-{t}"
        )

    def turn_url(index: int) -> str:
        # The turn page's Attribution section.
        return reverse("turn-detail", args=[session.external_id, index]) + "#attribution"

    turns = data["turns"]
    growth_top = max((r["introduced"] for r in data["growth"]), default=0)
    output_top = max((r["output_tokens"] for r in data["tools"]), default=0)
    return render(
        request,
        "contexts/session_attribution.html",
        {
            "access": access,
            "session": session,
            "data": data,
            "items": _span_rows(data["items"], turns=turns, turn_url=turn_url),
            "growth": [
                {**r, "bar": r["introduced"] / growth_top if growth_top else 0.0}
                for r in _span_rows(data["growth"], turns=turns, turn_url=turn_url)
            ],
            "files_reread": [
                {**r, "links": [(t, turn_url(t)) for t in r["turns"]]} for r in data["files_reread"]
            ],
            "unreferenced": [
                {**r, "url": turn_url(r["turn"])} for r in data["unreferenced_outputs"]
            ],
            "tools": [
                {**r, "bar": r["output_tokens"] / output_top if output_top else 0.0}
                for r in data["tools"]
            ],
            "csv": {name: f"?format=csv&table={name}" for name in SESSION_TABLES},
            "grouped_kinds": GROUPED,
        },
    )
