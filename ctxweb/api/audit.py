"""``GET audit``: the project's audit log (who applied, undid or deleted what, and when), newest
first, in pages; operators and operator keys only."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from ctxweb.api.access import require_access
from ctxweb.api.errors import ApiError
from ctxweb.api.operations import require_operator
from ctxweb.api.pagination import StrictLimitOffsetPagination, page_parameters
from ctxweb.api.serializers import AuditPageOutput
from ctxweb.contexts import selectors
from ctxweb.shapes import AUDIT_ACTIONS, AuditEventOutput


class AuditListApi(APIView):
    @extend_schema(
        parameters=[OpenApiParameter("action", str, enum=list(AUDIT_ACTIONS)), *page_parameters()],
        responses={200: AuditPageOutput},
    )
    def get(self, request: Request) -> Response:
        access = require_access(request)
        require_operator(access)
        action = request.query_params.get("action", "")
        if action and action not in AUDIT_ACTIONS:
            raise ApiError(
                f"Unknown action {action!r}.",
                fields={"action": f"one of {', '.join(AUDIT_ACTIONS)}"},
            )
        events = selectors.audit_list(project=access.project, action=action)
        paginator = StrictLimitOffsetPagination()
        page = paginator.paginate_queryset(events, request, view=self) or []
        return paginator.get_paginated_response(AuditEventOutput(page, many=True).data)
