"""The REST API of sessions: list (filter, sort, pages) and read one. Setting a session's policy is
in :mod:`ctxweb.api.operations`."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from ctxweb.api.access import require_access, require_session
from ctxweb.api.errors import ApiError
from ctxweb.api.pagination import StrictLimitOffsetPagination, page_parameters
from ctxweb.api.serializers import (
    SessionPageOutput,
)
from ctxweb.contexts import selectors
from ctxweb.shapes import SessionOutput

if TYPE_CHECKING:
    from ctxweb.contexts.models import Session


def session_data(session: Session) -> dict[str, Any]:
    """A session in its one shape (:class:`ctxweb.shapes.SessionOutput`)."""
    return dict(SessionOutput(session).data)


class SessionListApi(APIView):
    """The project's sessions: filter by ``q``, ``model``, ``min_fill``/``max_fill``; ``sort``."""

    @extend_schema(
        parameters=[
            OpenApiParameter("q", str),
            OpenApiParameter("model", str),
            OpenApiParameter("min_fill", float),
            OpenApiParameter("max_fill", float),
            OpenApiParameter("sort", str, enum=list(selectors.SESSION_SORTS)),
            *page_parameters(),
        ],
        responses={200: SessionPageOutput},
        operation_id="v1_sessions_list",
    )
    def get(self, request: Request) -> Response:
        access = require_access(request)
        params = request.query_params

        def fill(name: str) -> float | None:
            raw = params.get(name)
            if raw is None:
                return None
            try:
                value = float(raw)
            except ValueError:
                value = math.nan
            if not math.isfinite(value):
                raise ApiError(f"{name} must be a number.", fields={name: "expected a number"})
            return value

        sort = params.get("sort", "recent")
        if sort not in selectors.SESSION_SORTS:
            raise ApiError(
                f"Unknown sort {sort!r}.",
                fields={"sort": f"one of {', '.join(selectors.SESSION_SORTS)}"},
            )
        sessions = selectors.session_list(
            project=access.project,
            search=params.get("q", ""),
            model=params.get("model", ""),
            min_fill=fill("min_fill"),
            max_fill=fill("max_fill"),
            sort=sort,
        )
        paginator = StrictLimitOffsetPagination()
        page = paginator.paginate_queryset(sessions, request, view=self) or []
        return paginator.get_paginated_response([session_data(s) for s in page])


class SessionDetailApi(APIView):
    @extend_schema(responses={200: SessionOutput})
    def get(self, request: Request, external_id: str) -> Response:
        session = require_session(require_access(request), external_id)
        return Response(session_data(session))


class SessionExportApi(APIView):
    """The session out again: ``?format=otlp-json`` (default; an OTLP JSON export of one
    OpenTelemetry GenAI span per turn, which ``POST /v1/traces`` reads back whole) or ``jsonl``
    (one turn per line, the request as ingested). Streamed as a download."""

    @extend_schema(
        parameters=[
            OpenApiParameter("format", str, enum=list(selectors.EXPORT_FORMATS)),
        ],
        responses={
            (200, "application/json"): OpenApiTypes.OBJECT,
            (200, "application/x-ndjson"): OpenApiTypes.STR,
        },
        operation_id="v1_sessions_export_retrieve",
    )
    def get(self, request: Request, external_id: str) -> StreamingHttpResponse:
        session = require_session(require_access(request), external_id)
        format = request.query_params.get("format", "otlp-json")
        if format not in selectors.EXPORT_FORMATS:
            raise ApiError(
                f"Unknown export format {format!r}.",
                fields={"format": f"one of {', '.join(selectors.EXPORT_FORMATS)}"},
            )
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in session.external_id)
        if format == "jsonl":
            body = selectors.session_export_jsonl(session=session)
            media, suffix = "application/x-ndjson", "jsonl"
        else:
            body = selectors.session_export_otlp(session=session)
            media, suffix = "application/json", "otlp.json"
        response = StreamingHttpResponse(body, content_type=media)
        response["Content-Disposition"] = f'attachment; filename="{safe[:100]}.{suffix}"'
        return response
