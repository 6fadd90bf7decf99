"""What a turn's inspector reads: the turn's message ids and its previous turn's, the messages it
removed, a page of its messages biggest first, and the artifacts they point to. A constant
number of queries whatever the number of turns or messages."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from django.core.paginator import Paginator
from django.db.models import Q

from compaction.messages import message_from_dict, message_identity
from ctxweb.accounts.models import Project
from ctxweb.contexts.models import (
    KEYFRAME_EVERY,
    Session,
    Turn,
)
from ctxweb.contexts.models import Artifact as ArtifactRow
from ctxweb.contexts.models import Message as MessageRow
from ctxweb.contexts.selectors.artifacts import SHORT_ID
from ctxweb.contexts.selectors.turns import (
    message_detail,
    message_secrets,
    message_tokens,
    messages_by_id,
)
from ctxweb.numbers import parse_whole


def turn_message_id_lists(*, session: Session, index: int) -> tuple[list[int], list[int]]:
    """The message ids of turn ``index - 1`` and of turn ``index``, rebuilt in one query."""
    if index <= 0:
        return [], _ids(session=session, start=index - index % KEYFRAME_EVERY, stop=index)[1]
    previous = index - 1
    start = previous - previous % KEYFRAME_EVERY
    return _ids(session=session, start=start, stop=index)


def _ids(*, session: Session, start: int, stop: int) -> tuple[list[int], list[int]]:
    """The id lists of turns ``stop - 1`` and ``stop`` from the deltas from keyframe ``start``."""
    before: list[int] = []
    ids: list[int] = []
    rows = (
        Turn.objects.filter(session=session, index__gte=start, index__lte=stop)
        .order_by("index")
        .values_list("index", "shared", "tail")
    )
    for index, shared, tail in rows:
        if index == stop:
            before = ids
        ids = ids[:shared] + list(tail)
    return (before if stop > 0 else []), ids


def _removed(before: list[int], ids: list[int]) -> list[int]:
    """The ids in ``before`` that are gone from ``ids``, each once, in their first order."""
    seen = set(ids)
    return [i for i in dict.fromkeys(before) if i not in seen]


#: Added messages compared by content with the removed ones, at most (a turn that adds more is a
#: new context, not a moved breakpoint).
RECONCILED = 64


def _added_ids(before: list[int], ids: list[int], gone: list[int]) -> list[int]:
    """The ids new in ``ids`` whose rows the diff reads to tell a moved cache breakpoint from a
    change: only when something disappeared, and at most :data:`RECONCILED`."""
    if not gone:
        return []
    kept = set(before)
    added = list(dict.fromkeys(i for i in ids if i not in kept))
    return added if len(added) <= RECONCILED else []


def _identity(row: MessageRow) -> str:
    return message_identity(message_from_dict(row.data))


def _same_content(
    gone: list[int], added: list[int], rows: dict[int, MessageRow]
) -> tuple[set[int], set[int]]:
    """The removed and the added ids that are the same messages by content (``message_identity``:
    a cache breakpoint moved, keys reordered): neither disappeared nor was added."""
    if not gone or not added or not all(i in rows for i in added):
        return set(), set()
    by_identity: dict[str, list[int]] = {}
    for i in added:
        by_identity.setdefault(_identity(rows[i]), []).append(i)
    old: set[int] = set()
    new: set[int] = set()
    for i in gone:
        row = rows.get(i)
        match = by_identity.get(_identity(row)) if row is not None else None
        if match:
            old.add(i)
            new.add(match.pop(0))
    return old, new


def _diff(
    *,
    before: list[int],
    ids: list[int],
    index: int,
    rows: dict[int, MessageRow],
    encoding: str,
) -> dict[str, Any]:
    """The diff of two id lists, the removed messages taken from ``rows`` (no query)."""
    if index <= 0:
        return {"first": True, "added": [], "removed": [], "removed_tokens": 0}
    gone = _removed(before, ids)
    old, new = _same_content(gone, _added_ids(before, ids, gone), rows)
    kept = set(before) | new
    added = [position for position, i in enumerate(ids) if i not in kept]
    first_position: dict[int, int] = {}
    for position, i in enumerate(before):
        first_position.setdefault(i, position)
    removed = []
    for i in gone:
        if i in old:
            continue
        row = rows.get(i)
        if row is None:
            continue
        removed.append(
            {
                "id": row.hash,
                "role": row.role,
                "position": first_position[i],
                "tokens": row.counts.get(encoding, {}).get("total", 0),
                "message": row.data,
            }
        )
    return {
        "first": False,
        "added": added,
        "removed": removed,
        "removed_tokens": sum(r["tokens"] for r in removed),
    }


def turn_diff(*, session: Session, index: int) -> dict[str, Any]:
    """What changed since the previous turn, by message content: the positions of the messages
    added in this turn, and the messages that disappeared (two queries). A message sent again with
    its cache breakpoint moved or its keys in another order is neither."""
    before, ids = turn_message_id_lists(session=session, index=index)
    gone = _removed(before, ids) if index > 0 else []
    rows = messages_by_id(ids=[*gone, *_added_ids(before, ids, gone)])
    return _diff(before=before, ids=ids, index=index, rows=rows, encoding=session.encoding)


def turn_inspector(
    *,
    turn: Turn,
    order: str = "position",
    page_number: Any = None,
    page_size: int = 200,
) -> dict[str, Any]:
    """One page of ``turn``'s messages for the inspector, in order or largest first
    (``order="size"``), with the diff against the previous turn.

    Three queries whatever the number of messages: the id lists of the turn and the one before,
    every message's tokens (for the order and the bars), and the rows of the page's and the
    removed messages. Only the page's messages are loaded and decoded.

    Returns ``page`` (a :class:`~django.core.paginator.Page` of positions), ``messages``
    (:func:`~ctxweb.contexts.message_detail` of the page's, in page order),
    ``count`` (messages in the turn), ``largest`` (the most tokens of one), ``diff``
    (as :func:`turn_diff`) and ``secrets`` (those found in any of its messages, with their
    positions; one more query).
    """
    session = turn.session
    encoding = session.encoding
    before, ids = turn_message_id_lists(session=session, index=turn.index)
    tokens = message_tokens(ids=ids, encoding=encoding)
    positions: Sequence[int] = range(len(ids))
    if order == "size":
        positions = sorted(positions, key=lambda p: (-tokens.get(ids[p], 0), p))
    page = Paginator(positions, page_size).get_page(page_number)
    gone = _removed(before, ids) if turn.index > 0 else []
    added = _added_ids(before, ids, gone)
    rows = messages_by_id(ids=[*(ids[p] for p in page.object_list), *gone, *added])
    messages = [
        message_detail(position=p, row=rows[ids[p]], encoding=encoding) for p in page.object_list
    ]
    return {
        "page": page,
        "messages": messages,
        "count": len(ids),
        "largest": max(tokens.values(), default=0),
        "diff": _diff(before=before, ids=ids, index=turn.index, rows=rows, encoding=encoding),
        "secrets": message_secrets(ids=ids),
    }


def artifacts_by_id(*, project: Project, ids: Iterable[str]) -> dict[str, ArtifactRow]:
    """The project's artifacts named by ``ids`` (content keys, short ids or row ids), in one
    query, without their content; unknown and ambiguous ids are left out."""
    wanted = {i for i in ids if i}
    if not wanted:
        return {}
    shorts = [i for i in wanted if SHORT_ID.fullmatch(i) and len(i) < 64]
    keys = [i for i in wanted if parse_whole(i) is None]
    pks = [n for i in wanted if (n := parse_whole(i)) is not None]
    query = Q(key__in=keys) | Q(pk__in=pks)
    for short in shorts:
        query |= Q(key__gte=short, key__lt=short + "g")
    rows = ArtifactRow.objects.filter(project=project).filter(query)
    found: dict[str, ArtifactRow] = {}
    for row in rows.defer("content"):
        found[row.key] = row
        found[str(row.pk)] = row
    for short in shorts:
        named = {row.key: row for row in found.values() if row.key.startswith(short)}
        if len(named) == 1:
            found.setdefault(short, *named.values())
    return {i: found[i] for i in wanted if i in found}
