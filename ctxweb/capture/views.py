"""``POST /v1/traces`` and ``POST /api/public/otel/v1/traces``: the OTLP/HTTP traces receiver;
``POST /api/public/ingestion``: Langfuse's batch ingestion.

Point an OTLP exporter at ctxweb (``OTEL_EXPORTER_OTLP_ENDPOINT=https://ctxweb.example``, or
Langfuse's ``{base}/api/public/otel``) with ``Authorization: Bearer <ctxweb key>``, or HTTP Basic
with the key as the password. Every model-call span becomes a turn
(:mod:`ctxweb.contexts.services.capture`); the answer is OTLP's ``ExportTraceServiceResponse`` in
the request's encoding, ``partial_success`` counting the spans rejected and why: those that
cannot be stored, those past a per-span bound, and those past the export's bounds on spans and
values, counted but not read (:mod:`ctxweb.capture.bounds`). Errors are a ``google.rpc.Status``
with the HTTP status OTLP clients act on: 400 (not an export: do not retry), 401, 403, 413 (too
large even to count), 415, 429 (retry later).
"""

from __future__ import annotations

from typing import Any, cast

from django.conf import settings
from django.http import HttpResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions
from rest_framework.parsers import BaseParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from ctxweb.accounts.access import access_for_request
from ctxweb.authentication import ApiKeyAuthentication, BasicKeyAuthentication
from ctxweb.capture import otlp
from ctxweb.capture.bounds import Bounds
from ctxweb.contexts.services.capture import langfuse_batch_ingest, spans_ingest

#: How many rejection reasons an answer names (the count is always whole).
REASONS = 5


class RawParser(BaseParser):
    """Leaves the body to the view (protobuf or JSON, maybe gzipped)."""

    media_type = "*/*"

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        return None


def _media_type(request: Any) -> str:
    content_type = (request.META.get("CONTENT_TYPE") or "").split(";")[0].strip().lower()
    return otlp.JSON if content_type == otlp.JSON else otlp.PROTOBUF


def _answer(request: Any, status: int, body: bytes) -> HttpResponse:
    return HttpResponse(body, status=status, content_type=_media_type(request))


