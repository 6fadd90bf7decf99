"""The attribution tables' one shape (issue 36), for the API and the pages alike: the CSV columns
of a session's and the overview's tables (:data:`SESSION_TABLE_COLUMNS`,
:data:`OVERVIEW_TABLE_COLUMNS`), the CSV they download as (:func:`csv_download`), and the bounds
and parsing of the overview's range and filters, which the API and the pages each report in
their own way."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping, Sequence
from datetime import date
from typing import Any, Literal

from django.http import HttpResponse

from ctxweb.contexts.selectors import USED_REGIONS
from ctxweb.contexts.selectors import attribution as attribution_selectors

#: The longest range of days an overview covers (a day is one rollup row per session).
MAX_RANGE_DAYS = 400
#: The range of days an overview covers by default, ending today (UTC).
DEFAULT_DAYS = 30
#: The longest model, agent, source or session filter.
MAX_FILTER_CHARS = 200
#: The longest name of a top list's row (the rollups keep 500 characters).
MAX_LABEL_CHARS = 500
#: The overview's text filters, as the query string names them.
OVERVIEW_FILTERS = ("model", "agent", "source", "session")
#: A spreadsheet runs a cell starting with one of these as a formula: such cells are written
#: with a leading apostrophe (names are chosen by whoever posts turns).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")

_ITEM_COLUMNS = (
    "kind",
    "group",
    "name",
    "region",
    "tokens_now",
    "tokens_peak",
    "token_turns",
    "introduced",
    "first_turn",
    "last_turn",
    "turns_present",
)
_TOP_COLUMNS = ("name", "tokens", "sessions", "turns")
#: A session's attribution tables and their CSV columns.
SESSION_TABLE_COLUMNS: dict[str, tuple[str, ...]] = {
    "items": _ITEM_COLUMNS,
    "growth": _ITEM_COLUMNS,
    "files_reread": ("name", "reads", "tokens", "turns"),
    "unreferenced_outputs": ("tool", "name", "turn", "tokens"),
    "tools": ("name", "calls", "output_tokens", "median_output_tokens"),
}
#: The overview's tables and their CSV columns (``days``: one column per region).
OVERVIEW_TABLE_COLUMNS: dict[str, tuple[str, ...]] = {
    "days": ("day", "sessions", "turns", "tokens", "cost", *USED_REGIONS),
    "tools": _TOP_COLUMNS,
    "mcp_servers": _TOP_COLUMNS,
    "files": _TOP_COLUMNS,
    "instructions": _TOP_COLUMNS,
    "near_window": ("session", "peak_fill", "turns", "over_window_turns"),
    "compactions": ("strategy", "count", "tokens_saved"),
}
#: The columns of the sessions holding one name of a top list.
ITEM_SESSION_COLUMNS = (
    "session",
    "token_turns",
    "tokens_now",
    "turns_present",
    "turns",
    "first_turn",
    "last_turn",
)


def day_rows(days: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The overview's days as rows of the ``days`` table: a region without tokens that day is
    a 0 in its column, whether or not the day names it."""
    return [
        {
            **{k: v for k, v in day.items() if k != "regions"},
            **{r: day["regions"].get(r, 0) for r in USED_REGIONS},
        }
        for day in days
    ]


def _cell(value: Any) -> Any:
    if isinstance(value, list | tuple):
        value = " ".join(str(v) for v in value)
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return "" if value is None else value


def csv_download(
    *, name: str, columns: Sequence[str], rows: Iterable[Mapping[str, Any]]
) -> HttpResponse:
    """``rows`` as a CSV download named ``name`` (kept to safe characters: session ids and
    filters are anyone's text): a header of ``columns``, then one line per row, lists joined
    by spaces and formulas neutralised (:data:`FORMULA_STARTS`)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(columns)
    for row in rows:
        writer.writerow([_cell(row.get(column)) for column in columns])
    response = HttpResponse(buffer.getvalue(), content_type="text/csv; charset=utf-8")
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:120]
    response["Content-Disposition"] = f'attachment; filename="{safe}.csv"'
    return response


def parse_day(raw: str) -> date | None:
    """An ISO date (``YYYY-MM-DD``, from the text's first ten characters), or None."""
    try:
        return date.fromisoformat(raw[:10])
    except ValueError:
        return None


def range_error(start: date, end: date) -> Literal["order", "length"] | None:
    """What makes ``start`` to ``end`` no overview range: ``"order"`` (the end is before the
    start), ``"length"`` (more than :data:`MAX_RANGE_DAYS` days), or None."""
    if end < start:
        return "order"
    if (end - start).days + 1 > MAX_RANGE_DAYS:
        return "length"
    return None


def overview_text_filters(
    params: Mapping[str, Any],
) -> tuple[dict[str, str], dict[str, Literal["length", "unknown"]]]:
    """The overview's text filters (:data:`OVERVIEW_FILTERS`) from a query string, stripped
    (``""``: no filter), and the ones at fault, in the order to report them: ``"length"``
    (more than :data:`MAX_FILTER_CHARS` characters), then ``"unknown"`` (a source not in
    :data:`~ctxweb.contexts.selectors.attribution.SOURCES`). A filter at fault is ``""``."""
    values: dict[str, str] = {}
    faults: dict[str, Literal["length", "unknown"]] = {}
    for name in OVERVIEW_FILTERS:
        value = params.get(name, "").strip()
        if len(value) > MAX_FILTER_CHARS:
            faults[name] = "length"
            value = ""
        values[name] = value
    if values["source"] and values["source"] not in attribution_selectors.SOURCES:
        faults["source"] = "unknown"
        values["source"] = ""
    return values, faults


def label_fits(label: str) -> bool:
    """Whether ``label`` can name a row of a top list: 1 to :data:`MAX_LABEL_CHARS` characters."""
    return 0 < len(label) <= MAX_LABEL_CHARS
