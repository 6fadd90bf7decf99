"""Attribution rollups (issue 36): what each session's turns held, item by item and day by day,
kept up to date at ingest so that the session and project pages read rollup rows only.

A turn is attributed incrementally (:func:`attribution_turn_writes`): after the answer of a
turn posted over HTTP (:func:`attribution_catch_up`, handed to
:func:`ctxweb.afterwards.after_answer`), else in the turn's own round trip.
``Session.attributed_turns`` says how many turns the rollups hold; readers catch up first. Only
the messages past the prefix it shares with the previous turn are attributed
(:func:`compaction.attribution.message_items`, their tool results resolved with the calls of the
context at hand); the items of the messages it dropped, kept per position
(:class:`~ctxweb.contexts.models.AttributionEntry`), are subtracted; the system prompt and tools
are attributed again only when their row changes. Only the items whose tokens changed are
written (:class:`~ctxweb.contexts.models.AttributionItem` keeps token-turns lazily).
:func:`attribution_rebuild` makes the same rows again from the stored turns, with the same
writes.
"""

from __future__ import annotations

import datetime
import hashlib
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from django.db import connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from compaction.attribution import (
    CallTarget,
    Item,
    call_targets,
    item_labels,
    message_items,
    system_items,
    tool_items,
    tool_server,
)
from compaction.cache import ModelPrice, price_for
from compaction.messages import Message as LibMessage
from compaction.messages import ToolDefinition, message_from_dict
from compaction.messages.model import ReasoningPart, TextPart, ToolCallPart, ToolResultPart
from compaction.regions import USED_REGIONS
from compaction.tokens import TokenCounter
from ctxweb.accounts.models import Project
from ctxweb.contexts.models import (
    AttributionDay,
    AttributionEntry,
    AttributionItem,
    AttributionLabel,
    Session,
    ToolSet,
    ToolUse,
    Turn,
)
from ctxweb.contexts.models import Message as MessageRow
from ctxweb.contexts.selectors.inspector import turn_message_id_lists
from ctxweb.contexts.services._secrets import message_scanned
from ctxweb.contexts.services._sql import (
    _ASYNCHRONOUS_COMMIT,
    Fixed,
    _batches_statements,
    _execute_at_once,
    _execute_in_order,
    _insert_sql,
)
from ctxweb.contexts.services.counting import counter_for, counting_scope
from ctxweb.contexts.services.pricing import model_prices

logger = logging.getLogger(__name__)

#: The negative positions of what is not a message: the request's own overhead, the top-level
#: system prompt, the tool definitions, the provider's reported remainder.
OVERHEAD, SYSTEM, TOOLS, PROVIDER = -1, -2, -3, -4
#: Open outputs looked for in a turn's new assistant messages (the latest first).
OPEN_OUTPUTS = 200
#: Distinctive lines kept per output to recognise a later reference, and their lengths.
PROBES = 5
PROBE_MIN, PROBE_MAX = 24, 160

#: (region, kind, name, detail)
Key = tuple[str, str, str, str]
#: A statement of a turn's writes and its parameters (:func:`_execute`).
Statement = tuple[str | Fixed, list[Any]]
#: Statements of at most this many rows are kept prepared on PostgreSQL (:class:`Fixed`): a
#: late turn writes a few of each, and each row count is a statement of its own a connection.
_PREPARED_ROWS = 8
#: An entry's stored item: [region, kind, name, detail, group, tokens]
Stored = list[Any]


def item_key(key: Key) -> str:
    """The short indexed identity of an item key."""
    return hashlib.sha1("\x00".join(key).encode("utf-8"), usedforsecurity=False).hexdigest()


@dataclass
class _Change:
    group: str
    delta: int = 0
    added: int = 0
    count: int = 0


@dataclass
class _Changes:
    items: dict[Key, _Change] = field(default_factory=dict)
    #: (top list, name) -> change of tokens, each item under its own group (items of one
    #: identity may come from several tools: a file read by one and edited by another)
    labels: dict[tuple[str, str], int] = field(default_factory=dict)

    def add(self, stored: Iterable[Stored], sign: int, *, brought: bool = True) -> None:
        """Add (``sign`` 1) or subtract (-1) items; ``brought``: added items were brought in
        by a new message (not moved from another position)."""
        for region, kind, name, detail, group, tokens in stored:
            key = (region, kind, name, detail)
            change = self.items.get(key)
            if change is None:
                change = self.items[key] = _Change(group)
            change.delta += sign * tokens
            for label in item_labels(region, kind, name, group):
                self.labels[label] = self.labels.get(label, 0) + sign * tokens
            if sign > 0 and brought:
                change.added += tokens
                change.count += 1


def _stored(items: Iterable[Item]) -> list[Stored]:
    return [[i.region, i.kind, i.name, i.detail, i.group, i.tokens] for i in items if i.tokens]


def _common_prefix(previous: Sequence[int], ids: Sequence[int]) -> int:
    shared = min(len(previous), len(ids))
    if list(previous[:shared]) == list(ids[:shared]):
        return shared
    n = 0
    for a, b in zip(previous, ids, strict=False):
        if a != b:
            break
        n += 1
    return n


#: The MCP servers of the tool sets seen lately, by tool set id (a tool set never changes).
_SERVERS: dict[int, dict[str, str]] = {}
_SERVERS_MAX = 256


