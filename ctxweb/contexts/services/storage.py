"""Message storage: a turn's messages hashed, looked up, counted and inserted once per
project (the previous turn's taken from it), and the rows of its system prompt and tools.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from compaction.messages import Context, ToolDefinition, message_to_dict
from compaction.messages import Message as LibMessage
from compaction.messages.incremental import identical_prefix
from compaction.regions import message_regions, sum_regions, system_regions
from ctxweb.accounts.models import Project
from ctxweb.contexts.models import Message as MessageRow
from ctxweb.contexts.models import ToolSet
from ctxweb.contexts.services._canonical import (
    _canonical_json,
    _check_text,
    _digest,
    _same_message,
)
from ctxweb.contexts.services._recent import _Recent
from ctxweb.contexts.services._secrets import message_scanned, value_scanned
from ctxweb.contexts.services._sql import _insert_rows, _saved
from ctxweb.contexts.services.counting import counter_for

#: How many messages the previous turn lacks that are inserted before they are looked up.
_OPTIMISTIC_MAX = 8


@dataclass
class _Messages:
    hashes: list[str]
    ids: list[int]
    regions: list[Mapping[str, int]]
    cumulative: list[dict[str, int]]
    #: The secrets of the rows among these that were looked up or inserted (not those taken
    #: from the previous turn), by row id: only rows that hold some.
    flagged: dict[int, list[dict[str, Any]]] = dataclasses.field(default_factory=dict)


@dataclass
class _MessagePlan:
    """A turn's messages before the database is asked: the leading ones the previous turn holds
    (taken from it), the others hashed, and the rows to insert for those that are new."""

    project: Project
    encoding: str
    path: str
    #: How many leading messages come from the previous turn; ``prefix`` holds them.
    start: int
    prefix: _Messages
    rest: Sequence[LibMessage]
    dicts: list[dict[str, Any]]
    texts: list[str]
    digests: list[str]
    #: Ids and regions of the messages of ``rest`` that the previous turn holds, by hash.
    cached: dict[str, tuple[int, Mapping[str, int]]]
    #: The hashes of the other messages.
    wanted: set[str]
    #: Whether the messages of ``wanted`` are counted before they are looked up (they are new as
    #: a rule after the previous turn): then ``new`` holds their rows from the start.
    optimistic: bool
    new: dict[str, MessageRow] = dataclasses.field(default_factory=dict)
    stale: list[MessageRow] = dataclasses.field(default_factory=list)

    def count(self, known: Mapping[str, MessageRow]) -> None:
        """Count the messages of ``wanted`` not ``known`` with the encoding: a row each to
        insert (``new``), or to update (``stale``: known, but never counted with it)."""
        counter = counter_for(self.encoding)
        for offset, (message, data, text, digest) in enumerate(
            zip(self.rest, self.dicts, self.texts, self.digests, strict=True)
        ):
            if digest in self.cached:
                continue
            row = known.get(digest) or self.new.get(digest)
            if row is not None and self.encoding in row.counts:
                continue
            secrets: list[dict[str, Any]] = []
            if row is None or (row.secrets and self.project.mask_secrets):
                # New content is scanned once, here; a stored masked row is counted masked.
                message, secrets = message_scanned(message, mask=self.project.mask_secrets)
                if secrets and self.project.mask_secrets:
                    data = message_to_dict(message)
                    text = _canonical_json(data)
            counted = message_regions(message, counter)
            counts = {"total": sum(counted.values()), "regions": counted}
            if row is None:
                _check_text(data, f"{self.path}.{self.start + offset}")
                self.new[digest] = MessageRow(
                    project=self.project,
                    hash=digest,
                    role=message.role,
                    data=data,
                    size=len(text.encode("utf-8")),
                    counts={self.encoding: counts},
                    secrets=secrets,
                )
            else:
                row.counts = {**row.counts, self.encoding: counts}
                self.stale.append(row)

    def rows(self) -> list[MessageRow]:
        """The rows to insert, in one global order (by hash): concurrent turns inserting the
        same new rows wait for each other instead of deadlocking (each holding a row the other
        needs)."""
        return sorted(self.new.values(), key=lambda row: row.hash)


def message_rows(
    *,
    project: Project,
    messages: Sequence[LibMessage],
    encoding: str,
    recent: _Recent | None = None,
    path: str = "messages",
) -> _Messages:
    """The ids and regions of ``messages``, in order, inserting and counting only the new ones.

    The messages that ``recent`` (the previous turn) starts with are taken from it without
    serializing them; the others are hashed, and those the previous turn does not hold are looked
    up in one query.
    """
    plan = _messages_plan(
        project=project, messages=messages, encoding=encoding, recent=recent, path=path
    )
    return _messages_store(plan)


def _messages_plan(
    *,
    project: Project,
    messages: Sequence[LibMessage],
    encoding: str,
    recent: _Recent | None,
    path: str = "messages",
    look_up_first: bool = False,
) -> _MessagePlan:
    """What :func:`message_rows` does before it asks the database; with ``look_up_first``, the
    new messages are looked up before they are counted (those stored already are not counted),
    else a few are counted at once, to be inserted in the session lock's round trip."""
    start = 0
    prefix = _Messages([], [], [], [_zero_regions()])
    if recent is not None:
        limit = min(len(messages), len(recent.messages))
        # Messages parsed incrementally (turn_request_parse) are the previous turn's own objects.
        start = identical_prefix(messages, recent.messages)
        while start < limit and _same_message(messages[start], recent.messages[start]):
            start += 1
        prefix = _Messages(
            recent.hashes[:start],
            recent.ids[:start],
            recent.regions[:start],
            recent.cumulative[: start + 1],
        )
    rest = messages[start:]
    dicts = [message_to_dict(m) for m in rest]
    texts = [_canonical_json(d) for d in dicts]
    digests = [_digest(t) for t in texts]
    cached = _recent_rows(recent, digests) if recent is not None else {}
    wanted = {h for h in digests if h not in cached}
    plan = _MessagePlan(
        project=project,
        encoding=encoding,
        path=path,
        start=start,
        prefix=prefix,
        rest=rest,
        dicts=dicts,
        texts=texts,
        digests=digests,
        cached=cached,
        wanted=wanted,
        # Otherwise (no previous turn, or many new messages) they are looked up first, not to
        # count a whole context that is stored already.
        optimistic=recent is not None and not look_up_first and len(wanted) <= _OPTIMISTIC_MAX,
    )
    if plan.optimistic:
        plan.count({})
    return plan


