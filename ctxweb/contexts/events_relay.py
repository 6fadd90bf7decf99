"""Live events from the embedded shape's other processes to its web process.

The embedded shape (no ``REDIS_URL``) has the in-memory channel layer, which lives in the web
process: its WebSockets are the only listeners. The processes that web process starts record and
prepare calls (the recorder processes of :mod:`~ctxweb.contexts.services.recording`, the preparers
of :mod:`~ctxweb.contexts.services.preparing`); each has an in-memory layer of its own, where a
turn it stored was announced to nobody, and the open session page never heard of it.

The web process (:func:`relay_start`, before it starts them) listens on a Unix datagram socket in
a folder of its own (its user's alone) and names it in ``CTXWEB_LIVE_EVENTS``, which the
processes it starts inherit. A process that is not the listener publishes to its in-memory layer
by sending the event there instead (:func:`relay_send`: one datagram, given up after
:data:`SEND_SECONDS`); the web process's reader thread hands it to its own layer, as if it had been
published there. As every live event, one that cannot be delivered is logged and dropped: stored
data never depends on it, and a page that reconnects reads the rest from the API.

With a channel layer shared by every process (channels-redis: the production shape) none of this
runs.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import shutil
import socket
import tempfile
import threading
from collections.abc import Callable, Mapping
from typing import Any

logger = logging.getLogger(__name__)

#: The environment variable naming the web process's socket (inherited by what it starts).
ENVIRON = "CTXWEB_LIVE_EVENTS"
#: How long a sender waits for room in the web process's queue before it drops the event.
SEND_SECONDS = 1.0
#: The largest event a datagram carries (a turn's event is a few KB: its columns, not messages).
DATAGRAM_MAX = 192 * 1024
#: The kinds of channel message relayed, and the groups they may go to.
KINDS = {"session.event": "session-", "access.changed": "user-"}

#: The pid of the process listening (this one, once :func:`relay_start` ran in it).
_LISTENING: int | None = None
#: This process's sending socket, by pid (a forked child opens its own).
_SENDER: tuple[int, socket.socket] | None = None
_LOCK = threading.Lock()


def relay_start(deliver: Callable[[str, Mapping[str, Any], str], Any]) -> str | None:
    """Listen for the events of the processes this one starts, and hand each to ``deliver``
    (group, event, kind) on a thread of its own; the socket's path (also in ``CTXWEB_LIVE_EVENTS``
    from now on), or None when this process already listens."""
    global _LISTENING
    with _LOCK:
        if os.getpid() == _LISTENING:
            return None
        folder = tempfile.mkdtemp(prefix=f"ctxweb-live-{os.getpid()}-")
        atexit.register(shutil.rmtree, folder, True)
        path = os.path.join(folder, "events.sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        listener.bind(path)
        _LISTENING = os.getpid()
        os.environ[ENVIRON] = path
    threading.Thread(
        target=_read, args=(listener, deliver), name="ctxweb-live-relay", daemon=True
    ).start()
    return path


def _read(listener: socket.socket, deliver: Callable[[str, Mapping[str, Any], str], Any]) -> None:
    while True:
        try:
            data = listener.recv(DATAGRAM_MAX + 1)
        except OSError:
            logger.exception("live relay: the socket failed; other processes' events are lost")
            return
        try:
            message = json.loads(data)
            group, kind, event = message["group"], message["kind"], message["event"]
            prefix = KINDS.get(kind)
            if prefix is None or not isinstance(group, str) or not group.startswith(prefix):
                raise ValueError(f"{kind!r} to {group!r}")
            if not isinstance(event, dict):
                raise ValueError("the event is not an object")
        except (ValueError, KeyError, TypeError) as broken:
            logger.warning("live relay: a broken event was dropped (%s)", broken)
            continue
        deliver(group, event, kind)


def relay_target() -> str | None:
    """Where this process sends its live events: the web process's socket when this process is
    one it started, else None (it publishes to its own layer)."""
    if os.getpid() == _LISTENING:
        return None
    return os.environ.get(ENVIRON) or None


def relay_send(path: str, group: str, event: Mapping[str, Any], kind: str) -> bool:
    """Send one event to the web process listening at ``path``; whether it went (a web process
    gone, a full queue for :data:`SEND_SECONDS`, an event too large: logged, dropped)."""
    global _SENDER
    data = json.dumps({"group": group, "kind": kind, "event": dict(event)}).encode()
    if len(data) > DATAGRAM_MAX:
        logger.warning(
            "live relay: %s to %s dropped (%d bytes)", event.get("type"), group, len(data)
        )
        return False
    with _LOCK:
        if _SENDER is None or _SENDER[0] != os.getpid():
            sender = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            sender.settimeout(SEND_SECONDS)
            _SENDER = (os.getpid(), sender)
        sender = _SENDER[1]
    try:
        sender.sendto(data, path)  # a datagram goes whole or not at all: threads may share it
    except OSError as failure:  # TimeoutError among them
        logger.warning("live relay: %s to %s dropped: %r", event.get("type"), group, failure)
        return False
    return True


__all__ = ["ENVIRON", "relay_send", "relay_start", "relay_target"]