def _toolset_servers(toolset: ToolSet) -> dict[str, str]:
    """Tool name -> MCP server of ``toolset``'s definitions that name one."""
    found = _SERVERS.get(toolset.pk)
    if found is None:
        found = {
            t.name: s for t in _tools(toolset) if (s := tool_server(t.name, t.extra)) is not None
        }
        if len(_SERVERS) >= _SERVERS_MAX:
            _SERVERS.clear()
        _SERVERS[toolset.pk] = found
    return found


def _tools(toolset: ToolSet | None) -> tuple[ToolDefinition, ...]:
    """The definitions as stored (masked when the project masks secrets), as pages read them."""
    if toolset is None:
        return ()
    return tuple(
        ToolDefinition(
            name=t["name"],
            description=t.get("description", ""),
            parameters=t.get("parameters", {}),
            extra=t.get("extra", {}),
        )
        for t in toolset.data
    )


def _calls_before(
    messages: Sequence[LibMessage], start: int, wanted: set[str], servers: Mapping[str, str]
) -> dict[str, CallTarget]:
    """The latest call of each id of ``wanted`` made before ``start``: walked back from it,
    stopping when all are found (a result's call is as a rule just before it)."""
    found: dict[str, CallTarget] = {}
    for position in range(start - 1, -1, -1):
        if not wanted:
            break
        calls = messages[position].tool_calls
        if not calls or not any(call.id in wanted for call in calls):
            continue
        for call_id, target in call_targets(messages[position], servers).items():
            if call_id in wanted:
                found[call_id] = target
                wanted.discard(call_id)
    return found


def _probes(text: str, file: str | None) -> list[str]:
    """What a later message that uses an output would repeat: its file's path (and a distinct
    base name), else a few of its longest distinctive lines."""
    if file:
        base = file.rsplit("/", 1)[-1]
        return [file, base] if len(base) >= 6 and base != file else [file]
    lines = {
        line.strip() for line in text.splitlines() if PROBE_MIN <= len(line.strip()) <= PROBE_MAX
    }
    return sorted(lines, key=lambda line: (-len(line), line))[:PROBES]


def _spoken(message: LibMessage) -> str:
    """An assistant message's own words and call arguments, where references are looked for."""
    texts: list[str] = []
    for part in message.parts:
        if isinstance(part, TextPart | ReasoningPart):
            texts.append(part.text)
        elif isinstance(part, ToolCallPart):
            texts.append(part.arguments)
    return "\n".join(texts)


def _uses(
    message: LibMessage,
    items: Sequence[Item],
    counter: TokenCounter,
    *,
    turn: int,
    position: int,
    calls: Mapping[str, CallTarget],
    session: Session,
) -> list[ToolUse]:
    """The tool calls and outputs of ``message`` (brought in at ``position`` by ``turn``)."""
    uses: list[ToolUse] = []
    parts = counter.count_message(message).parts
    for part, tokens in zip(message.parts, parts, strict=True):
        if isinstance(part, ToolCallPart):
            files = [i.name for i in items if i.region == "tool_calls" and i.kind == "file"]
            uses.append(
                ToolUse(
                    session=session,
                    turn=turn,
                    position=position,
                    kind="call",
                    tool=part.name[:500],
                    name=(files[0] if len(files) == 1 else part.name)[:500],
                    tokens=tokens,
                )
            )
        elif isinstance(part, ToolResultPart):
            target = calls.get(part.tool_call_id)
            tool = target.tool if target is not None else (message.name or "tool")
            files = [i.name for i in items if i.region == "tool_results" and i.kind == "file"]
            file = files[0] if files else None
            uses.append(
                ToolUse(
                    session=session,
                    turn=turn,
                    position=position,
                    kind="output",
                    tool=tool[:500],
                    name=(file or tool)[:500],
                    tokens=tokens,
                    probes=_probes(part.text, file),
                )
            )
    return uses


@dataclass
class _Entry:
    position: int
    ref: int
    items: list[Stored]


