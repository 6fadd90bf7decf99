"""Page numbers read from a query string, forgiving as a page should be."""

from __future__ import annotations

from django.http import HttpRequest


def page_number(request: HttpRequest, name: str, count: int, per_page: int) -> tuple[int, int]:
    """The page asked for in ``request.GET[name]`` (the nearest one when out of range, the first
    when not a number) and how many pages ``count`` items make, ``per_page`` a page."""
    pages = max(1, -(-count // per_page))
    try:
        number = int(request.GET.get(name, "1"))
    except ValueError:
        number = 1
    return min(max(1, number), pages), pages