def _messages_store(
    plan: _MessagePlan,
    inserted: list[tuple[int, str]] | None = None,
    *,
    found: list[MessageRow] | None = None,
) -> _Messages:
    """Carry out ``plan``: look up (unless ``found`` holds the rows of its ``wanted`` hashes
    already) and count the messages it could not, insert the new ones (unless ``inserted`` says
    already what inserting ``plan.rows()`` inserted), and return the ids and regions of all.
    """
    encoding = plan.encoding
    known: dict[str, MessageRow] = {}
    if not plan.optimistic:
        if found is None:
            known = _rows_by_hash(plan.project, plan.wanted)
        else:
            known = {row.hash: row for row in found}
        plan.count(known)
    rows = plan.rows()
    if rows:
        if inserted is None:
            inserted = _insert_rows(rows)
        for pk, digest in inserted:
            row = plan.new[digest]
            _saved(row, pk)
            known[digest] = row
        if len(inserted) < len(rows):  # stored already, or meanwhile by a concurrent turn
            meanwhile = _rows_by_hash(plan.project, {r.hash for r in rows if r.pk is None})
            known.update(meanwhile)
            for digest, row in meanwhile.items():
                if encoding not in row.counts:
                    row.counts = {**row.counts, encoding: plan.new[digest].counts[encoding]}
                    plan.stale.append(row)
    if plan.stale:
        MessageRow.objects.bulk_update(sorted(plan.stale, key=lambda row: row.pk), ["counts"])
    hashes, ids = plan.prefix.hashes, plan.prefix.ids
    regions, cumulative = plan.prefix.regions, plan.prefix.cumulative
    flagged: dict[int, list[dict[str, Any]]] = {}
    for digest in plan.digests:
        if digest in plan.cached:
            row_id, row_regions = plan.cached[digest]
        else:
            row = known[digest]
            row_id, row_regions = row.id, row.counts[encoding]["regions"]
            if row.secrets:
                flagged[row_id] = row.secrets
        hashes.append(digest)
        ids.append(row_id)
        regions.append(row_regions)
        total = dict(cumulative[-1])
        for name, tokens in row_regions.items():
            total[name] = total.get(name, 0) + tokens
        cumulative.append(total)
    return _Messages(hashes, ids, regions, cumulative, flagged)