class _OpenOutputs:
    """A session's latest open outputs (id and probes, the oldest first, at most
    :data:`OPEN_OUTPUTS`), with their probes indexed by their first :data:`PROBE_MIN`
    characters: a turn's assistant text is looked up in the index at each of its positions
    instead of every probe being searched for in it. Searching hundreds of probes scattered over
    the heap cost a late turn 0.17 ms (the memory they are in, more than the searches); the
    index touches the text and one dictionary. A text much longer than the probes are many is
    searched for each probe, as before: its positions would cost more."""

    def __init__(self, outputs: Iterable[tuple[int, Sequence[str]]] = ()) -> None:
        self.probes: dict[int, list[str]] = {}
        self.heads: dict[str, list[tuple[int, str]]] = {}
        self.short: list[tuple[int, str]] = []  # probes under PROBE_MIN characters (none new)
        self.indexed = 0  # probes in ``heads``
        self.add(outputs)

    def __len__(self) -> int:
        return len(self.probes)

    def __iter__(self) -> Iterator[tuple[int, list[str]]]:
        return iter(self.probes.items())

    def add(self, outputs: Iterable[tuple[int, Sequence[str]]]) -> None:
        """Add ``outputs`` as the newest; the oldest past :data:`OPEN_OUTPUTS` go."""
        for pk, probes in outputs:
            kept = [probe for probe in probes if probe]
            self.probes[pk] = kept
            for probe in kept:
                if len(probe) >= PROBE_MIN:
                    self.heads.setdefault(probe[:PROBE_MIN], []).append((pk, probe))
                    self.indexed += 1
                else:
                    self.short.append((pk, probe))
        if len(self.probes) > OPEN_OUTPUTS:
            self.remove(list(self.probes)[: len(self.probes) - OPEN_OUTPUTS])

    def remove(self, pks: Iterable[int]) -> None:
        short = False
        for pk in pks:
            for probe in self.probes.pop(pk, ()):
                if len(probe) < PROBE_MIN:
                    short = True
                    continue
                head = probe[:PROBE_MIN]
                found = self.heads.get(head, [])
                kept = [entry for entry in found if entry[0] != pk]
                self.indexed -= len(found) - len(kept)
                if kept:
                    self.heads[head] = kept
                else:
                    self.heads.pop(head, None)
        if short:
            self.short = [(pk, probe) for pk, probe in self.short if pk in self.probes]

    def referenced(self, text: str) -> set[int]:
        """The ids of the outputs whose probes ``text`` holds one of."""
        seen: set[int] = set()
        if len(text) > 8 * max(1, self.indexed):
            for pk, probes in self.probes.items():
                if any(len(probe) <= len(text) and probe in text for probe in probes):
                    seen.add(pk)
            return seen
        heads = self.heads
        for start in range(len(text) - PROBE_MIN + 1):
            found = heads.get(text[start : start + PROBE_MIN])
            if found is not None:
                for pk, probe in found:
                    if pk not in seen and text.startswith(probe, start):
                        seen.add(pk)
        for pk, probe in self.short:
            if pk not in seen and probe in text:
                seen.add(pk)
        return seen


@dataclass
class _State:
    """What this process knows of a session's rollups after its turn ``index``: the entries of
    the non-message positions, and its latest open outputs (id, probes; None: not known), so
    that a turn that only adds messages reads nothing back."""

    index: int
    specials: dict[int, _Entry]
    open: _OpenOutputs | None


#: By session id; checked against the turn's index before use (another process may have
#: stored the turns since, or this turn's transaction rolled back).
_STATES: dict[int, _State] = {}
_STATES_MAX = 2_000


def _special_ref(
    position: int,
    *,
    counter: TokenCounter,
    system: MessageRow | None,
    toolset: ToolSet | None,
    provider: int,
) -> int:
    """What tells whether a non-message position changed: the overhead's or the provider
    remainder's tokens, the system row's or tool set's id (0: none)."""
    if position == OVERHEAD:
        return counter.REQUEST_OVERHEAD
    if position == SYSTEM:
        return system.pk if system is not None else 0
    if position == TOOLS:
        return toolset.pk if toolset is not None else 0
    return provider


def _special_items(
    position: int,
    *,
    counter: TokenCounter,
    system: MessageRow | None,
    toolset: ToolSet | None,
    provider: int,
) -> list[Stored]:
    if position == OVERHEAD:
        tokens = counter.REQUEST_OVERHEAD
        return [["system", "unattributed", "unattributed", "", "unattributed", tokens]]
    if position == SYSTEM:
        if system is None:
            return []
        return _stored(system_items(message_from_dict(system.data).parts, counter))
    if position == TOOLS:
        return _stored(tool_items(_tools(toolset), counter)) if toolset is not None else []
    if provider:
        name = "unattributed (provider)"
        return [["unattributed", "unattributed", name, "", "provider", provider]]
    return []


def _message_items(
    message: LibMessage,
    position: int,
    counter: TokenCounter,
    calls: Mapping[str, CallTarget],
    servers: Mapping[str, str],
    regions: Sequence[Mapping[str, int]] | None,
    mask: bool,
) -> tuple[LibMessage, list[Item]]:
    """The items of the message at ``position``, and the message as stored: where its items do
    not add up to its stored ``regions``, it was stored masked, and is attributed masked."""
    items = message_items(message, counter, where=position, calls=calls, servers=servers)
    if (
        mask
        and regions is not None
        and position < len(regions)
        and sum(i.tokens for i in items) != sum(regions[position].values())
    ):
        message = message_scanned(message, mask=True)[0]
        items = message_items(message, counter, where=position, calls=calls, servers=servers)
    return message, items


def _items(
    message: LibMessage,
    position: int,
    counter: TokenCounter,
    calls: Mapping[str, CallTarget],
    servers: Mapping[str, str],
    regions: Sequence[Mapping[str, int]] | None,
    mask: bool,
) -> list[Item]:
    return _message_items(message, position, counter, calls, servers, regions, mask)[1]


@dataclass
class TurnWrites:
    """A turn's writes to its session's rollups (:func:`attribution_turn_writes`): its
    ``statements``, to run in order inside the turn's transaction (ingest sends them in the
    turn's own round trip), then :meth:`finish` with the ids the first returns when
    ``returning``."""

    statements: list[Statement]
    returning: bool
    _finish: Callable[[list[int]], None]

    def finish(self, ids: list[int]) -> None:
        self._finish(ids)


