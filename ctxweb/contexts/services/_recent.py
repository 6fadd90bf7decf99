"""This process's memory of each session's latest stored turn (a bounded LRU), so the next
turn is ingested cheaply, and the checks that it still is the session's previous turn.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from compaction.messages import Message as LibMessage
from ctxweb.contexts.models import Message as MessageRow
from ctxweb.contexts.models import Session, ToolSet
from ctxweb.contexts.services._sessions import _Previous


@dataclass
class _Recent:
    """What this process stored for a session's latest turn, to ingest the next one cheaply.

    Valid only while that turn is the session's previous turn: it is checked against the
    session's primary key and the previous turn's primary key *and* creation time, so a turn
    rolled back (whose key SQLite may reuse) or written by another process never matches and the
    slow path runs instead. Until then it is a guess (:func:`_recent_guess`).
    """

    session_id: int
    #: The session's encoding (it never changes).
    encoding: str
    turn_key: tuple[int, Any]
    #: The turn's index in its session.
    index: int
    messages: tuple[LibMessage, ...]
    hashes: list[str]
    ids: list[int]
    regions: list[Mapping[str, int]]
    #: cumulative[i]: the regions of messages[:i] added up.
    cumulative: list[dict[str, int]]
    system: tuple[Any, ...]
    system_row: MessageRow | None
    tools: tuple[Any, ...]
    toolset: ToolSet | None
    #: Whether another process had stored turns of the session since this process's previous
    #: one (behind round robin): the next turn's messages are then looked up before they are
    #: counted, most of them being stored already.
    shared: bool = False
    #: The request's options as sent, as stored (masked when the project masks secrets) and
    #: the secrets found in them: a next turn sending the same options reuses them unscanned.
    extra: Mapping[str, Any] | None = None
    extra_stored: Mapping[str, Any] | None = None
    extra_secrets: list[dict[str, Any]] | None = None
    #: Whether the project masked secrets then (a project that turns masking on masks the
    #: very next turn's options).
    extra_masked: bool = False


#: Sessions' latest turns as this process stored them (a bounded LRU), by project id and external
#: id: known before the session is read.
_RECENT: OrderedDict[tuple[int, str], _Recent] = OrderedDict()
_RECENT_MAX = 64
_RECENT_LOCK = threading.Lock()


def _recent_guess(key: tuple[int, str]) -> _Recent | None:
    """What this process stored for session ``key``'s latest turn, unchecked."""
    with _RECENT_LOCK:
        recent = _RECENT.get(key)
        if recent is not None:
            _RECENT.move_to_end(key)
        return recent


def _recent_valid(recent: _Recent, session: Session, previous: _Previous | None) -> bool:
    """Whether ``recent`` holds ``session``'s previous turn (as stored now)."""
    return (
        previous is not None and recent.session_id == session.pk and recent.turn_key == previous.key
    )


def _recent_earlier(recent: _Recent, session: Session, previous: _Previous | None) -> bool:
    """Whether ``recent`` may hold an earlier turn of ``session`` than its previous one (another
    process stored the turns since: behind round robin, most of the time). Its messages are
    then still the session's, stored, if its turn is (checked by
    :func:`~ctxweb.contexts.selectors.turn_message_ids_after`)."""
    return (
        previous is not None
        and recent.session_id == session.pk
        and recent.turn_key != previous.key
        and recent.index < session.turn_count - 1
    )


def _recent_put(key: tuple[int, str], recent: _Recent) -> None:
    with _RECENT_LOCK:
        _RECENT[key] = recent
        _RECENT.move_to_end(key)
        while len(_RECENT) > _RECENT_MAX:
            _RECENT.popitem(last=False)


@contextmanager
def as_another_process() -> Iterator[None]:
    """Run the block as another web process would: remembering no session's latest turn, and
    leaving this process's memory as it was, stale where the block wrote a turn. What a server
    behind round robin meets when another process answered a session's previous call."""
    global _RECENT
    with _RECENT_LOCK:
        mine, _RECENT = _RECENT, OrderedDict()
    try:
        yield
    finally:
        with _RECENT_LOCK:
            _RECENT = mine


def _recent_forget(key: tuple[int, str]) -> None:
    """Forget what this process remembers of a session (it was deleted)."""
    with _RECENT_LOCK:
        _RECENT.pop(key, None)
