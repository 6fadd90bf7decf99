"""The REST API of sessions: list (filter, sort, pages) and read one. Setting a session's policy is
in :mod:`ctxweb.api.operations`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from ctxweb.api.access import require_access, require_session
from ctxweb.api.errors import ApiError
from ctxweb.api.serializers import (
    SessionOutput,
    SessionPageOutput,
)
from ctxweb.contexts import selectors

if TYPE_CHECKING:
    from ctxweb.contexts.models import Session


def session_data(session: Session) -> dict[str, Any]:
    usable = max(0, session.context_window - session.output_reserve)
    return {
        "external_id": session.external_id,
        "format": session.format,
        "model": session.model,
        "context_window": session.context_window,
        "output_reserve": session.output_reserve,
        "usable": usable,
        "encoding": session.encoding,
        "approximate": session.approximate,
        "turn_count": session.turn_count,
        "last_total_tokens": session.last_total_tokens,
        "fill": session.last_fill,
        "compaction_count": session.compaction_count,
        "source": session.source,
        "created_at": session.created_at,
        "last_activity_at": session.last_activity_at,
    }


class SessionListApi(APIView):
    """The project's sessions: filter by ``q``, ``model``, ``min_fill``/``max_fill``; ``sort``."""

    @extend_schema(
        parameters=[
            OpenApiParameter("q", str),
            OpenApiParameter("model", str),
            OpenApiParameter("min_fill", float),
            OpenApiParameter("max_fill", float),
            OpenApiParameter("sort", str, enum=list(selectors.SESSION_SORTS)),
            OpenApiParameter("limit", int),
            OpenApiParameter("offset", int),
        ],
        responses={200: SessionPageOutput},
        operation_id="v1_sessions_list",
    )
    def get(self, request: Request) -> Response:
        access = require_access(request)
        params = request.query_params

        def fill(name: str) -> float | None:
            raw = params.get(name)
            if raw in (None, ""):
                return None
            try:
                return float(raw)
            except ValueError:
                raise ApiError(
                    f"{name} must be a number.", fields={name: "expected a number"}
                ) from None

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
        limit, offset = _page(params)
        total = sessions.count()
        page = [session_data(s) for s in sessions[offset : offset + limit]]
        return Response({"count": total, "limit": limit, "offset": offset, "results": page})


def _page(params: Any) -> tuple[int, int]:
    try:
        limit = int(params.get("limit", 50))
        offset = int(params.get("offset", 0))
    except ValueError:
        raise ApiError("limit and offset must be integers.", fields={"limit": "integer"}) from None
    if not 1 <= limit <= 500:
        raise ApiError("limit must be between 1 and 500.", fields={"limit": "between 1 and 500"})
    if offset < 0:
        raise ApiError("offset must not be negative.", fields={"offset": "not negative"})
    return limit, offset


class SessionDetailApi(APIView):
    @extend_schema(responses={200: SessionOutput})
    def get(self, request: Request, external_id: str) -> Response:
        session = require_session(require_access(request), external_id)
        return Response(session_data(session))