def attribution_turn_writes(
    *,
    session: Session,
    turn: Turn,
    messages: Sequence[LibMessage],
    ids: Sequence[int],
    previous_ids: Sequence[int],
    system: MessageRow | None,
    toolset: ToolSet | None,
    regions: Sequence[Mapping[str, int]] | None = None,
    mask: bool = False,
) -> TurnWrites:
    """What adding turn ``turn`` (its context's ``messages``, their row ``ids``, the previous
    turn's ``previous_ids``) writes to its session's rollups; it reads what it needs now.

    Only the messages past the prefix shared with the previous turn are attributed; the items
    of those it dropped are subtracted. ``regions`` are the stored regions of each message:
    where a message's items do not add up to them, the message was stored masked (``mask``)
    and is attributed masked, as the pages see it. The turn's row need not be written yet (its
    day is known: ``created_at`` is set when its insert is built).
    """
    index = turn.index
    counter = counter_for(session.encoding)
    prefix = _common_prefix(previous_ids, ids)
    changes = _Changes()
    state = _STATES.pop(session.pk, None)
    if state is not None and state.index != index - 1:
        state = None
    old: dict[int, _Entry] = dict(state.specials) if state is not None else {}
    # The items of the messages dropped, by message id: one the turn sends again at another
    # position (what follows a dropped message moves up) is moved, not brought in.
    moved: dict[int, list[list[Stored]]] = {}
    dropped = False
    wanted_rows = Q(position__gte=prefix) if prefix < len(previous_ids) else None
    if state is None:
        wanted_rows = Q(position__lt=0) if wanted_rows is None else wanted_rows | Q(position__lt=0)
    if wanted_rows is not None:
        for position, ref, items in (
            AttributionEntry.objects.filter(session=session)
            .filter(wanted_rows)
            .values_list("position", "ref", "items")
        ):
            if position >= 0:
                changes.add(items, -1)
                moved.setdefault(ref, []).append(items)
                dropped = True
            else:
                old[position] = _Entry(position, ref, items)
    writes: list[_Entry] = []
    reported = turn.reported_input_tokens
    provider = max(0, reported - turn.counted_tokens) if reported is not None else 0
    for position in (OVERHEAD, SYSTEM, TOOLS, PROVIDER):
        ref = _special_ref(
            position, counter=counter, system=system, toolset=toolset, provider=provider
        )
        before = old.get(position)
        if before is not None and before.ref == ref:
            continue
        if before is not None:
            changes.add(before.items, -1)
        items = _special_items(
            position, counter=counter, system=system, toolset=toolset, provider=provider
        )
        changes.add(items, 1)
        writes.append(_Entry(position, ref, items))
    servers = _toolset_servers(toolset) if toolset is not None else {}
    # The results whose call is not made earlier in the tail or beside them (the tail's calls
    # are added as it is walked; agents reuse call ids, so order matters).
    wanted: set[str] = set()
    made: set[str] = set()
    for message in messages[prefix:]:
        own = {call.id for call in message.tool_calls}
        for part in message.parts:
            if isinstance(part, ToolResultPart) and part.tool_call_id not in made | own:
                wanted.add(part.tool_call_id)
        made |= own
    calls = _calls_before(messages, prefix, wanted, servers) if wanted else {}
    uses: list[ToolUse] = []
    spoken: list[tuple[int, str]] = []
    tools_changed = any(entry.position == TOOLS for entry in writes)
    for position in range(prefix, len(messages)):
        message = messages[position]
        if message.tool_calls:
            calls.update(call_targets(message, servers))
        earlier = moved.get(ids[position])
        if earlier:
            stored = earlier.pop()
            # Only a tool result's items depend on the context (its call) and only a call's
            # on the tools (their servers): others are taken as they were.
            if tools_changed or message.tool_calls or message.tool_results:
                stored = _stored(_items(message, position, counter, calls, servers, regions, mask))
            changes.add(stored, 1, brought=False)
            writes.append(_Entry(position, ids[position], stored))
            continue
        message, items = _message_items(message, position, counter, calls, servers, regions, mask)
        stored = _stored(items)
        changes.add(stored, 1)
        writes.append(_Entry(position, ids[position], stored))
        uses += _uses(
            message, items, counter, turn=index, position=position, calls=calls, session=session
        )
        if message.role == "assistant":
            spoken.append((position, _spoken(message)))
    quote = connection.ops.quote_name
    # Every write of the turn, sent in one round trip where the driver allows it.
    statements: list[Statement] = []
    open_outputs, seen = _references(
        session, uses, spoken, state.open if state is not None else None
    )
    # The new outputs' ids come back when they fit one statement (almost every turn).
    returning = 0 < len(uses) <= _ROWS_PER_STATEMENT and (
        connection.features.can_return_rows_from_bulk_insert
    )
    for start in range(0, len(uses), _ROWS_PER_STATEMENT):
        chunk = uses[start : start + _ROWS_PER_STATEMENT]
        sql, params = _insert_sql(chunk)
        sql += f" RETURNING {quote('id')}" if returning else ""
        statements.append((_fixed(sql, len(chunk)), params))
    if dropped:
        table = quote(AttributionEntry._meta.db_table)
        statements.append(
            (
                f"DELETE FROM {table} WHERE session_id = %s AND {quote('position')} >= %s",
                [session.pk, prefix],
            )
        )
    for start in range(0, len(writes), _ROWS_PER_STATEMENT):
        rows = [
            AttributionEntry(session=session, position=e.position, ref=e.ref, items=e.items)
            for e in writes[start : start + _ROWS_PER_STATEMENT]
        ]
        sql, params = _insert_sql(rows)
        sql += (
            f" ON CONFLICT (session_id, {quote('position')}) DO UPDATE"
            " SET ref = excluded.ref, items = excluded.items"
        )
        statements.append((_fixed(sql, len(rows)), params))
    statements += _items_statements(session, index, changes)
    statements += _labels_statements(session, index, changes)
    if seen:
        table = quote(ToolUse._meta.db_table)
        marks = ", ".join(["%s"] * len(seen))
        statements.append(
            (f"UPDATE {table} SET referenced = %s WHERE id IN ({marks})", [True, *sorted(seen)])
        )
    statements.append(_day_statement(session, turn))
    specials = {**old, **{e.position: e for e in writes if e.position < 0}}

    def finish(returned: list[int]) -> None:
        outputs: _OpenOutputs | None = open_outputs
        if uses and outputs is not None:
            if not returning:  # a driver that returns no ids: the open outputs are read next time
                outputs = None
            else:
                pks = iter(returned)
                added = []
                for use in uses:
                    pk = next(pks)
                    if use.kind == "output" and not use.referenced:
                        added.append((pk, use.probes))
                outputs.add(added)
        _compactions_add(session, turn)
        if len(_STATES) >= _STATES_MAX:
            _STATES.clear()
        _STATES[session.pk] = _State(index, specials, outputs)

    return TurnWrites(statements, returning, finish)


