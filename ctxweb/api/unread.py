"""The REST API of calls ctxweb relayed but could not read: a session's and the project's, in
pages, and each one's raw exchange as a download. Viewers and ingest keys read them."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from django.http import HttpResponse
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from ctxweb.api.access import not_found, require_access, require_session
from ctxweb.api.errors import ApiError
from ctxweb.api.pagination import StrictLimitOffsetPagination, page_parameters
from ctxweb.api.serializers import UnreadCallPageOutput
from ctxweb.contexts.selectors import unread as unread_selectors
from ctxweb.shapes import UnreadCallOutput, unread_call_download

if TYPE_CHECKING:
    from django.db.models import QuerySet

    from ctxweb.contexts.models import UnreadCall


class ZipRenderer(BaseRenderer):
    """Lets a client ask for ``application/zip``; errors are still the contract's JSON."""

    media_type = "application/zip"
    format = "zip"
    charset = None
    render_style = "binary"

    def render(
        self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None
    ) -> bytes:
        return data if isinstance(data, bytes) else json.dumps(data).encode("utf-8")


def unread_page(request: Request, view: APIView, calls: QuerySet[UnreadCall]) -> Response:
    """One page of ``calls`` in their one shape, each with its ``raw_url``."""
    paginator = StrictLimitOffsetPagination()
    page = paginator.paginate_queryset(calls, request, view=view) or []

    def raw_url(call: UnreadCall) -> str:
        return request.build_absolute_uri(reverse("api-unread-call-raw", args=[call.pk]))

    data = UnreadCallOutput(page, many=True, context={"raw_url": raw_url}).data
    return paginator.get_paginated_response(data)


class UnreadCallListApi(APIView):
    """``GET unread-calls``: the project's calls ctxweb could not read, newest first;
    ``?unattached=1`` keeps those on no session (their session did not exist)."""

    @extend_schema(
        parameters=[
            OpenApiParameter("unattached", bool, description="only calls on no session"),
            *page_parameters(),
        ],
        responses={200: UnreadCallPageOutput},
    )
    def get(self, request: Request) -> Response:
        access = require_access(request)
        raw = request.query_params.get("unattached", "")
        if raw not in ("", "0", "1", "true", "false"):
            raise ApiError(
                "unattached must be true or false.", fields={"unattached": "true or false"}
            )
        calls = unread_selectors.unread_call_list(
            project=access.project, unattached=raw in ("1", "true")
        )
        return unread_page(request, self, calls)


class SessionUnreadCallListApi(APIView):
    """``GET sessions/{external_id}/unread-calls``: the session's calls ctxweb could not read,
    newest first."""

    @extend_schema(parameters=page_parameters(), responses={200: UnreadCallPageOutput})
    def get(self, request: Request, external_id: str) -> Response:
        session = require_session(require_access(request), external_id)
        calls = unread_selectors.unread_call_list_for_session(session=session)
        return unread_page(request, self, calls)


class UnreadCallRawApi(APIView):
    """``GET unread-calls/{unread_id}/raw``: the raw exchange, a zip of ``request.json`` (as
    sent upstream), the answer as relayed (``response.json``, or ``response.sse`` when
    streamed) and ``call.json`` (what ctxweb knows of the call)."""

    renderer_classes = [JSONRenderer, ZipRenderer]

    @extend_schema(
        responses={
            (200, "application/zip"): OpenApiResponse(
                OpenApiTypes.BINARY, description="the raw exchange"
            ),
        }
    )
    def get(self, request: Request, unread_id: str) -> HttpResponse:
        access = require_access(request)
        call = unread_selectors.unread_call_get(project=access.project, unread_id=unread_id)
        if call is None:
            raise not_found("Unread call")
        return unread_call_download(call)
