"""How ``ctxweb-auto`` keeps the facts of what it took out visible: after the steps, every fact
of the input that the context no longer shows is written, once, into the placeholder, digest or
summary that replaced the text holding it (the most recent one), within the tokens the target
leaves.

A shrunk tool output gets a ``facts:`` line after its pointer; a shrunk tool-call argument gets
it inside the string that holds the pointer (the arguments stay valid JSON); a digest or summary
gets its facts grouped by the file each tool call worked on, before its pointer to the full text.
When the room runs out, the fact lists' commas give way first (written compact, spaces only),
then the summary's prose (its goal and next steps last), the digests' quotes of a turn's last
reply and their tools lines, then (where the plan allows it) the verbatim tool outputs its
steps may reach, compacted around a pointer (:func:`~._give.narrow`), then the long URLs, then
the facts that cost the most tokens (an error name is kept before any other): the room keeps as
many facts as it can buy. A long URL the
room cannot buy whole is written short rather than not at all (its host and path, or its host and
last segment: :func:`~._facts.short_url`), when that costs no fact written whole.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from compaction.messages.model import Message, Part, TextPart, ToolCallPart, ToolResultPart
from compaction.strategies.base import Draft
from compaction.strategies.ctxweb_auto._facts import (
    KINDS,
    Fact,
    fact_line,
    grouped_lines,
    message_facts,
    part_facts,
    short_url,
)
from compaction.strategies.ctxweb_auto._give import unquote
from compaction.strategies.ctxweb_auto._steps import Sources
from compaction.strategies.ctxweb_auto._summaries import make_room
from compaction.strategies.ctxweb_auto._texts import FULL_TEXT, shrink_arguments
from compaction.strategies.outputs import with_result_text

__all__ = ["GiveWay", "carry_facts", "input_facts", "lost_facts"]


@dataclass
class _Carrier:
    """One place facts can be written: a part of an edited message, or an inserted message
    (``part`` None) with the messages it replaced."""

    position: int
    part: int | None
    sources: Sequence[Message]
    facts: set[Fact]


def _visible(draft: Draft, messages: Sequence[Message]) -> set[Fact]:
    found: set[Fact] = set()
    for part in draft.system:
        found |= part_facts(part)
    for message in messages:
        found |= message_facts(message)
    return found


def input_facts(draft: Draft) -> set[Fact]:
    """Every fact of the input context (its system prompt and messages)."""
    wanted: set[Fact] = set()
    for part in draft.context.system:
        wanted |= part_facts(part)
    for message in draft.context.messages:
        wanted |= message_facts(message)
    return wanted


def lost_facts(draft: Draft) -> set[Fact]:
    """Facts of the input context that the draft no longer shows."""
    return input_facts(draft) - _visible(draft, draft.messages)


def _carriers(draft: Draft, inserted: Sources) -> list[_Carrier]:
    carriers = []
    for position, (message, origin) in enumerate(zip(draft.messages, draft.origin, strict=True)):
        if origin is None:
            entry = inserted.get(id(message))
            if entry is not None and entry[0] is message:
                carriers.append(_Carrier(position, None, entry[1], set()))
            continue
        original = draft.context.messages[origin]
        if message is original or len(message.parts) != len(original.parts):
            continue
        for k, (now, was) in enumerate(zip(message.parts, original.parts, strict=True)):
            if now != was and isinstance(now, ToolResultPart | ToolCallPart):
                carriers.append(_Carrier(position, k, (Message(original.role, (was,)),), set()))
    return carriers


def _assign(carriers: list[_Carrier], lost: set[Fact]) -> None:
    """Each lost fact to the most recent carrier whose sources held it."""
    left = set(lost)
    for carrier in reversed(carriers):
        if not left:
            break
        held: set[Fact] = set()
        for source in carrier.sources:
            held |= message_facts(source)
        carrier.facts = held & left
        left -= carrier.facts


def _with_line(message: Message, part_index: int, line: str) -> Message | None:
    part: Part = message.parts[part_index]
    if isinstance(part, ToolResultPart):
        return with_result_text(message, part_index, f"{part.text}\n{line}")
    if isinstance(part, ToolCallPart):
        arguments = _arguments_with(part.arguments, line)
        if arguments is None:
            return None
        parts = list(message.parts)
        parts[part_index] = replace(part, arguments=arguments)
        return replace(message, parts=tuple(parts))
    return None


def _arguments_with(arguments: str, line: str) -> str | None:
    """``arguments`` with ``line`` appended to the first string value holding a pointer."""
    done = False

    def append(value: str) -> str | None:
        nonlocal done
        if done or "[EXTERNALIZED:" not in value:
            return None
        done = True
        return f"{value}\n{line}"

    return shrink_arguments(arguments, append)


def _with_block(message: Message, lines: list[str]) -> Message:
    """An inserted digest or summary with ``lines`` before its pointer to the full text."""
    text = message.text
    block = "\n".join(lines)
    marker = f"\n\n{FULL_TEXT}"
    if marker in text:
        head, _, tail = text.partition(marker)
        new = f"{head}\n{block}{marker}{tail}"
    else:
        head, newline, last = text.rpartition("\n")
        new = f"{head}\n{block}\n{last}" if newline else f"{text}\n{block}"
    return replace(message, parts=(TextPart(new),))


def _rank(fact: Fact) -> tuple[int, str]:
    # what a model needs most when room runs short: errors, files, urls, then names
    order = ("errors", "files", "urls", "names")
    return (order.index(fact[0]) if fact[0] in order else len(KINDS), fact[1])


def _render(
    carrier: _Carrier, message: Message, facts: list[Fact], compact: bool = False
) -> Message | None:
    if carrier.part is None:
        lines = grouped_lines(carrier.sources, facts, compact=compact)
        return _with_block(message, lines) if lines else None
    line = fact_line(facts, compact=compact)
    return _with_line(message, carrier.part, line) if line else None


def _cost(draft: Draft, carriers: list[_Carrier], compact: bool = False) -> int:
    """The tokens writing every assigned fact would add."""
    cost = 0
    for carrier in carriers:
        if carrier.facts:
            message = draft.messages[carrier.position]
            new = _render(carrier, message, sorted(carrier.facts, key=_rank), compact)
            if new is not None:
                cost += draft.tokens(new) - draft.tokens(message)
    return cost


#: What gives up verbatim text for facts: (draft, total, tokens needed) -> the new total.
GiveWay = Callable[[Draft, int, int], int]


def carry_facts(
    draft: Draft, total: int, room: int, inserted: Sources, give_way: GiveWay | None = None
) -> tuple[int, int, int]:
    """Write the facts the draft lost into the carriers that replaced them (each fact into the
    most recent one that held it), spending at most ``room`` tokens; when they do not fit even
    once the summary's prose and the digests' quotes gave way, ``give_way`` (if given) frees
    tokens from verbatim text. Returns (the new total, facts still lost, facts of the
    input)."""
    wanted = input_facts(draft)
    lost = wanted - _visible(draft, draft.messages)
    if not lost:
        return total, 0, len(wanted)
    carriers = _carriers(draft, inserted)
    _assign(carriers, lost)
    # facts before prose: the summary's prose gives way to the fact lines that do not fit (the
    # lines' commas first: written compact), then the digests' quotes of a last reply, then
    # their tools lines, then verbatim text where given (a cut line or a narrowed output may
    # hold facts of its own: they join the lost ones, hence a few rounds)
    for _ in range(6):
        need = _cost(draft, carriers, compact=True) - room
        cut = make_room(draft, total, need, room, inserted)
        if cut >= total:
            cut = unquote(draft, total, need, room, inserted)
        if cut >= total and give_way is not None and need > 0:
            cut = give_way(draft, total, need)
        if cut >= total:
            break
        room += total - cut
        total = cut
        lost = wanted - _visible(draft, draft.messages)
        carriers = _carriers(draft, inserted)
        _assign(carriers, lost)
    chosen = _choose(draft, carriers, room)
    carried = 0
    for carrier, new, count, short in chosen:
        message = draft.messages[carrier.position]
        if carrier.part is not None:
            # each carrier was rendered on the message as it stood; another part of the same
            # message may have taken its line since: only this carrier's own part changes
            parts = list(message.parts)
            parts[carrier.part] = new.parts[carrier.part]
            new = replace(message, parts=tuple(parts))
        cost = draft.tokens(new) - draft.tokens(message)
        draft.messages[carrier.position] = new
        if carrier.part is None and id(message) in inserted:
            inserted[id(new)] = (new, inserted.pop(id(message))[1])
        _record(draft, carrier, cost, count, short)
        total += cost
        # a URL written short is still lost whole: it counts among the lost facts
        carried += count
    return total, len(lost) - carried, len(wanted)


#: How many URLs in a row may fail to fit written short before the rest are not tried.
SHORT_MISSES = 4

#: A carrier's new message, how many facts it carries whole, and how many URLs it writes short.
_Chosen = tuple[_Carrier, Message, int, int]


def _choose(draft: Draft, carriers: list[_Carrier], room: int) -> list[_Chosen]:
    """Each carrier's new message and how many facts it carries, within ``room`` tokens.

    When every assigned fact fits, every one is written, their lists separated by commas. When
    not, the lists are written compact (spaces only, about a token less a fact: the commas give
    way first), and the most facts the room buys: errors first, then the cheapest facts (fewest
    tokens) of all the carriers, so one long path does not cost ten names, and the long URLs
    (those :func:`~._facts.short_url` can shorten) last; a carrier's facts are still written in
    kind order. The longest prefix of that order whose lines fit is found by bisection, each
    carrier's line rendered once per number of its facts. Then the long URLs left out are
    written short (:func:`~._facts.short_url`), the shortest first, in the room left: no fact
    written whole gives way for them."""
    live = [c for c in carriers if c.facts]
    if not live or room <= 0:
        return []
    whole = _chosen(draft, live, room, compact=False, whole_only=True)
    return whole if whole is not None else _chosen(draft, live, room, compact=True) or []


def _group(fact: Fact) -> int:
    """Which facts the room buys first: error names, then paths, names and short URLs (the
    cheapest first), then the long URLs, which can still be written short when left out."""
    if fact[0] == "errors":
        return 0
    if fact[0] == "urls" and short_url(fact[1]) is not None:
        return 2
    return 1


def _chosen(
    draft: Draft,
    live: list[_Carrier],
    room: int,
    *,
    compact: bool,
    whole_only: bool = False,
) -> list[_Chosen] | None:
    """:func:`_choose` with one way of writing the lists; None, with ``whole_only``, when not
    every fact fits."""
    befores = {id(c): draft.tokens(draft.messages[c.position]) for c in live}
    renders: dict[tuple[int, int], tuple[Message | None, int]] = {}
    own: dict[int, list[Fact]] = {}
    order: list[tuple[tuple[int, int, int, str], _Carrier, Fact]] = []
    for recency, carrier in enumerate(reversed(live)):
        for fact in carrier.facts:
            key = (_group(fact), draft.text_tokens(fact[1]), recency, fact[1])
            order.append((key, carrier, fact))
    order.sort(key=lambda item: item[0])
    for _, carrier, fact in order:
        own.setdefault(id(carrier), []).append(fact)

    def lines(carrier: _Carrier, facts: list[Fact]) -> tuple[Message | None, int]:
        new = _render(carrier, draft.messages[carrier.position], sorted(facts, key=_rank), compact)
        return new, 0 if new is None else draft.tokens(new) - befores[id(carrier)]

    def render(carrier: _Carrier, count: int) -> tuple[Message | None, int]:
        key = (id(carrier), count)
        if key not in renders:
            renders[key] = lines(carrier, own[id(carrier)][:count])
        return renders[key]

    def prefix(k: int) -> dict[int, int]:
        counts: dict[int, int] = {}
        for _, carrier, _fact in order[:k]:
            counts[id(carrier)] = counts.get(id(carrier), 0) + 1
        return counts

    def cost(k: int) -> int:
        counts = prefix(k)
        return sum(render(c, counts[id(c)])[1] for c in live if id(c) in counts)

    k = len(order)
    if cost(k) > room:
        if whole_only:
            return None
        lo, hi = 0, k
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if cost(mid) <= room:
                lo = mid
            else:
                hi = mid - 1
        k = lo
    counts = prefix(k)
    written = {id(c): own[id(c)][: counts.get(id(c), 0)] for c in live}
    news = {id(c): render(c, counts[id(c)]) for c in live if counts.get(id(c))}
    spent = sum(cost for _, cost in news.values())
    # the long URLs left out, written short in the room left (their host and path, or host and
    # last segment, still tell the model where to look), the shortest first; a URL written
    # short is not carried: its whole text is still lost
    shorts: dict[int, int] = {}
    candidates = []
    for _, carrier, fact in order[k:]:
        short = short_url(fact[1]) if fact[0] == "urls" else None
        if short is not None:
            candidates.append((draft.text_tokens(short), short, carrier))
    misses = 0
    for tokens, short, carrier in sorted(candidates, key=lambda item: item[:2]):
        # the rest are no shorter: once one's text alone, or a few in a row, do not fit, stop
        # (each try renders its carrier again: a long summary would be tokenized per URL)
        if room - spent < tokens or misses >= SHORT_MISSES:
            break
        trial = [*written[id(carrier)], ("urls", short)]
        new, now = lines(carrier, trial)
        before = news[id(carrier)][1] if id(carrier) in news else 0
        if new is None or spent - before + now > room:
            misses += 1
            continue
        misses = 0
        spent += now - before
        written[id(carrier)], news[id(carrier)] = trial, (new, now)
        shorts[id(carrier)] = shorts.get(id(carrier), 0) + 1
    chosen = []
    for carrier in live:
        new = news[id(carrier)][0] if id(carrier) in news else None
        if new is not None:
            short_count = shorts.get(id(carrier), 0)
            chosen.append((carrier, new, len(written[id(carrier)]) - short_count, short_count))
    return chosen


def _record(draft: Draft, carrier: _Carrier, cost: int, count: int, short: int = 0) -> None:
    """The edit that made or shrank the carrier now reports what the context holds."""
    origin = draft.origin[carrier.position]
    index = origin if origin is not None else carrier.position
    for k in range(len(draft.edits) - 1, -1, -1):
        edit = draft.edits[k]
        inserted = edit.kind == "insert-summary"
        if inserted != (origin is None):
            continue
        if edit.message_index == index and edit.part_index == carrier.part:
            detail = f"{edit.detail}; carries {count} facts"
            if short:
                detail += f" and {short} URLs written short"
            draft.edits[k] = replace(edit, tokens_after=edit.tokens_after + cost, detail=detail)
            return
