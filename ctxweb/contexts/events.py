"""Live events: what a session's watchers hear over the WebSocket, sent through the channel layer.

Every event goes to the group ``session-<pk>`` as one channel message ``{"type":
"session.event", "event": {...}}``; the consumer forwards ``event`` as JSON. Publishing never
raises: a dead or misconfigured channel layer costs a live update, never a stored turn or an
operation's result, so errors are logged and swallowed.

Publishing through Redis is also bounded in time: a send that Redis does not acknowledge within
:data:`PUBLISH_SECONDS` is abandoned (a hung Redis would otherwise hold the ingest request that
published), and after such a timeout this process drops events for :data:`PAUSE_SECONDS` instead
of making every request wait out the same timeout (a refused connection fails fast: no pause).
Live updates resume by themselves once Redis answers again; stored data never depends on them.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import InMemoryChannelLayer, get_channel_layer

from ctxweb.contexts.models import Operation, Session, Turn

logger = logging.getLogger(__name__)

#: How long one publish may take before it is abandoned (seconds).
PUBLISH_SECONDS = 1.0
#: After a publish timed out, events are dropped without trying for this long (seconds).
PAUSE_SECONDS = 2.0
#: ``time.monotonic()`` before which publishing is paused (after a timeout).
_paused_until = 0.0

#: The event loop that serves the WebSockets of this process (set by the consumer). The in-memory
#: layer's queues belong to it: a publish from a background thread must run there, or the loop
#: would only notice the message when something else wakes it up.
_SERVING_LOOP: asyncio.AbstractEventLoop | None = None


def bind_serving_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Remember the loop that serves this process's WebSockets (for the in-memory layer)."""
    global _SERVING_LOOP
    _SERVING_LOOP = loop


def _other_thread_of(loop: asyncio.AbstractEventLoop | None) -> bool:
    if loop is None or not loop.is_running() or loop.is_closed():
        return False
    try:
        return asyncio.get_running_loop() is not loop
    except RuntimeError:  # no loop running in this thread
        return True


def session_group(session_id: int) -> str:
    """The channel-layer group of a session's watchers."""
    return f"session-{session_id}"


def publish(session: Session | int, message: Mapping[str, Any]) -> bool:
    """Send ``message`` (with its ``type``) to the session's watchers; True when sent.

    Never raises: failures are logged.
    """
    global _paused_until
    session_id = session if isinstance(session, int) else session.pk
    if time.monotonic() < _paused_until:
        logger.warning(
            "dropped %s to session %s: the channel layer timed out moments ago",
            message.get("type"),
            session_id,
        )
        return False
    try:
        layer = get_channel_layer()
        if layer is None:
            return False
        group = session_group(session_id)
        payload = {"type": "session.event", "event": dict(message)}
        loop = _SERVING_LOOP
        if isinstance(layer, InMemoryChannelLayer) and _other_thread_of(loop):
            assert loop is not None
            asyncio.run_coroutine_threadsafe(layer.group_send(group, payload), loop).result(5)
        else:
            try:
                async_to_sync(_bounded_send)(layer, group, payload)
            except TimeoutError:  # a hung layer: spare the next requests the same wait
                _paused_until = time.monotonic() + PAUSE_SECONDS
                raise
    except Exception:
        logger.exception("could not publish %s to session %s", message.get("type"), session_id)
        return False
    return True


async def _bounded_send(layer: Any, group: str, payload: dict[str, Any]) -> None:
    """``group_send`` given :data:`PUBLISH_SECONDS`; raises ``TimeoutError`` past it."""
    await asyncio.wait_for(layer.group_send(group, payload), PUBLISH_SECONDS)


def turn_payload(turn: Turn) -> dict[str, Any]:
    """A turn as the chart appends it (the shape of ``GET sessions/{id}/turns`` items)."""
    return {
        "index": turn.index,
        "total_tokens": turn.total_tokens,
        "regions": turn.regions,
        "reported_input_tokens": turn.reported_input_tokens,
        "events": turn.events,
        "context_window": turn.context_window,
        "max_output_tokens": turn.max_output_tokens,
        "created_at": turn.created_at.isoformat() if turn.created_at else None,
    }


def turn_created(turn: Turn) -> bool:
    """Announce a new turn."""
    return publish(turn.session_id, {"type": "turn.created", "turn": turn_payload(turn)})


def operation_payload(operation: Operation) -> dict[str, Any]:
    return {
        "id": operation.pk,
        "strategy": operation.strategy,
        "status": operation.status,
        "automatic": operation.automatic,
        "progress": operation.progress,
        "result": operation.result,
        "error": operation.error,
    }


def operation_progress(operation: Operation) -> bool:
    """Announce an operation's progress (``{"stage", "done", "total"}``)."""
    return publish(
        operation.session_id,
        {
            "type": "operation.progress",
            "operation": operation_payload(operation),
            **operation.progress,
        },
    )


def operation_finished(operation: Operation) -> bool:
    """Announce an operation's end: succeeded (with its result) or failed (with its error)."""
    return publish(
        operation.session_id,
        {"type": "operation.finished", "operation": operation_payload(operation)},
    )