def _recent_rows(recent: _Recent, digests: list[str]) -> dict[str, tuple[int, Mapping[str, int]]]:
    """The ids and regions of the messages of ``digests`` that the previous turn holds."""
    if len(digests) > 16:  # a large tail (after a compaction): index the previous turn
        return {
            h: (i, r) for h, i, r in zip(recent.hashes, recent.ids, recent.regions, strict=True)
        }
    found: dict[str, tuple[int, Mapping[str, int]]] = {}
    for digest in digests:  # a few new messages: a scan each, in C
        try:
            at = recent.hashes.index(digest)
        except ValueError:
            continue
        found[digest] = (recent.ids[at], recent.regions[at])
    return found


def _rows_by_hash(project: Project, hashes: set[str]) -> dict[str, MessageRow]:
    """The project's rows of ``hashes``, without their content."""
    if not hashes:
        return {}
    rows = MessageRow.objects.filter(project=project, hash__in=hashes).only(
        "id", "hash", "counts", "secrets"
    )
    return {row.hash: row for row in rows}


def _zero_regions() -> dict[str, int]:
    return sum_regions([])


def system_row(*, project: Project, context: Context, encoding: str) -> MessageRow | None:
    if not context.system:
        return None
    parts = tuple(context.system)
    # A top-level system prompt is stored like a message, marked so it is never taken for one.
    message = LibMessage("system", parts, extra={"ctxweb_top_level_system": True})
    data = message_to_dict(message)
    text = _canonical_json(data)
    digest = _digest(text)
    row = MessageRow.objects.filter(project=project, hash=digest).first()
    if row is not None and encoding in row.counts:
        return row
    secrets: list[dict[str, Any]] = []
    if row is None or (row.secrets and project.mask_secrets):
        message, secrets = message_scanned(message, mask=project.mask_secrets)
        if secrets and project.mask_secrets:
            parts = message.parts
            data = message_to_dict(message)
            text = _canonical_json(data)
    regions = system_regions(parts, counter_for(encoding))
    counts = {"total": sum(regions.values()), "regions": regions}
    if row is None:
        _check_text(data, "system")
        row, _ = MessageRow.objects.get_or_create(
            project=project,
            hash=digest,
            defaults={
                "role": "system",
                "data": data,
                "size": len(text.encode()),
                "counts": {encoding: counts},
                "secrets": secrets,
            },
        )
    if encoding not in row.counts:
        row.counts = {**row.counts, encoding: counts}
        row.save(update_fields=["counts"])
    return row


def toolset_row(*, project: Project, context: Context, encoding: str) -> ToolSet | None:
    if not context.tools:
        return None
    data = [
        {
            "name": t.name,
            "description": t.description,
            "parameters": dict(t.parameters),
            "extra": dict(t.extra),
        }
        for t in context.tools
    ]
    text = _canonical_json(data)
    digest = _digest(text)
    row = ToolSet.objects.filter(project=project, hash=digest).first()
    if row is None:
        _check_text(data, "tools")
        # Scanned once, here, like a message: masked, the row holds (and counts) the masks; its
        # hash stays that of what was sent, so the next turn sending the same tools finds it.
        data, secrets = value_scanned(data, field="tools", mask=project.mask_secrets)
        row, _ = ToolSet.objects.get_or_create(
            project=project,
            hash=digest,
            defaults={"data": data, "counts": {}, "secrets": secrets},
        )
    if encoding not in row.counts:
        tools = context.tools if not (row.secrets and project.mask_secrets) else _tools(row.data)
        row.counts = {**row.counts, encoding: counter_for(encoding).count_tools(tools)}
        row.save(update_fields=["counts"])
    return row


def _tools(data: list[dict[str, Any]]) -> tuple[ToolDefinition, ...]:
    """The tool definitions a tool set row holds."""
    return tuple(
        ToolDefinition(
            name=t["name"],
            description=t.get("description", ""),
            parameters=t.get("parameters", {}),
            extra=t.get("extra", {}),
        )
        for t in data
    )
