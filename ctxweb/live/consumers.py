"""The session WebSocket: a logged-in member hears the session's live events.

Membership is checked on connect (an unknown session or a non-member closes with 4404, the
socket's "not found"); the origin is checked by ``AllowedHostsOriginValidator`` in
:mod:`ctxweb.asgi`. The ORM is reached only through selectors wrapped for async.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from ctxweb.accounts.access import SESSION_PROJECT_KEY
from ctxweb.contexts import selectors
from ctxweb.contexts.events import bind_serving_loop, session_group
from ctxweb.numbers import parse_whole
from ctxweb.shapes import shape_event

#: Close codes: the HTTP status plus 4000, as the browser sees them.
CLOSE_UNAUTHENTICATED = 4401
CLOSE_NOT_FOUND = 4404

session_for_user = database_sync_to_async(selectors.session_for_user)


#: The largest frame a page may send (it sends pings).
MAX_FRAME = 4096


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


class SessionConsumer(AsyncJsonWebsocketConsumer):  # type: ignore[misc]
    """``/ws/sessions/{external_id}/``: ``turn.created``, ``operation.progress``,
    ``operation.finished`` (and ``operation.undone``) as JSON."""

    group: str | None = None

    def _project_id(self) -> int | None:
        query = parse_qs(self.scope.get("query_string", b"").decode("latin-1"))
        raw = (query.get("project") or [""])[0]
        if parse_whole(raw) is not None:
            return parse_whole(raw)
        django_session = self.scope.get("session")
        remembered = django_session.get(SESSION_PROJECT_KEY) if django_session else None
        return int(remembered) if isinstance(remembered, int) else None

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        external_id = self.scope["url_route"]["kwargs"]["external_id"]
        if "\x00" in external_id:  # no session id holds one (PostgreSQL refuses the lookup)
            await self.close(code=CLOSE_NOT_FOUND)
            return
        session = await session_for_user(
            user=user, external_id=external_id, project_id=self._project_id()
        )
        if session is None and self._project_id() is not None:
            # The remembered project may not hold it; any of the user's projects may.
            session = await session_for_user(user=user, external_id=external_id, project_id=None)
        if session is None:
            await self.close(code=CLOSE_NOT_FOUND)
            return
        self.group = session_group(session.pk)
        await self.channel_layer.group_add(self.group, self.channel_name)
        bind_serving_loop(asyncio.get_running_loop())
        await self.accept()
        await self.send_json({"type": "hello", "session": external_id})

    async def disconnect(self, code: int) -> None:
        if self.group is not None:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive(
        self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs: Any
    ) -> None:
        """A frame from the page: ``{"type": "ping"}`` answers ``pong``; anything else that is
        not a small JSON object gets an ``error`` message, and the socket stays open."""
        if text_data is None:
            await self._refuse("frames are JSON text, not binary")
            return
        if len(text_data) > MAX_FRAME:
            await self._refuse(f"frames are at most {MAX_FRAME} characters")
            return
        try:
            content = json.loads(text_data, parse_constant=_no_constant)
        except (ValueError, RecursionError):
            await self._refuse('frames are JSON objects, such as {"type": "ping"}')
            return
        await self.receive_json(content)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        if isinstance(content, dict) and content.get("type") == "ping":
            await self.send_json({"type": "pong"})
            return
        await self._refuse('the one message a page sends is {"type": "ping"}')

    async def _refuse(self, why: str) -> None:
        await self.send_json({"type": "error", "error": why})

    async def session_event(self, message: dict[str, Any]) -> None:
        await self.send_json(shape_event(message["event"]))