#: The columns of an item's upsert, and what a turn does to a stored row: its token-turns so
#: far closed at the turn (``since``), the change added (``tokens_now`` carries it).
_ITEM_COLUMNS = (
    "session_id",
    "key",
    "region",
    "kind",
    "name",
    "group",
    "detail",
    "tokens_now",
    "tokens_peak",
    "accrued",
    "present",
    "since",
    "introduced",
    "count",
    "first_turn",
    "last_turn",
)
_ITEM_UPDATE = (
    "accrued = {t}.accrued + {t}.tokens_now * (excluded.since - {t}.since), "
    "present = {t}.present"
    " + CASE WHEN {t}.tokens_now > 0 THEN excluded.since - {t}.since ELSE 0 END, "
    "last_turn = CASE WHEN {t}.tokens_now > 0 THEN excluded.since - 1 ELSE {t}.last_turn END, "
    "tokens_now = {t}.tokens_now + excluded.tokens_now, "
    "tokens_peak = {greatest}({t}.tokens_peak, {t}.tokens_now + excluded.tokens_now), "
    "since = excluded.since, "
    "introduced = {t}.introduced + excluded.introduced, "
    '"count" = {t}."count" + excluded."count"'
)
#: Items per statement (16 parameters each), entries and tool uses per statement (4 and 9):
#: within every driver's limit on parameters (SQLite's is 32,766).
_ITEMS_PER_STATEMENT = 500
_ROWS_PER_STATEMENT = 1_000


def _greatest() -> str:
    return "GREATEST" if connection.vendor == "postgresql" else "MAX"


def _items_statements(session: Session, index: int, changes: _Changes) -> list[Statement]:
    """The upserts that add turn ``index``'s changes to the session's items (a statement per
    :data:`_ITEMS_PER_STATEMENT` items): no row is read back."""
    changed = sorted(
        ((item_key(key), key, c) for key, c in changes.items.items() if c.delta or c.added),
        key=lambda row: row[0],  # one global order: concurrent turns never deadlock
    )
    quote = connection.ops.quote_name
    table = quote(AttributionItem._meta.db_table)
    columns = ", ".join(quote(c) for c in _ITEM_COLUMNS)
    update = _ITEM_UPDATE.format(t=table, greatest=_greatest())
    row = "(" + ", ".join(["%s"] * len(_ITEM_COLUMNS)) + ")"
    statements: list[Statement] = []
    for start in range(0, len(changed), _ITEMS_PER_STATEMENT):
        chunk = changed[start : start + _ITEMS_PER_STATEMENT]
        params: list[Any] = []
        for digest, (region, kind, name, detail), change in chunk:
            params += [
                session.pk,
                digest,
                region,
                kind,
                name,
                change.group,
                detail,
                change.delta,
                max(0, change.delta),
                0,
                0,
                index,
                change.added,
                change.count,
                index,
                index,
            ]
        sql = (
            f"INSERT INTO {table} ({columns}) VALUES {', '.join([row] * len(chunk))}"
            f" ON CONFLICT (session_id, {quote('key')}) DO UPDATE SET {update}"
        )
        statements.append((_fixed(sql, len(chunk)), params))
    return statements


#: What the label upsert does to a stored row: as an item's, without what labels lack.
_LABEL_UPDATE = (
    "accrued = {t}.accrued + {t}.tokens_now * (excluded.since - {t}.since), "
    "present = {t}.present"
    " + CASE WHEN {t}.tokens_now > 0 THEN excluded.since - {t}.since ELSE 0 END, "
    "tokens_now = {t}.tokens_now + excluded.tokens_now, "
    "since = excluded.since"
)