class TracesApi(APIView):
    """OTLP/HTTP traces export."""

    authentication_classes = [ApiKeyAuthentication, BasicKeyAuthentication]
    parser_classes = [RawParser]
    schema = None  # OTLP's own protocol, not part of the REST API's schema

    @csrf_exempt
    def dispatch(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().dispatch(request, *args, **kwargs)
        finally:
            # The answer is bytes already (no renderer reads the view): the DRF request's
            # parser context, which names this view and the request (the view names the
            # request), is done with, and the export's objects go now, not in a cycle that
            # waits for the garbage collector (exporters post many).
            parsing = getattr(self.request, "parser_context", None)
            if isinstance(parsing, dict):
                parsing.clear()

    def post(self, request: Request) -> HttpResponse:
        access = access_for_request(request)
        if access is None or not access.can_write:
            return self._error(request, 403, otlp.PERMISSION_DENIED, "This key may not write.")
        content_type = (request.META.get("CONTENT_TYPE") or "").split(";")[0].strip().lower()
        if content_type not in (otlp.PROTOBUF, otlp.JSON):
            return self._error(
                request,
                415,
                otlp.INVALID_ARGUMENT,
                f"Unsupported Content-Type {content_type!r}: send {otlp.PROTOBUF} or {otlp.JSON}.",
            )
        limit = settings.CTXWEB_MAX_REQUEST_BYTES
        bounds = Bounds.from_settings()
        try:
            data = otlp.inflate(request.body, request.META.get("HTTP_CONTENT_ENCODING", ""), limit)
            if content_type == otlp.JSON:
                decoded = otlp.spans_from_json(data, bounds)
            else:
                decoded = otlp.spans_from_protobuf(data, bounds)
        except (otlp.TooLarge, otlp.TooMany) as error:
            return self._error(request, 413, otlp.RESOURCE_EXHAUSTED, str(error))
        except otlp.BadExport as error:
            return self._error(request, 400, otlp.INVALID_ARGUMENT, str(error))
        result = spans_ingest(project=access.project, spans=decoded.spans)
        rejected = decoded.rejected + result.rejected
        reasons = [f"span {span}: {why}" for span, why in rejected[:REASONS]]
        if len(rejected) > REASONS:
            reasons.append(f"and {len(rejected) - REASONS} more")
        if decoded.unread.count:
            reasons.append(decoded.unread.reason)
        count = len(rejected) + decoded.unread.count
        body = otlp.export_answer(_media_type(request), count, "; ".join(reasons))
        return _answer(request, 200, body)

    def _error(self, request: Any, status: int, code: int, message: str) -> HttpResponse:
        return _answer(request, status, otlp.status_answer(_media_type(request), code, message))

    def handle_exception(self, exc: Exception) -> Response:
        """Authentication, permission and rate-limit errors in OTLP's shape."""
        request = self.request
        if isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
            message = str(getattr(exc, "detail", exc)) or "Send a ctxweb API key."
            if isinstance(exc, exceptions.NotAuthenticated):
                message = (
                    "No credentials: send Authorization: Bearer <ctxweb key>, or Basic with the"
                    " key as the password."
                )
            response = self._error(request, 401, otlp.UNAUTHENTICATED, message)
            response["WWW-Authenticate"] = 'Bearer realm="ctxweb"'
            return cast(Response, response)
        if isinstance(exc, exceptions.Throttled):
            response = self._error(request, 429, otlp.RESOURCE_EXHAUSTED, str(exc.detail))
            wait = getattr(exc, "wait", None)
            if wait is not None:
                response["Retry-After"] = str(int(wait) + 1)
            return cast(Response, response)
        if isinstance(exc, exceptions.PermissionDenied):
            return cast(
                Response, self._error(request, 403, otlp.PERMISSION_DENIED, str(exc.detail))
            )
        if isinstance(exc, exceptions.MethodNotAllowed):
            answer = self._error(request, 405, otlp.INVALID_ARGUMENT, "POST an export here.")
            return cast(Response, answer)
        return super().handle_exception(exc)


def _too_large(message: str) -> Response:
    """A batch past a bound, in the shape Langfuse answers its errors."""
    return Response({"message": message, "error": "payload_too_large"}, status=413)


class LangfuseIngestionApi(APIView):
    """``POST /api/public/ingestion``: Langfuse's batch ingestion, for the SDKs and exporters
    that still use it (LiteLLM, Dify, older Langfuse SDKs). Answered ``207`` with ``successes``
    and ``errors`` per event, as Langfuse answers; ``400`` only when the body is no batch;
    ``413`` for a batch past ``CTXWEB_LANGFUSE_MAX_BATCH_BYTES`` (Langfuse's server takes 4.5 MB)
    or ``CTXWEB_LANGFUSE_MAX_BATCH_EVENTS``."""

    authentication_classes = [ApiKeyAuthentication, BasicKeyAuthentication]
    schema = None

    def post(self, request: Request) -> Response:
        access = access_for_request(request)
        if access is None or not access.can_write:
            raise exceptions.PermissionDenied("This key may not write.")
        # Langfuse's own bounds, checked before the body is decoded (bytes) and before any
        # event is handled (events): each generation is a turn stored, milliseconds each.
        most_bytes = settings.CTXWEB_LANGFUSE_MAX_BATCH_BYTES
        if len(request.body) > most_bytes:
            return _too_large(
                f"The batch is {len(request.body)} bytes: at most {most_bytes}"
                " (CTXWEB_LANGFUSE_MAX_BATCH_BYTES). Send smaller batches (flush_at)."
            )
        data = request.data
        batch = data.get("batch") if isinstance(data, dict) else None
        if not isinstance(batch, list):
            return Response(
                {"message": 'Expected {"batch": [events]}.', "error": "invalid_request"},
                status=400,
            )
        most_events = settings.CTXWEB_LANGFUSE_MAX_BATCH_EVENTS
        if len(batch) > most_events:
            return _too_large(
                f"The batch holds {len(batch)} events: at most {most_events}"
                " (CTXWEB_LANGFUSE_MAX_BATCH_EVENTS). Send smaller batches (flush_at)."
            )
        outcomes = langfuse_batch_ingest(project=access.project, batch=batch)
        return Response(
            {
                "successes": [{"id": o.id, "status": o.status} for o in outcomes if o.status < 300],
                "errors": [
                    {"id": o.id, "status": o.status, "message": o.message, "error": o.message}
                    for o in outcomes
                    if o.status >= 300
                ],
            },
            status=207,
        )
