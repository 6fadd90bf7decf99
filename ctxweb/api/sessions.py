"""The REST API: one class per operation; each parses, authorizes, calls a service or selector
and renders. Errors use the contract's shape (:mod:`ctxweb.api.errors`)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from compaction.messages import Context
from compaction.turns import orphans
from ctxweb.accounts.access import Access, access_for_request
from ctxweb.api.errors import ApiError
from ctxweb.api.serializers import (
    SessionOutput,
    SessionPageOutput,
    TurnIngestInput,
    TurnIngestOutput,
    TurnSummaryOutput,
)
from ctxweb.contexts import selectors, services
from ctxweb.contexts.models import Session

#: The longest session id: the column's length.
EXTERNAL_ID_MAX = 200


class BearerKeyScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    """Documents ``Authorization: Bearer <key>`` in the schema (and lets the docs page send it)."""

    target_class = "ctxweb.api.authentication.ApiKeyAuthentication"
    name = "apiKey"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "http", "scheme": "bearer", "description": "a project's API key"}


def not_found(what: str) -> ApiError:
    return ApiError(f"{what} not found.", code="not_found", status_code=status.HTTP_404_NOT_FOUND)


def require_access(request: Request) -> Access:
    access = access_for_request(request)
    if access is None:  # logged in, but a member of no project
        raise not_found("Project")
    return access


def require_writer(access: Access) -> None:
    """Viewers read: posting turns and importing take an API key or the operator role."""
    if not access.can_write:
        raise ApiError(
            "Viewers read only: post turns and import with an API key, or ask a project admin"
            " for the operator role.",
            code="permission_denied",
            status_code=status.HTTP_403_FORBIDDEN,
        )


def require_session(access: Access, external_id: str) -> Session:
    session = selectors.session_get(project=access.project, external_id=external_id)
    if session is None:
        raise not_found(f"Session {external_id!r}")
    return session


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


class HealthApi(APIView):
    """Liveness: answers without touching anything else."""

    permission_classes = [AllowAny]
    authentication_classes: list[type] = []

    @extend_schema(responses={200: dict})
    def get(self, request: Request) -> Response:
        return Response({"status": "ok"})


class TurnIngestApi(APIView):
    """Ingest one model call; the session is created on first use."""

    @extend_schema(
        request=TurnIngestInput, responses={201: TurnIngestOutput, 200: TurnIngestOutput}
    )
    def post(self, request: Request, external_id: str) -> Response:
        access = require_access(request)
        require_writer(access)
        if not isinstance(request.data, dict):
            raise ApiError(
                "The body must be a JSON object.", fields={"request": "expected an object"}
            )
        if len(external_id) > EXTERNAL_ID_MAX:
            raise ApiError(
                f"A session id has at most {EXTERNAL_ID_MAX} characters.",
                fields={"external_id": f"at most {EXTERNAL_ID_MAX} characters"},
            )
        data = TurnIngestInput(data=request.data)
        data.is_valid(raise_exception=True)
        body = data.validated_data
        context = services.turn_request_parse(
            project=access.project,
            external_id=external_id,
            format=body["format"],
            request=body["request"],
        )
        if not body.get("allow_orphans"):
            refuse_orphans(context, body["request"])
        try:
            result = services.turn_ingest(
                project=access.project,
                external_id=external_id,
                context=context,
                model=body.get("model") or None,
                response=body.get("response"),
                usage=body.get("usage"),
                turn_id=body.get("turn_id"),
                body=request.data,
                context_window=body.get("context_window"),
            )
        except services.TurnConflict:
            raise ApiError(
                "This turn_id was already used with a different body.",
                code="conflict",
                status_code=status.HTTP_409_CONFLICT,
                fields={"turn_id": "reused with a different body"},
            ) from None
        turn = result.turn
        return Response(
            {
                "session": external_id,
                "index": turn.index,
                "total_tokens": turn.total_tokens,
                "regions": turn.regions,
                "context_window": turn.context_window,
                "usage_ratio": turn.total_tokens / turn.context_window,
                "reported_input_tokens": turn.reported_input_tokens,
                "events": turn.events,
            },
            status=status.HTTP_201_CREATED if result.created else status.HTTP_200_OK,
        )


def refuse_orphans(context: Context, request: dict[str, Any]) -> None:
    """Refuse a context with a tool result but no call before it, or a call with no result after
    it: providers reject both, so such a context is a broken agent's. The error names the raw
    field (``messages.3.tool_call_id``); ``"allow_orphans": true`` in the body accepts it.

    A Responses request that continues a stored response (``previous_response_id``,
    ``conversation``) answers calls the provider keeps: its results are not orphans.
    """
    found = orphans(context.messages)
    if found.ok:
        return
    continues = context.format == "openai-responses" and any(
        request.get(key) for key in ("previous_response_id", "conversation")
    )
    fields: dict[str, str] = {}
    for ref in found.calls:
        fields[_tool_id_path(context, request, ref.index, ref.id, call=True)] = (
            f"tool call {ref.id!r} has no tool result after it"
        )
    if not continues:
        for ref in found.results:
            fields[_tool_id_path(context, request, ref.index, ref.id, call=False)] = (
                f"tool result for {ref.id!r} has no tool call before it"
            )
    if not fields:
        return
    raise ApiError(
        'The context has orphaned tool calls or results; send "allow_orphans": true to store it'
        " as it is.",
        code="orphaned_tool_messages",
        fields=fields,
    )


def _tool_id_path(
    context: Context, request: dict[str, Any], index: int, tool_id: str, *, call: bool
) -> str:
    """The raw path of the id of tool call or result ``tool_id`` in message ``index``."""
    key = "input" if context.format == "openai-responses" else "messages"
    items = request.get(key)
    raw = items[index] if isinstance(items, list) and index < len(items) else None
    where = f"{key}.{index}"
    if not isinstance(raw, dict):
        return where
    if context.format == "openai-responses":
        return f"{where}.call_id"
    if context.format == "openai-chat":
        if not call:
            return f"{where}.tool_call_id"
        calls = raw.get("tool_calls")
        for j, item in enumerate(calls if isinstance(calls, list) else []):
            if isinstance(item, dict) and item.get("id") == tool_id:
                return f"{where}.tool_calls.{j}.id"
        return f"{where}.tool_calls"
    block_type, id_key = ("tool_use", "id") if call else ("tool_result", "tool_use_id")
    blocks = raw.get("content")
    for k, block in enumerate(blocks if isinstance(blocks, list) else []):
        if (
            isinstance(block, dict)
            and block.get("type") == block_type
            and block.get(id_key) == tool_id
        ):
            return f"{where}.content.{k}.{id_key}"
    return f"{where}.content"


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


class TurnListApi(APIView):
    """Per-turn regions for the chart."""

    @extend_schema(responses={200: TurnSummaryOutput(many=True)})
    def get(self, request: Request, external_id: str) -> Response:
        session = require_session(require_access(request), external_id)
        turns = [
            {
                "index": t.index,
                "total_tokens": t.total_tokens,
                "regions": t.regions,
                "reported_input_tokens": t.reported_input_tokens,
                "events": t.events,
                "context_window": t.context_window,
                "max_output_tokens": t.max_output_tokens,
                "created_at": t.created_at,
            }
            for t in selectors.turn_list(session=session)
        ]
        return Response(turns)


class TurnDetailApi(APIView):
    """One turn's messages, each with role, region, tokens, placeholders and artifact ids."""

    @extend_schema(responses={200: dict})
    def get(self, request: Request, external_id: str, index: int) -> Response:
        session = require_session(require_access(request), external_id)
        turn = selectors.turn_get(session=session, index=index)
        if turn is None:
            raise not_found(f"Turn {index}")
        return Response(selectors.turn_detail(turn=turn))


