"""This process's memory of managed rewrites: what replaces the start of a managed session's
proxied requests once an operation compacted it (:mod:`ctxweb.contexts.services.proxying`).

A rewrite never outlives its session or its operation, whichever process holds it: the proxy
checks, on every managed call, that the session it was made for still exists (by primary key: a
session deleted and created again under the same name is another session) and that its operation
is still there and not undone (:func:`_rewrite_valid`), and forgets it otherwise; deleting a
session or a project forgets its rewrites in the deleting process at once
(:func:`_rewrites_forget`). At most :data:`REWRITES_MAX` are kept, the least recently used
dropped first (its session's next call then goes whole, as after a restart).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

from compaction.messages.model import Message, Part
from ctxweb.contexts.models import Operation


@dataclass(frozen=True)
class Rewrite:
    """What replaces the start of a managed session's requests: the agent's first messages (by
    identity) stand for ``replacement``, which operation ``operation_id`` of session
    ``session_pk`` made. When the operation also changed the top-level system prompt (picoclaw
    keeps its summary there), ``system`` is the prompt sent instead of the agent's while the
    agent's is still the one the operation planned on (identity ``original_system``)."""

    session_pk: int
    operation_id: int
    original: tuple[str, ...]
    replacement: tuple[Message, ...]
    original_system: str | None = None
    system: tuple[Part, ...] | None = None


#: Rewrites kept per process (each holds a compacted context).
REWRITES_MAX = 1024
#: By project id and session external id, the most recently used last.
_REWRITES: OrderedDict[tuple[int, str], Rewrite] = OrderedDict()
_LOCK = threading.Lock()


def _rewrite_get(key: tuple[int, str], *, session_pk: int) -> Rewrite | None:
    """The rewrite remembered for session ``key`` when it is still valid for the session whose
    primary key is ``session_pk`` (one query), else None, the memory forgotten."""
    with _LOCK:
        rewrite = _REWRITES.get(key)
    if rewrite is None:
        return None
    if _rewrite_valid(rewrite, session_pk=session_pk):
        with _LOCK:
            if key in _REWRITES:
                _REWRITES.move_to_end(key)
        return rewrite
    with _LOCK:
        if _REWRITES.get(key) is rewrite:
            del _REWRITES[key]
    return None


def _rewrite_valid(rewrite: Rewrite, *, session_pk: int) -> bool:
    """Whether ``rewrite`` was made for session ``session_pk`` by an operation that is still
    that session's and not undone."""
    if rewrite.session_pk != session_pk:
        return False
    return Operation.objects.filter(
        pk=rewrite.operation_id, session_id=session_pk, undone_at__isnull=True
    ).exists()


def _rewrite_set(key: tuple[int, str], rewrite: Rewrite) -> None:
    with _LOCK:
        _REWRITES[key] = rewrite
        _REWRITES.move_to_end(key)
        while len(_REWRITES) > REWRITES_MAX:
            _REWRITES.popitem(last=False)


def _rewrites_forget(project_id: int, external_id: str | None = None) -> None:
    """Forget session ``external_id``'s rewrite (every session's of the project when None)."""
    with _LOCK:
        for key in [k for k in _REWRITES if k[0] == project_id]:
            if external_id is None or key[1] == external_id:
                del _REWRITES[key]


def _rewrites_clear() -> None:
    with _LOCK:
        _REWRITES.clear()
