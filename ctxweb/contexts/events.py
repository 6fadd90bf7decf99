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

Sends to Redis run on one event loop per process, in a thread of its own, so every publish reuses
that loop and its connections (instead of a new thread, loop and connection each). With the
in-memory layer, an event for a session nobody in this process watches costs nothing; a process
the web process started (a recorder, a preparer) sends its events to the web process's layer
(:mod:`ctxweb.contexts.events_relay`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Mapping
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import InMemoryChannelLayer, get_channel_layer

from ctxweb.contexts.events_relay import relay_send, relay_start, relay_target
from ctxweb.contexts.models import Operation, Replay, Session, Turn

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


#: This process's publishing loop and its process id (a forked child starts its own).
_PUBLISH_LOOP: tuple[int, asyncio.AbstractEventLoop] | None = None
_PUBLISH_LOOP_LOCK = threading.Lock()


def _publish_loop() -> asyncio.AbstractEventLoop:
    """The loop that sends to out-of-process layers, running in its own daemon thread."""
    global _PUBLISH_LOOP
    with _PUBLISH_LOOP_LOCK:
        if _PUBLISH_LOOP is None or _PUBLISH_LOOP[0] != os.getpid():
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="ctxweb-publish", daemon=True).start()
            _PUBLISH_LOOP = (os.getpid(), loop)
        return _PUBLISH_LOOP[1]


def _other_thread_of(loop: asyncio.AbstractEventLoop | None) -> bool:
    if loop is None or not loop.is_running() or loop.is_closed():
        return False
    try:
        return asyncio.get_running_loop() is not loop
    except RuntimeError:  # no loop running in this thread
        return True


def relay_from_started_processes() -> None:
    """In a web process with the in-memory layer: publish here the events of the processes it
    starts from now on (recorders, preparers: :mod:`ctxweb.contexts.events_relay`), which have
    no layer of their own that a page listens to."""
    if isinstance(get_channel_layer(), InMemoryChannelLayer):
        relay_start(_publish)


def session_group(session_id: int) -> str:
    """The channel-layer group of a session's watchers."""
    return f"session-{session_id}"


def user_group(user_id: int) -> str:
    """The channel-layer group of a user's open sockets (told when their access changes)."""
    return f"user-{user_id}"


def publish(session: Session | int, message: Mapping[str, Any]) -> bool:
    """Send ``message`` (with its ``type``) to the session's watchers; True when sent (or, with
    the in-memory layer, when nobody watches the session).

    Never raises: failures are logged.
    """
    session_id = session if isinstance(session, int) else session.pk
    return _publish(session_group(session_id), message, "session.event")


def access_changed(user_id: int) -> bool:
    """Tell the user's open sockets to check again that they may still watch their session (a
    membership removed, the user deactivated)."""
    return _publish(user_group(user_id), {"type": "access.changed"}, "access.changed")


def session_deleted(session_id: int) -> bool:
    """Tell a deleted session's watchers (their sockets close)."""
    return publish(session_id, {"type": "session.deleted"})


def _publish(group: str, message: Mapping[str, Any], kind: str) -> bool:
    """Send ``message`` to ``group`` as a channel message of type ``kind``."""
    global _paused_until
    if time.monotonic() < _paused_until:
        logger.warning(
            "dropped %s to %s: the channel layer timed out moments ago",
            message.get("type"),
            group,
        )
        return False
    try:
        layer = get_channel_layer()
        if layer is None:
            return False
        payload = {"type": kind, "event": dict(message)}
        if isinstance(layer, InMemoryChannelLayer):
            target = relay_target()
            if target is not None:  # a process the web process started: its layer is there
                return relay_send(target, group, message, kind)
            if not getattr(layer, "groups", {}).get(group):
                return True  # nobody in this process watches the session: nothing to send
            loop = _SERVING_LOOP
            if _other_thread_of(loop):
                assert loop is not None
                asyncio.run_coroutine_threadsafe(layer.group_send(group, payload), loop).result(5)
            else:
                async_to_sync(layer.group_send)(group, payload)
        else:
            sending = asyncio.run_coroutine_threadsafe(
                layer.group_send(group, payload), _publish_loop()
            )
            try:
                sending.result(PUBLISH_SECONDS)
            except TimeoutError:  # a hung layer: spare the next requests the same wait
                sending.cancel()
                _paused_until = time.monotonic() + PAUSE_SECONDS
                raise
    except Exception:
        logger.exception("could not publish %s to %s", message.get("type"), group)
        return False
    return True


#: The turn columns a ``turn.created`` event carries: the chart's, as the turn list loads them.
TURN_FIELDS = Turn.CHART_FIELDS
#: The operation columns an operation event carries (what :class:`ctxweb.shapes.OperationOutput`
#: reads).
OPERATION_FIELDS = (
    "id",
    "strategy",
    "params",
    "status",
    "automatic",
    "progress",
    "result",
    "error",
    "attempts",
    "base_version",
    "result_version",
    "created_at",
    "started_at",
    "finished_at",
    "undone_at",
)


def _row(instance: Any, names: tuple[str, ...]) -> dict[str, Any]:
    """Column values as a channel layer carries them (times as ISO 8601 text)."""
    row = {name: getattr(instance, name) for name in names}
    return {k: v.isoformat() if hasattr(v, "isoformat") else v for k, v in row.items()}


def turn_row(turn: Turn) -> dict[str, Any]:
    """The turn's columns that a ``turn.created`` event carries (shaped by the consumer)."""
    return _row(turn, TURN_FIELDS)


def turn_created(turn: Turn) -> bool:
    """Announce a new turn."""
    return publish(turn.session_id, {"type": "turn.created", "turn": turn_row(turn)})


def operation_row(operation: Operation) -> dict[str, Any]:
    """The operation's columns that its events carry (shaped by the consumer)."""
    return {
        **_row(operation, OPERATION_FIELDS),
        "session": {"external_id": operation.session.external_id},
    }


def operation_progress(operation: Operation) -> bool:
    """Announce an operation's progress (``{"stage", "done", "total"}``)."""
    return publish(
        operation.session_id,
        {
            "type": "operation.progress",
            "operation": operation_row(operation),
            **operation.progress,
        },
    )


def operation_finished(operation: Operation) -> bool:
    """Announce an operation's end: succeeded (with its result) or failed (with its error)."""
    return publish(
        operation.session_id,
        {"type": "operation.finished", "operation": operation_row(operation)},
    )


def _replay_state(replay: Replay) -> dict[str, Any]:
    return {
        "replay": replay.pk,
        "done": replay.done,
        "total": replay.total,
        "status": replay.status,
    }


def replay_progress(replay: Replay) -> bool:
    """Announce a replay's progress: turns walked (``done``) over every column's (``total``)."""
    return publish(replay.session_id, {"type": "replay.progress", **_replay_state(replay)})


def replay_finished(replay: Replay) -> bool:
    """Announce a replay's end: ``succeeded``, or ``failed`` with its ``error`` (read the
    results with ``GET sessions/{id}/replays/{replay}``)."""
    return publish(
        replay.session_id,
        {"type": "replay.finished", **_replay_state(replay), "error": replay.error or None},
    )