def _labels_statements(session: Session, index: int, changes: _Changes) -> list[Statement]:
    """The upserts that add turn ``index``'s changes to the session's labels."""
    changed = sorted((label, delta) for label, delta in changes.labels.items() if delta)
    quote = connection.ops.quote_name
    table = quote(AttributionLabel._meta.db_table)
    columns = "session_id, category, label, tokens_now, accrued, present, since"
    update = _LABEL_UPDATE.format(t=table)
    statements: list[Statement] = []
    for start in range(0, len(changed), _ITEMS_PER_STATEMENT):
        chunk = changed[start : start + _ITEMS_PER_STATEMENT]
        params: list[Any] = []
        for (category, name), delta in chunk:
            params += [session.pk, category, name, delta, 0, 0, index]
        values = ", ".join(["(%s, %s, %s, %s, %s, %s, %s)"] * len(chunk))
        sql = (
            f"INSERT INTO {table} ({columns}) VALUES {values}"
            f" ON CONFLICT (session_id, category, label) DO UPDATE SET {update}"
        )
        statements.append((_fixed(sql, len(chunk)), params))
    return statements


def _fixed(sql: str, rows: int) -> str | Fixed:
    """``sql`` kept prepared when it writes at most :data:`_PREPARED_ROWS` rows: PostgreSQL then
    parses and plans it once a connection, and the batch's text stays short."""
    return Fixed(sql) if rows <= _PREPARED_ROWS else sql


def _execute(statements: list[Statement], *, returning: bool, commit: Any = None) -> list[int]:
    """Run ``statements`` in order, in one round trip where the driver allows it; the ids the
    first one returns when ``returning``. ``commit``: the ``atomic`` block whose transaction
    they end (their ``COMMIT`` in the same round trip where it may: ``_sql._committing``)."""
    with connection.cursor() as cursor:
        return _execute_in_order(cursor, statements, returning=returning, commit=commit)


def _references(
    session: Session,
    uses: list[ToolUse],
    spoken: list[tuple[int, str]],
    open_outputs: _OpenOutputs | None,
) -> tuple[_OpenOutputs | None, set[int]]:
    """Mark the turn's new outputs its own later assistant messages refer to, and find the
    stored open outputs they refer to: the session's latest open outputs after the turn (before
    its new ones; None when not known) and the ids to mark. The open outputs are read only when
    this process does not know them and the turn has something to look for them in."""
    if not spoken:
        return open_outputs, set()
    for use in uses:
        if use.kind == "output" and any(
            position > use.position and _found(use.probes, text) for position, text in spoken
        ):
            use.referenced = True
    text = "\n".join(t for _, t in spoken)
    if open_outputs is None:
        rows = ToolUse.objects.filter(session=session, kind="output", referenced=False)
        latest = rows.order_by("-id").values_list("pk", "probes")[:OPEN_OUTPUTS]
        open_outputs = _OpenOutputs(reversed(latest))
    seen = open_outputs.referenced(text)
    open_outputs.remove(seen)
    return open_outputs, seen


def _found(probes: Sequence[str], text: str) -> bool:
    return any(probe and probe in text for probe in probes)


def _compactions(events: Sequence[Mapping[str, Any]], total: int) -> dict[str, list[int]]:
    """The compactions a turn's events show: strategy -> [count, tokens saved]."""
    found: dict[str, list[int]] = {}
    for event in events:
        if event.get("type") != "compaction":
            continue
        strategy = event.get("strategy") or event.get("source") or "reported"
        before, after = event.get("tokens_before"), event.get("tokens_after", total)
        saved = before - after if isinstance(before, int) and isinstance(after, int) else 0
        entry = found.setdefault(str(strategy)[:64], [0, 0])
        entry[0] += 1
        entry[1] += max(0, saved)
    return found


def turn_day(turn: Turn) -> datetime.date:
    """The day (UTC) a turn counts in: when the call happened by its source's clock where it
    said (``occurred_at``: an imported transcript's turns count on the days they were made),
    else when it was recorded."""
    moment = turn.occurred_at or turn.created_at or timezone.now()
    return moment.astimezone(datetime.UTC).date()


@lru_cache(maxsize=1)
def _prices() -> dict[str, ModelPrice]:
    """The price table, read once a process (settings do not change while it runs)."""
    return model_prices()


_DAY_ADDED = (
    "turns",
    "tokens",
    "cost",
    *(f"region_{name}" for name in USED_REGIONS),
    "reported",
    "counted_reported",
    "turns_with_usage",
    "over_window_turns",
)


def _day_statement(session: Session, turn: Turn) -> Statement:
    """The upsert that adds ``turn`` to its session's row of its day."""
    day = turn_day(turn)
    total = turn.total_tokens
    price = price_for(session.model, _prices())
    reported = turn.reported_input_tokens
    reserve = turn.max_output_tokens or session.output_reserve
    fill = total / max(1, turn.context_window - reserve)
    added = [
        1,
        total,
        total * price[1].input / 1e6 if price is not None else 0.0,
        *(int(turn.regions.get(name, 0)) for name in USED_REGIONS),
        reported or 0,
        turn.counted_tokens if reported is not None else 0,
        int(reported is not None),
        int(fill >= 1.0),
    ]
    quote = connection.ops.quote_name
    table = quote(AttributionDay._meta.db_table)
    names = ["project_id", "session_id", "day", *_DAY_ADDED, "peak_fill", "compactions"]
    update = ", ".join(
        [
            *(f"{quote(c)} = {table}.{quote(c)} + excluded.{quote(c)}" for c in _DAY_ADDED),
            f"peak_fill = {_greatest()}({table}.peak_fill, excluded.peak_fill)",
        ]
    )
    return (
        Fixed(
            f"INSERT INTO {table} ({', '.join(quote(n) for n in names)})"
            f" VALUES ({', '.join(['%s'] * (len(names) - 1))}, '{{}}')"
            f" ON CONFLICT (session_id, {quote('day')}) DO UPDATE SET {update}"
        ),
        [session.project_id, session.pk, day, *added, fill],
    )


