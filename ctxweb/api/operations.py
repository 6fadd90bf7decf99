"""The REST API of operations and managed contexts: apply a strategy, list a session's operations,
follow one, undo it, fetch the context to send next, and set a session's automatic policy. Every
member and key reads; only operators apply, undo and set policies (viewers and ingest keys are
told so: 403); outsiders see nothing (404)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.urls import reverse
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import BaseThrottle
from rest_framework.views import APIView

from ctxweb.accounts.access import Access, actor_for_request
from ctxweb.api.access import not_found, require_access, require_session
from ctxweb.api.errors import ApiError
from ctxweb.api.pagination import StrictLimitOffsetPagination, page_parameters
from ctxweb.api.schema import example
from ctxweb.api.sessions import SessionDetailApi, session_data
from ctxweb.api.strategies import STRATEGY_IDS, StrategyField
from ctxweb.api.throttling import ApiRateThrottle
from ctxweb.contexts import selectors
from ctxweb.contexts.services import deletion, operations, policy
from ctxweb.numbers import MAX_COUNT
from ctxweb.shapes import OperationOutput

if TYPE_CHECKING:
    from ctxweb.contexts.models import Operation


def require_operator(access: Access) -> None:
    if not access.can_operate:
        raise ApiError(
            "Only operators may do this: ask a project admin for the operator role, or use an"
            " operator API key (ingest keys post and read only).",
            code="permission_denied",
            status_code=status.HTTP_403_FORBIDDEN,
        )


def actor_of(request: Request) -> Any:
    """The API key or the dashboard user behind a request."""
    return actor_for_request(request)


def conflict(message: str, field: str = "session") -> ApiError:
    return ApiError(
        message, code="conflict", status_code=status.HTTP_409_CONFLICT, fields={field: message}
    )


def operation_data(operation: Operation) -> dict[str, Any]:
    """An operation in its one shape (:class:`ctxweb.shapes.OperationOutput`)."""
    return dict(OperationOutput(operation).data)


class OperationInput(serializers.Serializer):  # type: ignore[type-arg]
    strategy = StrategyField(max_length=64, min_length=1)
    params = serializers.DictField(required=False, allow_null=True)


class OperationCreatedOutput(serializers.Serializer):  # type: ignore[type-arg]
    id = serializers.IntegerField()
    status = serializers.CharField()
    url = serializers.CharField()


class OperationCreateApi(APIView):
    """Apply ``{"strategy", "params"}`` to the session's managed context in the background."""

    @extend_schema(
        request=OperationInput, responses={202: OperationCreatedOutput}, examples=[example("apply")]
    )
    def post(self, request: Request, external_id: str) -> Response:
        """Apply ``{"strategy", "params"}`` to the session's managed context in the background
        (operators and operator keys): ``202`` with the operation to follow at ``url``."""
        access = require_access(request)
        session = require_session(access, external_id)
        require_operator(access)
        data = OperationInput(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            operation = operations.operation_create(
                session=session,
                strategy=data.validated_data["strategy"],
                params=data.validated_data.get("params") or {},
                actor=actor_of(request),
            )
        except operations.OperationConflict as exc:
            raise conflict(str(exc)) from None
        operation.refresh_from_db(fields=["status"])
        return Response(
            {
                "id": operation.pk,
                "status": operation.status,
                "url": reverse("api-operation", args=[operation.pk]),
            },
            status=status.HTTP_202_ACCEPTED,
        )


class OperationPageOutput(serializers.Serializer):  # type: ignore[type-arg]
    count = serializers.IntegerField()
    limit = serializers.IntegerField()
    offset = serializers.IntegerField()
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    results = OperationOutput(many=True)


class OperationListApi(APIView):
    """The session's operations, newest first, in pages."""

    @extend_schema(
        parameters=page_parameters(),
        responses={200: OperationPageOutput},
        operation_id="v1_sessions_operations_list",
    )
    def get(self, request: Request, external_id: str) -> Response:
        """The session's operations, newest first, in pages, each as ``GET operations/{id}``
        answers it: every status, applied by a member, a key or the session's policy, undone
        ones included (``undone_at``). Every member and key of the project reads it."""
        session = require_session(require_access(request), external_id)
        paginator = StrictLimitOffsetPagination()
        found = selectors.operation_list_for_session(session=session)
        page = paginator.paginate_queryset(found, request, view=self) or []
        return paginator.get_paginated_response(OperationOutput(page, many=True).data)


class SessionOperationsApi(OperationListApi, OperationCreateApi):
    """``sessions/{external_id}/operations``: GET lists the session's operations, POST applies
    a strategy."""

    def get_throttles(self) -> list[BaseThrottle]:
        # The route is a costly one (applying plans over a whole context); reading the list is
        # as cheap as any other read, so it counts against the general limit only.
        throttles = super().get_throttles()
        if self.request.method in ("GET", "HEAD", "OPTIONS"):
            return [t for t in throttles if type(t) is ApiRateThrottle]
        return throttles


def require_operation(access: Access, operation_id: int) -> Operation:
    operation = selectors.operation_get(project=access.project, operation_id=operation_id)
    if operation is None:
        raise not_found(f"Operation {operation_id}")
    return operation


class OperationDetailApi(APIView):
    """An operation's status, progress, result stats and error."""

    @extend_schema(responses={200: OperationOutput})
    def get(self, request: Request, operation_id: int) -> Response:
        operation = require_operation(require_access(request), operation_id)
        return Response(operation_data(operation))


class OperationUndoApi(APIView):
    """Bring the managed context back to what it was before the operation (a new version)."""

    @extend_schema(request=None, responses={200: dict})
    def post(self, request: Request, operation_id: int) -> Response:
        access = require_access(request)
        operation = require_operation(access, operation_id)
        require_operator(access)
        try:
            restored = operations.operation_undo(operation=operation, actor=actor_of(request))
        except operations.UndoRefused as exc:
            raise conflict(str(exc), "operation") from None
        operation.refresh_from_db()
        return Response({"operation": operation_data(operation), "version": restored.version})


class ManagedContextApi(APIView):
    """The managed context, in the session's format, ready to send. ``ETag`` and
    ``If-None-Match`` let an agent poll it cheaply (304 when unchanged)."""

    @extend_schema(responses={200: dict, 304: None})
    def get(self, request: Request, external_id: str) -> Response:
        session = require_session(require_access(request), external_id)
        try:
            state = selectors.managed_context(session=session)
        except selectors.NoContext:
            raise not_found(f"A context of session {external_id!r} (no turns yet)") from None
        headers = {"ETag": state.etag, "Cache-Control": "private, no-cache"}
        given = request.headers.get("If-None-Match", "")
        if state.etag in [tag.strip() for tag in given.split(",")]:
            return Response(status=status.HTTP_304_NOT_MODIFIED, headers=headers)
        return Response(
            {
                "session": session.external_id,
                "format": state.context.format,
                "version": state.version,
                "turn": state.turn_index,
                "source": "operation" if state.current else "turn",
                "operation_id": state.operation_id,
                "total_tokens": state.total_tokens,
                "request": selectors.managed_context_request(state),
                "artifacts": selectors.artifact_pointers(state.context),
            },
            headers=headers,
        )


#: The documented shape of a policy (what :func:`policy.session_policy_validate` accepts).
POLICY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "auto": {
            "type": "object",
            "nullable": True,
            "additionalProperties": False,
            "required": ["strategy"],
            "properties": {
                "strategy": {
                    "type": "string",
                    "enum": STRATEGY_IDS,
                    "description": "a strategy id (GET strategies)",
                },
                "params": {"type": "object", "nullable": True, "additionalProperties": True},
                "enabled": {"type": "boolean", "default": True},
            },
        },
        "trigger": {
            "description": "where the automatic policy fires and the chart draws the trigger:"
            " a fraction of usable (window minus output reserve) or a number of tokens;"
            " default: above 0.8 of usable",
            "nullable": True,
            "oneOf": [
                {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["fraction"],
                    "properties": {
                        "fraction": {
                            "type": "number",
                            "exclusiveMinimum": True,
                            "minimum": 0,
                            "maximum": 1,
                        },
                    },
                },
                {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["tokens"],
                    "properties": {
                        "tokens": {"type": "integer", "minimum": 1, "maximum": MAX_COUNT},
                    },
                },
            ],
        },
    },
}


