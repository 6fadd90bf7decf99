"""The REST API of attribution rollups (issue 36): a session's attribution and the project
overview, each as JSON or, with ``?format=csv&table=<name>``, one of its tables as CSV.

``GET sessions/{id}/attribution``: :func:`ctxweb.contexts.selectors.attribution.session_attribution`
(tables: items, growth, files_reread, unreferenced_outputs, tools).
``GET overview?start=&end=&model=&agent=&source=&session=``:
:func:`~ctxweb.contexts.selectors.attribution.project_overview` over UTC days ``start`` to
``end`` (ISO dates; by default the last 30 days ending today; at most :data:`MAX_RANGE_DAYS`),
filtered by model, agent (the session's format), source (proxy, otlp, langfuse, api, import)
and a substring of the session id (tables: days, tools, mcp_servers, files, instructions,
near_window, compactions).
``GET overview/items?category=&label=&...``: the overview's range and filters, the sessions
holding one name of a top list
(:func:`~ctxweb.contexts.selectors.attribution.overview_item_sessions`; table: sessions).
All read rollup rows only.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from typing import Any

from django.http import HttpResponse
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from ctxweb.api.access import require_access, require_session
from ctxweb.api.errors import ApiError
from ctxweb.contexts.selectors import attribution as attribution_selectors
from ctxweb.contexts.services.attribution import (
    attribution_behind,
    attribution_behind_project,
)
from ctxweb.tables import (
    DEFAULT_DAYS,
    ITEM_SESSION_COLUMNS,
    MAX_FILTER_CHARS,
    MAX_LABEL_CHARS,
    MAX_RANGE_DAYS,
    OVERVIEW_TABLE_COLUMNS,
    SESSION_TABLE_COLUMNS,
    csv_download,
    day_rows,
    label_fits,
    overview_text_filters,
    parse_day,
    range_error,
)


def _table(request: Request, tables: Mapping[str, Sequence[str]]) -> str | None:
    """The table a ``?format=csv`` request asks for, or None for JSON."""
    format = request.query_params.get("format", "json")
    if format not in ("json", "csv"):
        raise ApiError(f"Unknown format {format[:40]!r}.", fields={"format": "json or csv"})
    if format == "json":
        return None
    table = request.query_params.get("table", "")
    if table not in tables:
        raise ApiError(
            f"Unknown table {table[:40]!r}.", fields={"table": f"one of {', '.join(tables)}"}
        )
    return table


class SessionAttributionApi(APIView):
    """A session's attribution over its turns: the items that held the most token-turns and
    grew it most, files read more than once, outputs never referred to again, per tool."""

    @extend_schema(responses={200: dict})
    def get(self, request: Request, external_id: str) -> Response | HttpResponse:
        session = require_session(require_access(request), external_id)
        table = _table(request, SESSION_TABLE_COLUMNS)
        behind = attribution_behind(session_id=session.pk)
        data = attribution_selectors.session_attribution(session=session)
        data["unattributed_turns"] = behind
        if table is not None:
            name = f"{session.external_id}-attribution-{table}"
            return csv_download(name=name, columns=SESSION_TABLE_COLUMNS[table], rows=data[table])
        return Response(data)


def _day(request: Request, name: str) -> datetime.date | None:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return None
    day = parse_day(raw)
    if day is None:
        raise ApiError(f"Bad {name} date.", fields={name: "an ISO date: YYYY-MM-DD"})
    return day


def overview_filters(request: Request) -> dict[str, Any]:
    """The overview's range and filters from the query string, each checked."""
    today = timezone.now().astimezone(datetime.UTC).date()
    end = _day(request, "end") or today
    start = _day(request, "start") or end - datetime.timedelta(days=DEFAULT_DAYS - 1)
    fault = range_error(start, end)
    if fault == "order":
        raise ApiError("The end is before the start.", fields={"end": "on or after start"})
    if fault == "length":
        raise ApiError(
            f"A range holds at most {MAX_RANGE_DAYS} days.",
            fields={"start": f"at most {MAX_RANGE_DAYS} days before end"},
        )
    values, faults = overview_text_filters(request.query_params)
    for name, problem in faults.items():
        if problem == "length":
            raise ApiError(
                f"The {name} filter is too long.",
                fields={name: f"at most {MAX_FILTER_CHARS} characters"},
            )
        raise ApiError(
            "Unknown source.",
            fields={"source": f"one of {', '.join(attribution_selectors.SOURCES)}"},
        )
    return {"start": start, "end": end, **{name: value or None for name, value in values.items()}}


class OverviewApi(APIView):
    """The project's sessions over a range of days: tokens and cost by day and region, the top
    tools, MCP servers, files and instruction blocks, sessions near their window, compactions,
    reported usage against ctxweb's count."""

    @extend_schema(responses={200: dict})
    def get(self, request: Request) -> Response | HttpResponse:
        access = require_access(request)
        filters = overview_filters(request)
        table = _table(request, OVERVIEW_TABLE_COLUMNS)
        behind = attribution_behind_project(project=access.project)
        data = attribution_selectors.project_overview(project=access.project, **filters)
        data["unattributed_turns"] = behind
        if table is None:
            return Response(data)
        if table == "days":
            rows: list[dict[str, Any]] = day_rows(data["days"])
        elif table in data["top"]:
            rows = data["top"][table]
        else:
            rows = data[table]
        name = f"overview-{table}-{filters['start'].isoformat()}-{filters['end'].isoformat()}"
        return csv_download(name=name, columns=OVERVIEW_TABLE_COLUMNS[table], rows=rows)


class OverviewItemsApi(APIView):
    """The sessions of the overview's range and filters that hold one tool, MCP server, file
    or instruction block (``category`` and ``label``), largest token-turns first, with the
    first and last turn that held it."""

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "category",
                OpenApiTypes.STR,
                required=True,
                enum=list(attribution_selectors.TOP_LISTS),
                description="which top list the name is from",
            ),
            OpenApiParameter(
                "label",
                {"type": "string", "minLength": 1, "maxLength": MAX_LABEL_CHARS},
                required=True,
                description=f"the name in that list (1 to {MAX_LABEL_CHARS} characters)",
            ),
        ],
        responses={200: dict},
    )
    def get(self, request: Request) -> Response | HttpResponse:
        access = require_access(request)
        filters = overview_filters(request)
        category = request.query_params.get("category", "")
        if category not in attribution_selectors.TOP_LISTS:
            raise ApiError(
                f"Unknown category {category[:40]!r}.",
                fields={"category": f"one of {', '.join(attribution_selectors.TOP_LISTS)}"},
            )
        label = request.query_params.get("label", "")
        if not label_fits(label):
            raise ApiError(
                f"A label is required, at most {MAX_LABEL_CHARS} characters.",
                fields={"label": f"1 to {MAX_LABEL_CHARS} characters"},
            )
        table = _table(request, {"sessions": ITEM_SESSION_COLUMNS})
        behind = attribution_behind_project(project=access.project)
        data = attribution_selectors.overview_item_sessions(
            project=access.project, category=category, label=label, **filters
        )
        data["unattributed_turns"] = behind
        if table is None:
            return Response(data)
        name = f"overview-{category}-sessions-{filters['start'].isoformat()}"
        return csv_download(name=name, columns=ITEM_SESSION_COLUMNS, rows=data["sessions"])
