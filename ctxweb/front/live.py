"""The URLs a page hands to ``static/ctxweb/live.js`` (data attributes of its script tag), so the
script builds none: the session's socket, its turns for catching up, the operation it follows."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from django.urls import reverse

#: The WebSocket route of :mod:`ctxweb.live.routing` (Channels routes are not reversible).
SOCKET_PATH = "/ws/sessions/{}/"


def live_urls(*, external_id: str, operation_id: int | None = None) -> dict[str, Any]:
    """``socket`` (a path; the script adds ``ws(s)://`` and the host), ``turns`` (the API's turn
    list) and ``operation`` (the followed operation's API URL, or "")."""
    return {
        "socket": SOCKET_PATH.format(quote(external_id, safe="/")),
        "turns": reverse("api-turns", args=[external_id]),
        "operation": reverse("api-operation", args=[operation_id]) if operation_id else "",
    }
