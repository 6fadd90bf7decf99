"""The session WebSocket: a logged-in member hears the session's live events.

Membership is checked on connect (an unknown session or a non-member closes with 4404, the
socket's "not found"); the origin is checked by ``ctxweb.origins.OriginValidator`` in
:mod:`ctxweb.asgi`. The ORM is reached only through selectors wrapped for async.

A page names its project (``?project=<id>``): the socket then watches that project's session of
the id, or none (never another project's session of the same id). Access is checked again when
the user's access changes (a membership removed, the user deactivated: ``access.changed`` on the
user's group) and, at most every :data:`RECHECK_SECONDS`, before an event is forwarded (changes
made without signals); lost access closes the socket with 4403. A deleted session closes it with
4404.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from ctxweb.accounts.access import SESSION_PROJECT_KEY
from ctxweb.contexts import selectors
from ctxweb.contexts.events import bind_serving_loop, session_group, user_group
from ctxweb.numbers import parse_whole
from ctxweb.shapes import shape_event

#: Close codes: the HTTP status plus 4000, as the browser sees them.
CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_NOT_FOUND = 4404

#: How long a socket forwards events on its last access check before checking again.
RECHECK_SECONDS = 10.0

session_for_user = database_sync_to_async(selectors.session_for_user)
session_watchable = database_sync_to_async(selectors.session_watchable)


#: The largest frame a page may send (it sends pings).
MAX_FRAME = 4096


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


class SessionConsumer(AsyncJsonWebsocketConsumer):  # type: ignore[misc]
    """``/ws/sessions/{external_id}/``: ``turn.created``, ``operation.progress``,
    ``operation.finished`` (and ``operation.undone``) as JSON."""

    group: str | None = None
    user_group: str | None = None
    session_id: int | None = None
    user_id: int | None = None
    checked_at = 0.0

    def _named_project(self) -> str | None:
        """The ``project`` of the query string, as given (None when absent)."""
        query = parse_qs(self.scope.get("query_string", b"").decode("latin-1"))
        values = query.get("project")
        return values[0] if values else None

    def _project_id(self) -> int | None:
        raw = self._named_project() or ""
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
        named = self._named_project()
        if named is not None and parse_whole(named) is None:
            await self.close(code=CLOSE_NOT_FOUND)  # a page names its project by number
            return
        session = await session_for_user(
            user=user, external_id=external_id, project_id=self._project_id()
        )
        if session is None and named is None and self._project_id() is not None:
            # The remembered project may not hold it; any of the user's projects may. A page
            # that names its project gets that project's session or nothing.
            session = await session_for_user(user=user, external_id=external_id, project_id=None)
        if session is None:
            await self.close(code=CLOSE_NOT_FOUND)
            return
        self.session_id, self.user_id = session.pk, user.pk
        self.checked_at = time.monotonic()
        self.group = session_group(session.pk)
        self.user_group = user_group(user.pk)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.channel_layer.group_add(self.user_group, self.channel_name)
        bind_serving_loop(asyncio.get_running_loop())
        await self.accept()
        await self.send_json({"type": "hello", "session": external_id})

    async def disconnect(self, code: int) -> None:
        if self.group is not None:
            await self.channel_layer.group_discard(self.group, self.channel_name)
        if self.user_group is not None:
            await self.channel_layer.group_discard(self.user_group, self.channel_name)
        self.group = self.user_group = None

    async def _still_allowed(self, *, now: bool = False) -> bool:
        """Whether the user may still watch the session (checked at once with ``now``, else at
        most every :data:`RECHECK_SECONDS`); closes the socket with 4403 when not."""
        if self.group is None or self.session_id is None or self.user_id is None:
            return False
        if not now and time.monotonic() - self.checked_at < RECHECK_SECONDS:
            return True
        allowed = bool(await session_watchable(user_id=self.user_id, session_id=self.session_id))
        self.checked_at = time.monotonic()
        if not allowed:
            await self.disconnect(CLOSE_FORBIDDEN)
            await self.close(code=CLOSE_FORBIDDEN)
        return allowed

    async def access_changed(self, message: dict[str, Any]) -> None:
        await self._still_allowed(now=True)

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
        event = message["event"]
        if event.get("type") == "session.deleted":
            await self.send_json({"type": "session.deleted"})
            await self.disconnect(CLOSE_NOT_FOUND)
            await self.close(code=CLOSE_NOT_FOUND)
            return
        if not await self._still_allowed():
            return
        await self.send_json(shape_event(event))
