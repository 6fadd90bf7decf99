"""Request guards that apply before any view runs."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse


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
            return JsonResponse(
                {
                    "error": {
                        "code": "too_large",
                        "message": f"The request body is {length} bytes; the limit is {limit}.",
                        "fields": {},
                    }
                },
                status=413,
            )
        return self.get_response(request)