@extend_schema_field(POLICY_SCHEMA)
class PolicyField(serializers.DictField):
    """A policy: a JSON object, checked by the policy service (which names the field)."""


class SessionPolicyInput(serializers.Serializer):  # type: ignore[type-arg]
    policy = PolicyField()


class SessionApi(SessionDetailApi):
    """``sessions/{external_id}``: GET reads the session; PATCH sets its ``policy`` (operators):
    ``{"policy": {"auto": {"strategy", "params", "enabled"}, "trigger": {"fraction": f} |
    {"tokens": n}}}`` applies ``strategy`` by itself when a turn crosses the trigger (default:
    above 80% of usable). Any other key, or a value of the wrong type, is a 400 naming it."""

    @extend_schema(request=SessionPolicyInput, responses={200: dict}, examples=[example("policy")])
    def patch(self, request: Request, external_id: str) -> Response:
        access = require_access(request)
        session = require_session(access, external_id)
        require_operator(access)
        if isinstance(request.data, dict):
            for key in request.data:
                if key != "policy":
                    raise ApiError(
                        f'Unknown field {key!r}: the body is {{"policy": {{...}}}}.',
                        fields={key: "unknown field"},
                    )
        data = SessionPolicyInput(data=request.data)
        data.is_valid(raise_exception=True)
        session = policy.session_policy_set(session=session, policy=data.validated_data["policy"])
        return Response({**session_data(session), "policy": session.policy})

    @extend_schema(responses={204: None}, operation_id="v1_sessions_destroy")
    def delete(self, request: Request, external_id: str) -> Response:
        """Delete the session, its turns, operations, managed contexts and artifacts, and every
        message no other session of the project shares (operators and operator keys)."""
        access = require_access(request)
        session = require_session(access, external_id)
        require_operator(access)
        deletion.session_delete(session=session, actor=actor_of(request))
        return Response(status=status.HTTP_204_NO_CONTENT)