def _compactions_add(session: Session, turn: Turn) -> None:
    """Add the compactions ``turn`` shows to its day's row (rare: a statement of its own)."""
    found = _compactions(turn.events, turn.total_tokens)
    if not found:
        return
    row = AttributionDay.objects.select_for_update().get(session=session, day=turn_day(turn))
    compactions = {k: list(v) for k, v in row.compactions.items()}
    for strategy, (count, saved) in found.items():
        entry = compactions.setdefault(strategy, [0, 0])
        entry[0] += count
        entry[1] += saved
    row.compactions = compactions
    row.save(update_fields=["compactions"])


def _session_clear(session: Session) -> None:
    for model in (AttributionItem, AttributionLabel, AttributionEntry, ToolUse, AttributionDay):
        model.objects.filter(session=session).delete()


@dataclass
class PendingTurn:
    """A turn stored without its attribution, as ingest knew it (the arguments of
    :func:`attribution_turn_writes`, and the counters of its counting scope): what
    :func:`attribution_catch_up` needs to attribute it without reading anything back."""

    session: Session
    turn: Turn
    messages: Sequence[LibMessage]
    ids: Sequence[int]
    previous_ids: Sequence[int]
    system: MessageRow | None
    toolset: ToolSet | None
    regions: Sequence[Mapping[str, int]] | None
    mask: bool
    counters: dict[str, TokenCounter] | None = None

    def writes(self) -> TurnWrites:
        return attribution_turn_writes(
            session=self.session,
            turn=self.turn,
            messages=self.messages,
            ids=self.ids,
            previous_ids=self.previous_ids,
            system=self.system,
            toolset=self.toolset,
            regions=self.regions,
            mask=self.mask,
        )


def attribution_catch_up(*, session_id: int, pending: PendingTurn | None = None) -> int:
    """Add to session ``session_id``'s rollups its turns they do not hold yet
    (``Session.attributed_turns`` on), in order, in one transaction with the session locked;
    returns how many. ``pending``: one of them as ingest knew it, attributed without reading it
    back when it still is the stored turn of its index (the walk of the others reads them,
    :func:`_session_walk`). Whoever reads the rollups calls this first: a turn posted over
    HTTP is attributed after its answer is sent, and a process may stop before it does."""
    kept = pending.counters if pending is not None else None
    own = transaction.atomic()
    with counting_scope(kept), own:
        locked = _attribution_locked(session_id, pending.turn if pending is not None else None)
        if locked is None:
            return 0  # deleted meanwhile
        start, count, stored = locked
        if start >= count:
            return 0
        session: Session | None = None
        done = 0
        previous: list[int] | None = None
        mark = _mark_statement(session_id, count)
        at = pending.turn.index if pending is not None else -1
        if pending is not None and start <= at < count and stored:
            if start < at:
                session = _session_read(session_id)
                walked, previous = _session_walk(session, start=start, stop=at)
                done += walked
            writes = pending.writes()
            last = at + 1 == count  # nearly always: the mark, and the commit, go with them
            if last:
                writes.statements.append(mark)
            writes.finish(
                _execute(
                    writes.statements, returning=writes.returning, commit=own if last else None
                )
            )
            done += 1
            start, previous = at + 1, list(pending.ids)
            pending.session.attributed_turns = max(pending.session.attributed_turns, at + 1)
            if start == count:
                return done
        if start < count:
            session = session or _session_read(session_id)
            done += _session_walk(session, start=start, stop=count, previous=previous)[0]
        _execute([mark], returning=False)
        return done


def attribution_behind(*, session_id: int) -> int:
    """For a reader of session ``session_id``'s rollups: :func:`attribution_catch_up`, then how
    many of its turns they still lack (0 but when catching up failed: the failure is logged and
    the rollups are read as they are, never the reader's error)."""
    try:
        attribution_catch_up(session_id=session_id)
        return 0
    except Exception:
        logger.exception("attribution: session %s could not be caught up", session_id)
    left = (
        Session.objects.filter(pk=session_id)
        .values_list(F("turn_count") - F("attributed_turns"), flat=True)
        .first()
    )
    return max(0, left or 0)


#: How long a reader of a project's rollups spends catching its sessions up before it reads them
#: as they are: the sessions left are counted as lacking turns, and the next read goes on. (A
#: session is behind only when the work after an answer did not run or failed: a process stopped
#: first, a turn nobody can attribute.)
CATCH_UP_SECONDS = 2.0


def attribution_behind_project(*, project: Project, seconds: float = CATCH_UP_SECONDS) -> int:
    """:func:`attribution_behind` for each of ``project``'s sessions that needs it, oldest first,
    for at most ``seconds``; the turns the project's rollups still lack."""
    deadline = time.monotonic() + seconds
    behind = list(
        Session.objects.filter(project=project, attributed_turns__lt=F("turn_count"))
        .annotate(lacking=F("turn_count") - F("attributed_turns"))
        .order_by("pk")
        .values_list("pk", "lacking")
    )
    left = 0
    for pk, lacking in behind:
        if time.monotonic() < deadline:
            left += attribution_behind(session_id=pk)
        else:
            left += lacking
    return left


