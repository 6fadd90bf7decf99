"""The URLs a page hands to ``static/ctxweb/live.js`` (data attributes of its script tag), so the
script builds none: the session's socket, its turns for catching up, the operation it follows."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from django.urls import reverse

#: The WebSocket route of :mod:`ctxweb.live.routing` (Channels routes are not reversible).
SOCKET_PATH = "/ws/sessions/{}/"


def live_urls(
    *, external_id: str, project_id: int, operation_id: int | None = None
) -> dict[str, Any]:
    """``socket`` (a path; the script adds ``ws(s)://`` and the host), ``turns`` (the API's turn
    list) and ``operation`` (the followed operation's API URL, or ""). The socket and the turns
    name the page's project, so a user in several projects with a session of the same id hears
    and catches up on this one, whatever project they last switched to."""
    scope = f"?project={project_id}"
    return {
        "socket": SOCKET_PATH.format(quote(external_id, safe="/")) + scope,
        "turns": reverse("api-turns", args=[external_id]) + scope,
        "operation": reverse("api-operation", args=[operation_id]) if operation_id else "",
    }
