"""This process's memory of each session's latest stored turn (a bounded LRU), so the next
turn is ingested cheaply, and the checks that it still is the session's previous turn.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from django.core.cache import cache

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


#: How long the shared cache keeps a session's latest turn (an idle session's is looked up anew).
TIP_SECONDS = 3600
logger = logging.getLogger(__name__)


def _tip_name(key: tuple[int, str]) -> str:
    digest = hashlib.blake2b(key[1].encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
    return f"ctxweb-tip:{key[0]}:{digest}"


def _tip_is_elsewhere(key: tuple[int, str], recent: _Recent) -> bool:
    """Whether the shared cache says another process stored a later turn of session ``key`` than
    ``recent`` (behind round robin): then the messages ``recent`` lacks were mostly stored since,
    and are looked up before they are counted. Unknown (nothing cached, the cache down): False,
    and the guess is checked after the session is locked, as always."""
    try:
        latest = cache.get(_tip_name(key))
    except Exception:  # a cache that is down costs only this hint
        return False
    return latest is not None and latest != recent.turn_key[0]


def _tip_put(key: tuple[int, str], turn_id: int) -> None:
    """Tell every process which turn is session ``key``'s latest (once it is committed)."""
    try:
        cache.set(_tip_name(key), turn_id, TIP_SECONDS)
    except Exception:
        logger.warning("the shared cache is unavailable: session tips not shared")


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