def _attribution_locked(session_id: int, turn: Turn | None) -> tuple[int, int, bool] | None:
    """Lock session ``session_id`` (on SQLite the transaction holds the database's write lock
    already) and read its ``attributed_turns``, ``turn_count`` and whether ``turn`` (as ingest
    made it) is the stored turn of its index: not a turn whose transaction rolled back, another
    stored in its place (SQLite may give it the same id). None when the session is gone."""
    quote = connection.ops.quote_name
    session, table = quote(Session._meta.db_table), quote(Turn._meta.db_table)
    lock = " FOR UPDATE" if connection.features.has_select_for_update else ""
    sql = (
        f"SELECT s.attributed_turns, s.turn_count, EXISTS (SELECT 1 FROM {table} t"
        f" WHERE t.session_id = s.id AND t.{quote('index')} = %s AND t.id = %s"
        f" AND t.created_at = %s) FROM {session} s WHERE s.id = %s{lock}"
    )
    known = (
        [turn.index, turn.pk, connection.ops.adapt_datetimefield_value(turn.created_at)]
        if turn is not None
        else [-1, 0, None]
    )
    with connection.cursor() as cursor:
        if _batches_statements():
            # Rollups are made again from the turns when lost: their commit need not wait for
            # the disk (a crash loses the rollups and their mark together).
            statements: list[Statement] = [
                (_ASYNCHRONOUS_COMMIT, []),
                (Fixed(sql), [*known, session_id]),
            ]
            _execute_at_once(cursor, statements)
            cursor.nextset()
        else:
            cursor.execute(sql, [*known, session_id])
        row = cursor.fetchone()
    return (int(row[0]), int(row[1]), bool(row[2])) if row is not None else None


def _mark_statement(session_id: int, attributed: int) -> Statement:
    """The update that records the session's first ``attributed`` turns as attributed."""
    table = connection.ops.quote_name(Session._meta.db_table)
    return (
        Fixed(f"UPDATE {table} SET attributed_turns = %s WHERE id = %s"),
        [attributed, session_id],
    )


def _session_read(session_id: int) -> Session:
    return Session.objects.select_related("project").get(pk=session_id)


def attribution_rebuild(
    *, project: Project | None = None, session: Session | None = None
) -> dict[str, int]:
    """Make the rollups of ``project``'s sessions (every project's without one, or one
    ``session``) again from their stored turns, as ingest made them turn by turn; idempotent.
    Each session is rebuilt in a transaction of its own, its row locked (a turn posted
    meanwhile waits). Returns the sessions and turns walked."""
    sessions = Session.objects.order_by("pk")
    if project is not None:
        sessions = sessions.filter(project=project)
    if session is not None:
        sessions = sessions.filter(pk=session.pk)
    walked = {"sessions": 0, "turns": 0}
    for pk in list(sessions.values_list("pk", flat=True)):
        # One counting scope a session: its turns share their message objects (the walk's
        # cache), so each message is counted once over the walk, not once a turn that adds it.
        with counting_scope(), transaction.atomic():
            one = Session.objects.select_for_update().select_related("project").get(pk=pk)
            _session_clear(one)
            _STATES.pop(pk, None)
            turns = _session_walk(one, start=0, stop=one.turn_count)[0]
            _execute([_mark_statement(pk, turns)], returning=False)
            walked["turns"] += turns
        walked["sessions"] += 1
    return walked


def _session_walk(
    session: Session, *, start: int, stop: int, previous: list[int] | None = None
) -> tuple[int, list[int]]:
    """Add the stored turns ``start`` to ``stop`` (excluded) of ``session`` to its rollups, in
    order (those before ``start`` are in them, ``previous``: turn ``start - 1``'s message ids
    when known); the turns walked and the last one's message ids."""
    if previous is None:
        previous = turn_message_id_lists(session=session, index=start)[0] if start else []
    cache: dict[int, LibMessage] = {}
    walked = 0
    turns = Turn.objects.filter(session=session, index__gte=start, index__lt=stop)
    mask = session.project.mask_secrets
    for turn in turns.select_related("system", "toolset").order_by("index").iterator(200):
        ids = [*previous[: turn.shared], *turn.tail] if not turn.keyframe else list(turn.tail)
        rows_needed = {i for i in ids if i not in cache}
        if rows_needed:
            for pk, data in MessageRow.objects.filter(pk__in=rows_needed).values_list("pk", "data"):
                cache[pk] = message_from_dict(data)
        turn.session = session
        writes = attribution_turn_writes(
            session=session,
            turn=turn,
            messages=[cache[i] for i in ids],
            ids=ids,
            previous_ids=previous,
            system=turn.system,
            toolset=turn.toolset,
            mask=mask,
        )
        writes.finish(_execute(writes.statements, returning=writes.returning))
        previous = ids
        walked += 1
    return walked, previous


__all__ = [
    "PendingTurn",
    "TurnWrites",
    "attribution_behind",
    "attribution_behind_project",
    "attribution_catch_up",
    "attribution_rebuild",
    "attribution_turn_writes",
    "item_key",
    "item_labels",
    "turn_day",
]
