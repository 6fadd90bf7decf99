"""The REST API of artifacts: an artifact's full content, as a plain-text download."""

from __future__ import annotations

import json
import re
from typing import Any

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.views import APIView

from ctxweb.api.access import not_found, require_access
from ctxweb.api.errors import ApiError
from ctxweb.contexts import selectors


class PlainTextRenderer(BaseRenderer):
    """Lets a client ask for ``text/plain``; errors are still the contract's JSON."""

    media_type = "text/plain"
    format = "txt"
    charset = "utf-8"

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: Any = None,
    ) -> bytes:
        if isinstance(data, bytes):
            return data
        if isinstance(data, str):
            return data.encode("utf-8")
        return json.dumps(data).encode("utf-8")


class ArtifactDownloadApi(APIView):
    """An artifact's full content as a plain-text download (never rendered by the browser)."""

    renderer_classes = [JSONRenderer, PlainTextRenderer]

    @extend_schema(
        responses={
            (200, "text/plain"): OpenApiResponse(OpenApiTypes.STR, description="the content"),
        }
    )
    def get(self, request: Request, artifact_id: str) -> HttpResponse:
        access = require_access(request)
        try:
            artifact = selectors.artifact_get(project=access.project, artifact_id=artifact_id)
        except selectors.ArtifactAmbiguous as error:
            raise ApiError(str(error), code="conflict", status_code=409) from error
        if artifact is None:
            raise not_found("Artifact")
        content = selectors.artifact_content(artifact=artifact)
        response = HttpResponse(content.encode("utf-8"), content_type="text/plain; charset=utf-8")
        name = re.sub(r"[^A-Za-z0-9_-]", "", artifact.key)[:16] or str(artifact.pk)
        response["Content-Disposition"] = f'attachment; filename="artifact-{name}.txt"'
        response["X-Content-Type-Options"] = "nosniff"
        response["Cache-Control"] = "private, no-store"
        return response