class TurnsApi(TurnIngestApi, TurnListApi):
    """``sessions/{external_id}/turns``: POST ingests a turn, GET lists them for the chart."""


#: The error shape every API error uses (``ctxweb.api.errors``), as an OpenAPI component.
ERROR_SCHEMA = {
    "type": "object",
    "properties": {
        "error": {
            "type": "object",
            "properties": {
                "code": {"type": "string"},
                "message": {"type": "string"},
                "fields": {"type": "object", "additionalProperties": {"type": "string"}},
            },
            "required": ["code", "message", "fields"],
        }
    },
    "required": ["error"],
}
ERROR_STATUSES = {
    "400": "Bad input: `fields` names each bad field by its path.",
    "401": "No valid credentials (a missing, unknown or revoked API key).",
    "403": "Not allowed: only operators apply; also a session login's missing CSRF token.",
    "404": "Not found, or in another project.",
    "429": "Over the rate limit: retry after `Retry-After` seconds.",
}
BODY_STATUSES = {
    "409": "A conflict: a turn_id reused with another body, or a session already busy.",
    "413": "The body is over the size limit.",
    "415": "The body's media type is not one this endpoint reads.",
}


def document_errors(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """drf-spectacular postprocessing hook: the error responses of every operation, and path
    parameters as the URL converters match them (``int``: digits; ``str``: no slash)."""
    result.setdefault("components", {}).setdefault("schemas", {})["Error"] = ERROR_SCHEMA
    error = {"schema": {"$ref": "#/components/schemas/Error"}}
    for path, methods in result.get("paths", {}).items():
        for method, operation in methods.items():
            for parameter in operation.get("parameters", []):
                if parameter.get("in") != "path":
                    continue
                schema = parameter.setdefault("schema", {})
                if schema.get("type") == "integer":
                    schema.setdefault("minimum", 0)
                elif schema.get("type") == "string":
                    schema.setdefault("pattern", "^[^/]+$")
            if path.endswith("/health"):
                continue
            statuses = dict(ERROR_STATUSES)
            if method in ("post", "put", "patch"):
                statuses |= BODY_STATUSES
            responses = operation.setdefault("responses", {})
            # An endpoint that can answer text renders its errors as text too (same JSON body).
            types = {t for r in responses.values() for t in r.get("content", {})}
            content = dict.fromkeys(sorted(types | {"application/json"}), error)
            for status_code, description in statuses.items():
                responses.setdefault(status_code, {"description": description, "content": content})
    return result
