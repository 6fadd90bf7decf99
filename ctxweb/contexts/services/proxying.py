"""Recording what an unmodified agent sends through ctxweb's proxy (:mod:`ctxweb.proxy`): each
model call the proxy relayed becomes a turn, once the answer has gone back to the agent.

The session is the one the agent names (``X-Ctxweb-Session``); else a call whose messages extend a
recent call of the same key (its request and the answer it got) joins that call's session, so an
agent's main conversation stays one session while its side calls (titles, summaries with another
model) start sessions of their own, named by time. That memory is this process's, for an hour:
behind several web processes a conversation may split where a call lands elsewhere; naming the
session avoids it.
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
import time
from collections import OrderedDict
from typing import Any

from django.utils import timezone

from compaction.errors import FormatError
from compaction.messages import message_hash, parse
from compaction.streams import provider_answer
from ctxweb.accounts.models import Project
from ctxweb.contexts.services.ingest import session_id_problem, turn_ingest

logger = logging.getLogger(__name__)

#: The proxy's sessions' ``source``.
SOURCE = "proxy"
#: How long a call can be extended by the next one and still join its session.
RECENT_SECONDS = 3600
#: Conversations remembered per key (the most recent ones).
RECENT_PER_KEY = 32
#: Calls the proxy relayed but could not record (the call itself succeeded), since start.
failures = 0

_MEMORY: dict[int, OrderedDict[str, tuple[tuple[str, ...], float]]] = {}
_LOCK = threading.Lock()


def _hashes(format: str, request: dict[str, Any], extra: list[dict[str, Any]]) -> tuple[str, ...]:
    key = "input" if format == "openai-responses" else "messages"
    items = list(request.get(key) or [])
    if isinstance(request.get(key), str):  # a Responses request's bare string input
        items = [{"role": "user", "content": request[key]}]
    context = parse(format, {**request, key: [*items, *extra]})
    return tuple(message_hash(m) for m in context.messages)


def _joined(key_id: int, hashes: tuple[str, ...]) -> str | None:
    """The session whose last call (request and answer) this call's messages extend."""
    now = time.monotonic()
    best: tuple[int, str] | None = None
    with _LOCK:
        for external_id, (prefix, when) in (_MEMORY.get(key_id) or {}).items():
            if now - when > RECENT_SECONDS or len(prefix) > len(hashes):
                continue
            if hashes[: len(prefix)] == prefix and (best is None or len(prefix) > best[0]):
                best = (len(prefix), external_id)
    return best[1] if best else None


def _remember(key_id: int, external_id: str, hashes: tuple[str, ...]) -> None:
    with _LOCK:
        memory = _MEMORY.setdefault(key_id, OrderedDict())
        memory[external_id] = (hashes, time.monotonic())
        memory.move_to_end(external_id)
        while len(memory) > RECENT_PER_KEY:
            memory.popitem(last=False)


def proxy_record(
    *,
    project: Project,
    key_id: int,
    format: str,
    request_body: bytes,
    response_body: bytes,
    streamed: bool,
    session: str | None = None,
) -> str | None:
    """Record one relayed call as a turn; its session's id, or None when it could not be
    recorded (counted in :data:`failures` and logged: the call itself already succeeded)."""
    global failures
    try:
        request = json.loads(request_body)
        if not isinstance(request, dict):
            raise FormatError("request", "expected a JSON object")
        context = parse(format, request)
        answer = provider_answer(format, response_body, streamed=streamed)
        hashes = tuple(message_hash(m) for m in context.messages)
        external_id = session if session and session_id_problem(session) is None else None
        external_id = external_id or _joined(key_id, hashes)
        if external_id is None:
            stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
            external_id = f"proxy-{stamp}-{secrets.token_hex(3)}"
        turn_ingest(
            project=project,
            external_id=external_id,
            context=context,
            model=str(request.get("model") or "") or None,
            response=answer.messages or None,
            usage=answer.usage,
            source=SOURCE,
        )
        try:
            following = _hashes(format, request, answer.messages)
        except FormatError:
            following = hashes
        _remember(key_id, external_id, following)
        return external_id
    except Exception:
        failures += 1
        logger.exception("the proxy could not record a %s call", format)
        return None


__all__ = ["SOURCE", "proxy_record"]
