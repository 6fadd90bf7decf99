"""Request guards that apply before any view runs."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from django.conf import settings
from django.core.exceptions import DisallowedHost
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from ctxweb import bodies

logger = logging.getLogger("django.request")


class BodySizeLimitMiddleware:
    """Refuse bodies over ``CTXWEB_MAX_REQUEST_BYTES`` with a clear 413 before reading them."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        limit = settings.CTXWEB_MAX_REQUEST_BYTES
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        if length > limit:
            body = _too_large_body(f"The request body is {length} bytes", limit)
            return HttpResponse(body, status=413, content_type="application/json")
        return self.get_response(request)


Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class BodyLimitASGIMiddleware:
    """The body cap, enforced in ASGI before Django reads a byte (Django copies a whole body
    before any middleware runs).

    A declared ``Content-Length`` over ``CTXWEB_MAX_REQUEST_BYTES`` is answered 413 at once. A body
    sent without one (``Transfer-Encoding: chunked``) is read here, up to the cap: 413 as soon as
    it goes over, else handed to Django with its length (Django reads no body without one, so a
    chunked turn used to arrive empty).
    """

    def __init__(self, app: Any) -> None:  # an ASGI application (Django's handler)
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = settings.CTXWEB_MAX_REQUEST_BYTES
        headers = list(scope.get("headers") or [])
        declared = [value for name, value in headers if name.lower() == b"content-length"]
        if declared:
            text = declared[0].decode("latin-1").strip()
            if text.isdigit() and text.isascii() and int(text) > limit:
                await _too_large(send, f"The request body is {int(text)} bytes", limit)
                return
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body = message.get("body", b"")
            size += len(body)
            if size > limit:
                await _too_large(send, f"The request body is over {limit} bytes", limit)
                return
            chunks.append(body)
            if not message.get("more_body", False):
                break
        if size == 0:
            replayed = b""
        else:
            replayed = b"".join(chunks)
            chunks.clear()  # the body exists once while the request runs
            headers = [(n, v) for n, v in headers if n.lower() != b"transfer-encoding"]
            headers.append((b"content-length", str(size).encode()))
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": replayed, "more_body": False}
            return await receive()

        await self.app({**scope, "headers": headers}, replay, send)


def _too_large_body(what: str, limit: int) -> bytes:
    error = {"code": "too_large", "message": f"{what}; the limit is {limit}.", "fields": {}}
    return json.dumps({"error": error}).encode()


async def _too_large(send: Send, what: str, limit: int) -> None:
    body = _too_large_body(what, limit)
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _error(status: int, code: str, message: str, fields: dict[str, str]) -> JsonResponse:
    return JsonResponse(
        {"error": {"code": code, "message": message, "fields": fields}}, status=status
    )


#: The paths whose bodies may come compressed (the OTLP receiver inflates its own, answering in
#: OTLP's shape): the REST API, its imports among them, and Langfuse's batch ingestion.
COMPRESSED_PATHS = ("/api/v1/", "/api/public/ingestion")


class ContentEncodingMiddleware:
    """Inflate a body sent with ``Content-Encoding: gzip``, ``deflate`` or ``zstd`` on
    :data:`COMPRESSED_PATHS` before anything reads it, up to ``CTXWEB_MAX_REQUEST_BYTES`` once
    inflated (413 past it, never a decompression bomb; 415 for another encoding, 400 for a body
    that is not what its encoding says). Views then see the body as if it was sent plain."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        encoding = request.META.get("HTTP_CONTENT_ENCODING", "").strip().lower()
        if encoding in ("", "identity") or not request.path.startswith(COMPRESSED_PATHS):
            return self.get_response(request)
        limit = settings.CTXWEB_MAX_REQUEST_BYTES
        try:
            body = bodies.inflate(request.body, encoding, limit)
        except bodies.TooLarge:
            what = f"The request body inflates past {limit} bytes"
            return HttpResponse(
                _too_large_body(what, limit), status=413, content_type="application/json"
            )
        except bodies.UnsupportedEncoding as error:
            return _error(
                415, "unsupported_encoding", f"{error}.", {"Content-Encoding": str(error)}
            )
        except bodies.BadBody as error:
            return _error(400, "parse_error", f"{error}.", {"body": str(error)})
        request._body = body  # what request.body, DRF's parsers and multipart read from now on
        request._stream = io.BytesIO(body)
        request.META["CONTENT_LENGTH"] = str(len(body))
        del request.META["HTTP_CONTENT_ENCODING"]
        return self.get_response(request)


class NulCharacterMiddleware:
    """Refuse a NUL character in the path or the query string with a 400: no database column
    can hold one (PostgreSQL refuses the query), so no lookup or filter should ever see it."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if "\x00" in request.path:
            return _error(400, "invalid", "The path contains a NUL character.", {"path": "NUL"})
        for name, values in request.GET.lists():
            if "\x00" in name or any("\x00" in value for value in values):
                field = name.replace("\x00", "\\u0000")
                return _error(
                    400,
                    "invalid",
                    f"The query parameter {field!r} contains a NUL character.",
                    {field: "contains a NUL character"},
                )
        return self.get_response(request)


