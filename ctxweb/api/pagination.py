"""Pages of API lists: DRF's limit and offset, strict about what it is given.

``?limit=`` (1 to :data:`MAX_LIMIT`, default ``PAGE_SIZE``) and ``?offset=`` (0 or more); anything
else is a 400 naming the parameter, never silently clamped. (DRF's ``ValidationError``, not
:class:`~ctxweb.api.errors.ApiError`: DRF imports this module while its views load, before
``ctxweb.api.errors`` can be.) A page answers
``{"count", "limit", "offset", "next", "previous", "results"}``.
"""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import ValidationError
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request
from rest_framework.response import Response

MAX_LIMIT = 500
#: The largest offset a database takes (PostgreSQL's and SQLite's signed 64-bit integers).
MAX_OFFSET = 2**63 - 1


def _integer(request: Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query_params.get(name)
    if raw in (None, ""):
        return default
    text = str(raw).strip()
    if not (text.isascii() and text.isdigit()):
        raise ValidationError({name: "must be a whole number"})
    value = int(text)
    if not low <= value <= high:
        raise ValidationError({name: f"must be between {low} and {high}"})
    return value


def optional_integer(request: Request, name: str, low: int, high: int) -> int | None:
    """The query parameter ``name`` as a whole number from ``low`` to ``high``, or None when it
    is not given (a 400 naming it when it is not such a number)."""
    if request.query_params.get(name) in (None, ""):
        return None
    return _integer(request, name, low, low, high)


def page_parameters() -> list[Any]:
    """``limit`` and ``offset`` as the schema documents them, with their bounds."""
    from drf_spectacular.utils import OpenApiParameter

    return [
        OpenApiParameter(
            "limit",
            {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
            description=f"items per page, 1 to {MAX_LIMIT}",
        ),
        OpenApiParameter(
            "offset",
            {"type": "integer", "minimum": 0, "maximum": MAX_OFFSET},
            description="items to skip",
        ),
    ]


class StrictLimitOffsetPagination(LimitOffsetPagination):
    max_limit = MAX_LIMIT

    def get_limit(self, request: Request) -> int:
        return _integer(
            request, self.limit_query_param, int(self.default_limit or 50), 1, MAX_LIMIT
        )

    def get_offset(self, request: Request) -> int:
        return _integer(request, self.offset_query_param, 0, 0, MAX_OFFSET)

    def get_paginated_response(self, data: Any) -> Response:
        return Response(
            {
                "count": self.count,
                "limit": self.limit,
                "offset": self.offset,
                "next": self.get_next_link(),
                "previous": self.get_previous_link(),
                "results": data,
            }
        )