#: Pages load only what ctxweb serves: its own scripts and style sheets, no inline script, no
#: plugin, no framing. Inline ``style`` attributes (bar widths computed on the server) are
#: allowed; ``<style>`` elements are not. ``json_script`` blocks are data, never executed.
PAGE_POLICY = (
    "default-src 'self'; script-src 'self'; "
    "style-src 'self' 'unsafe-inline'; style-src-elem 'self'; style-src-attr 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self'; connect-src 'self'{sockets}; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
#: The offline API docs (drf-spectacular's Swagger UI page) start the bundled UI with an inline
#: script and style; the page shows the schema only, never stored content.
DOCS_POLICY = (
    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self'; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
#: Everything that is not a page (JSON, downloads, static files) runs nothing at all.
DATA_POLICY = "default-src 'none'; frame-ancestors 'none'; sandbox"
DOCS_ROUTES = frozenset({"api-docs"})


class SecurityHeadersMiddleware:
    """A ``Content-Security-Policy`` on every response, beside the headers Django's
    ``SecurityMiddleware`` and ``XFrameOptionsMiddleware`` set (``nosniff``, ``Referrer-Policy``,
    ``X-Frame-Options: DENY``, ``Cross-Origin-Opener-Policy``)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if "Content-Security-Policy" in response:
            return response
        content_type = response.get("Content-Type", "")
        match = getattr(request, "resolver_match", None)
        if match is not None and match.view_name in DOCS_ROUTES:
            policy = DOCS_POLICY
        elif content_type.startswith("text/html"):
            # Older browsers read 'self' as the page's scheme only: name the socket URLs too.
            try:
                host = request.get_host()
            except DisallowedHost:  # the response is already the error page
                host = ""
            sockets = f" ws://{host} wss://{host}" if host else ""
            policy = PAGE_POLICY.format(sockets=sockets)
        else:
            policy = DATA_POLICY
        response["Content-Security-Policy"] = policy
        # Static files are answered by WhiteNoise before Django's clickjacking middleware runs.
        response.setdefault("X-Frame-Options", settings.X_FRAME_OPTIONS)
        response.setdefault("X-Content-Type-Options", "nosniff")
        return response


class ApiNotFoundMiddleware:
    """A path under ``/api/`` that no route matches answers the contract's JSON 404, not the
    HTML page a browser gets (an operation id that is not a number, a stray slash); an error no
    view handled answers the contract's JSON 500 there too (logged with its traceback as
    Django logs any server error)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if (
            response.status_code == 404
            and request.path.startswith("/api/")
            and response.get("Content-Type", "").startswith("text/html")
        ):
            return _error(404, "not_found", f"No API route matches {request.path!r}.", {})
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not request.path.startswith("/api/"):
            return None
        logger.error(
            "Internal Server Error: %s",
            request.path,
            exc_info=exception,
            extra={"request": request},
        )
        return _error(500, "server_error", "The server failed to answer; the error is logged.", {})


class PageRateLimitMiddleware:
    """The API's rate limits on the pages too, per logged-in user: every page counts against
    ``CTXWEB_RATE_LIMIT``, and the preview page and its Apply form, which plan over a whole
    context, against ``CTXWEB_RATE_LIMIT_COSTLY`` as the API's previews do (one budget per user
    for both). Over a limit: ``429`` with ``Retry-After`` and a page saying when to come back.
    The API throttles itself (DRF); the admin and static files are not counted."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(
        self, request: HttpRequest, view: Callable[..., HttpResponse], args: Any, kwargs: Any
    ) -> HttpResponse | None:
        from ctxweb.api.throttling import page_throttles  # DRF's settings load after ours

        if request.path.startswith(("/api/", "/admin/", settings.STATIC_URL or "/static/")):
            return None
        for throttle in page_throttles():
            if not throttle.allow_request(request, None):  # type: ignore[arg-type]
                wait = throttle.wait()
                seconds = max(1, int(wait + 0.999)) if wait is not None else 60
                response = render(request, "429.html", {"retry_after": seconds}, status=429)
                response["Retry-After"] = str(seconds)
                return response
        return None


#: The longest username django-axes stores (its column's length).
LOGIN_USERNAME_MAX = 255


def login_username(request: Any, credentials: dict[str, Any] | None = None) -> str | None:
    """The username a login attempt counts against, as django-axes stores it: at most
    :data:`LOGIN_USERNAME_MAX` characters and no NUL (PostgreSQL refuses both, and the attempt
    would be a 500). No user has such a name, so the cut merges nothing real."""
    name = (credentials or {}).get("username")
    if name is None and request is not None:
        name = getattr(request, "POST", {}).get("username")
    if not isinstance(name, str):
        return None
    return name.replace("\x00", "")[:LOGIN_USERNAME_MAX]
