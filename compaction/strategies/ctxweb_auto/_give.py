"""How ``ctxweb-auto`` gives back what a coarse step took beyond need: once the steps and the
facts they carried leave the total under :data:`~._search.LAND` of the target, what they shrank
is widened again, the most recent first, within the tokens the target leaves:

- a shrunk tool output: whole when the original fits, else as much of its head and tail as fits
  around the pointer to its full text (the facts line it carries stays);
- a digest of a turn (or of a turn's earlier steps): longer quotes of the request and the last
  reply (its facts and pointer stay).

The other way, when the facts a plan took out do not fit what the target leaves: after the
summary's prose, the digests' quotes of the last reply give way to them, then their tools lines
(:func:`unquote`), then the tool outputs the plan left verbatim where its steps may reach, the
oldest first, each compacted around a pointer to its full text with as much of its head and
tail kept as leaves the room the facts need (:func:`narrow`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace

from compaction.messages.model import Message, TextPart, ToolResultPart
from compaction.strategies.base import Draft, make_artifact
from compaction.strategies.ctxweb_auto._steps import STEPS_HEADER, Sources
from compaction.strategies.ctxweb_auto._texts import (
    DIGEST_HEADER,
    DIGEST_QUOTE,
    POINTER,
    clip,
    describe,
    pointer,
    turn_quotes,
)
from compaction.strategies.outputs import with_result_text

__all__ = ["give_back", "narrow", "unquote", "verbatim_outputs"]

#: The share of the widened text kept before the pointer (the rest after it).
HEAD_SHARE = 0.6
#: Fewer tokens of room than this are not worth a widening.
LEAST_ROOM = 8
#: The edits a widened output came from.
_SHRINKS = ("externalize", "clear", "compact-inline")


def give_back(draft: Draft, total: int, target: int, sources: Sources) -> int:
    """Widen the shrunk tool outputs and the turn digests of ``draft``, the most recent first,
    while the total stays within ``target``. Returns the new total."""
    for position in range(len(draft.messages) - 1, -1, -1):
        if target - total < LEAST_ROOM:
            break
        origin = draft.origin[position]
        if origin is None:
            entry = sources.get(id(draft.messages[position]))
            if entry is not None and entry[0] is draft.messages[position]:
                total = _widen_digest(draft, position, entry[1], total, target, sources)
            continue
        original = draft.context.messages[origin]
        message = draft.messages[position]
        if message is original or len(message.parts) != len(original.parts):
            continue
        for k in range(len(message.parts) - 1, -1, -1):
            now, was = draft.messages[position].parts[k], original.parts[k]
            if not isinstance(now, ToolResultPart) or not isinstance(was, ToolResultPart):
                continue
            if now == was or POINTER.search(now.text) is None:
                continue
            total = _widen(draft, position, k, was, total, target)
    return total


def _widen(
    draft: Draft, position: int, k: int, was: ToolResultPart, total: int, target: int
) -> int:
    """The output at ``messages[position].parts[k]`` widened towards what it was."""
    message = draft.messages[position]
    before = draft.tokens(message)
    room = target - total
    parts = list(message.parts)
    parts[k] = was
    whole = replace(message, parts=tuple(parts))
    if draft.tokens(whole) - before <= room:
        draft.messages[position] = whole
        _restored(draft, position, k)
        return total + draft.tokens(whole) - before
    current = message.parts[k].text  # type: ignore[union-attr]
    found = POINTER.search(current)
    assert found is not None
    facts = current[current.rfind("\nfacts: ") :] if "\nfacts: " in current else ""
    text = was.text

    def widened(kept: int) -> Message:
        head = int(kept * HEAD_SHARE)
        tail = kept - head
        note = f"[... {len(text) - kept} chars omitted; full text: {found.group(0)}]"
        return with_result_text(
            message, k, f"{text[:head]}\n{note}\n{text[len(text) - tail :]}{facts}"
        )

    # the most characters whose widened output fits the room, searched up to a little past
    # what the room holds at the text's own characters per token
    per_token = len(text) / max(draft.text_tokens(text), 1)
    hi = min(len(text) - 1, int(room * per_token * 1.5) + 64)
    kept, best = _largest(draft, 0, hi, widened, before + room)
    if best is None or draft.tokens(best) <= before:
        return total
    draft.messages[position] = best
    after = draft.tokens(best)
    _reported(draft, position, k, after - before, kept)
    return total + after - before


def _largest(
    draft: Draft, lo: int, hi: int, build: Callable[[int], Message], most: int
) -> tuple[int, Message | None]:
    """The largest ``n`` in ``(lo, hi]`` whose ``build(n)`` takes at most ``most`` tokens, and
    that message (``lo`` and None when none does), by bisection: a message grows with ``n``."""
    best = None
    while lo < hi:
        mid = (lo + hi + 1) // 2
        trial = build(mid)
        if draft.tokens(trial) <= most:
            lo, best = mid, trial
        else:
            hi = mid - 1
    return lo, best


def _edits_of(draft: Draft, position: int, k: int) -> list[int]:
    origin = draft.origin[position]
    return [
        i
        for i, edit in enumerate(draft.edits)
        if edit.message_index == origin and edit.part_index == k and edit.kind in _SHRINKS
    ]


def _restored(draft: Draft, position: int, k: int) -> None:
    """The output is whole again: the edits that shrank it go, and so do their artifacts
    unless another edit or a text of the draft still points at them."""
    doomed = set(_edits_of(draft, position, k))
    ids = {draft.edits[i].artifact_id for i in doomed}
    draft.edits = [edit for i, edit in enumerate(draft.edits) if i not in doomed]
    still = {edit.artifact_id for edit in draft.edits}
    for artifact_id in ids - still:
        if artifact_id is None:
            continue
        short = pointer(artifact_id)[:-1]  # a pointer to it, whatever length of id it holds
        if not any(short in m.text or _in_results(m, short) for m in draft.messages):
            draft.artifacts.pop(artifact_id, None)


def _in_results(message: Message, short: str) -> bool:
    return any(short in part.text for part in message.tool_results)


def _reported(draft: Draft, position: int, k: int, cost: int, kept: int) -> None:
    """The last edit that shrank the output now reports its head and tail kept."""
    found = _edits_of(draft, position, k)
    if not found:
        return
    i = found[-1]
    edit = draft.edits[i]
    draft.edits[i] = replace(
        edit,
        kind="compact-inline",
        tokens_after=edit.tokens_after + cost,
        detail=f"{edit.detail}; given back: {kept} chars of its head and tail kept",
    )


def _widen_digest(
    draft: Draft,
    position: int,
    turn: Sequence[Message],
    total: int,
    target: int,
    sources: Sources,
) -> int:
    """The digest at ``position`` with longer quotes of the ``turn`` (or steps) it replaced,
    as long as fits the room."""
    message = draft.messages[position]
    lines = message.text.split("\n")
    quotes = _quotes(lines, turn)
    longest = max((len(text) for _, _, text, _ in quotes), default=0)
    if longest <= DIGEST_QUOTE:
        return total
    before = draft.tokens(message)
    room = target - total

    def widened(quote: int) -> Message:
        new = list(lines)
        for at, label, text, tail in reversed(quotes):
            line = f"{label}{clip(text, quote, tail=tail)}"
            if at < len(lines) and lines[at].startswith(label):
                new[at] = line
            else:  # a brief digest, written without this quote
                new.insert(at, line)
        return Message("user", (TextPart("\n".join(new)),))

    quote, best = _largest(draft, DIGEST_QUOTE, longest, widened, before + room)
    if best is None or draft.tokens(best) <= before:
        return total
    draft.messages[position] = best
    sources[id(best)] = (best, sources.pop(id(message))[1])
    cost = draft.tokens(best) - before
    for i in range(len(draft.edits) - 1, -1, -1):
        edit = draft.edits[i]
        if edit.kind == "insert-summary" and edit.message_index == position:
            draft.edits[i] = replace(
                edit,
                tokens_after=edit.tokens_after + cost,
                detail=f"{edit.detail}; given back: quotes of {quote} characters",
            )
            break
    return total + cost


def _quotes(lines: list[str], turn: Sequence[Message]) -> list[tuple[int, str, str, bool]]:
    """The quote lines of a digest: (line, label, the whole text it quotes, keep its end)."""
    found = []
    request, reply = (" ".join(text.split()) for text in turn_quotes(turn))
    wanted: tuple[tuple[str, str, bool], ...]
    if lines[0] == DIGEST_HEADER:
        wanted = (("user: ", request, False), ("reply: ", reply, True))
    elif lines[0].startswith(STEPS_HEADER):
        wanted = (("assistant: ", reply, True),)
    else:
        return []
    # where a quote missing from a brief digest goes: after the tools and errors lines
    after = next(
        (i for i in range(1, len(lines)) if not lines[i].startswith(("tools: ", "errors: "))),
        len(lines),
    )
    for label, text, tail in wanted:
        at = next((i for i, line in enumerate(lines) if line.startswith(label)), after)
        if text:
            found.append((at, label, text, tail))
    return found


#: What :func:`unquote` takes out of a digest, in this order, each with what its edit says: the
#: quote of its last reply (a turn's, or the assistant's last words over a turn's steps), then the
#: line of the tools it called (their names that are facts come back in its fact lines, without
#: the counts). The user's request stays: it says what the turn was for; so do the error lines.
GIVE_WAY = (
    (("reply: ", "assistant: "), "its last reply's quote gave way to facts"),
    (("tools: ",), "its tools line gave way to facts"),
)


def unquote(draft: Draft, total: int, need: int, room: int, sources: Sources) -> int:
    """Take lines out of this plan's digests for the facts of what the plan took out (a line's
    own facts join them): the first kind of :data:`GIVE_WAY` that any digest still holds, the
    oldest digest first, until ``need`` tokens are freed. Facts before prose, as the summary's
    prose gives way first. Nothing changes when the ``room`` the target leaves (negative: the
    total is above it) would stay empty even so. Returns the new total."""
    if need <= 0:
        return total
    for labels, said in GIVE_WAY:
        quiet = _without_lines(draft, labels, need, sources)
        if quiet:
            detail = said
            break
    else:
        return total
    if room + sum(saved for _, _, saved in quiet) <= 0:
        return total
    for position, new, saved in quiet:
        old = draft.messages[position]
        draft.messages[position] = new
        sources[id(new)] = (new, sources.pop(id(old))[1])
        for i in range(len(draft.edits) - 1, -1, -1):
            edit = draft.edits[i]
            if edit.kind == "insert-summary" and edit.message_index == position:
                draft.edits[i] = replace(
                    edit,
                    tokens_after=edit.tokens_after - saved,
                    detail=f"{edit.detail}; {detail}",
                )
                break
        total -= saved
    return total


def _without_lines(
    draft: Draft, labels: tuple[str, ...], need: int, sources: Sources
) -> list[tuple[int, Message, int]]:
    """This plan's digests without their lines starting with ``labels``, the oldest first until
    ``need`` tokens are freed: (position, the new digest, tokens saved)."""
    quiet: list[tuple[int, Message, int]] = []
    freed = 0
    for position, message in enumerate(draft.messages):
        if freed >= need:
            break
        entry = sources.get(id(message))
        if draft.origin[position] is not None or entry is None or entry[0] is not message:
            continue
        lines = message.text.split("\n")
        if not lines[0].startswith((DIGEST_HEADER, STEPS_HEADER)):
            continue
        kept = [line for line in lines[1:] if not line.startswith(labels)]
        if len(kept) == len(lines) - 1:
            continue
        new = Message("user", (TextPart("\n".join([lines[0], *kept])),))
        saved = draft.tokens(message) - draft.tokens(new)
        if saved > 0:
            quiet.append((position, new, saved))
            freed += saved
    return quiet


def narrow(draft: Draft, total: int, need: int, lo: int, hi: int, over: int) -> int:
    """Give up verbatim text for facts: the tool outputs of ``messages[lo:hi]`` still as they
    came in and above ``over`` bytes, the oldest first, each compacted around a pointer to its
    full text, as much of its head and tail kept as frees what is left of ``need`` tokens (the
    facts the omitted middle held join the lost ones: the caller carries them). Returns the new
    total."""
    for position, k, text in verbatim_outputs(draft, lo, hi, over):
        if need <= 0:
            break
        saved = _narrow(draft, position, k, text, need)
        total -= saved
        need -= saved
    return total


def verbatim_outputs(draft: Draft, lo: int, hi: int, over: int) -> Iterator[tuple[int, int, str]]:
    """The tool outputs of ``messages[lo:hi]`` still as they came in and above ``over`` bytes,
    the oldest first: (position, part, text). Read as it goes: a part :func:`narrow` changed
    is no longer one."""
    for position in range(max(lo, 0), min(hi, len(draft.messages))):
        origin = draft.origin[position]
        if origin is None:
            continue
        original = draft.context.messages[origin]
        if len(draft.messages[position].parts) != len(original.parts):
            continue
        for k, was in enumerate(original.parts):
            if not isinstance(was, ToolResultPart) or draft.messages[position].parts[k] != was:
                continue
            text = was.text
            if len(text.encode("utf-8")) > over and POINTER.search(text) is None:
                yield position, k, text


def _narrow(draft: Draft, position: int, k: int, text: str, need: int) -> int:
    """The output at ``messages[position].parts[k]`` (``text``, verbatim) compacted around a
    pointer, keeping the most of its head and tail that frees ``need`` tokens (or none of
    them). Returns the tokens freed."""
    message = draft.messages[position]
    before = draft.tokens(message)
    artifact = make_artifact(
        "tool_result", text, tokens=draft.text_tokens(text), summary=describe(text)
    )

    def narrowed(kept: int) -> Message:
        head = int(kept * HEAD_SHARE)
        tail = kept - head
        note = f"[... {len(text) - kept} chars omitted; full text: {pointer(artifact.id)}]"
        return with_result_text(message, k, f"{text[:head]}\n{note}\n{text[len(text) - tail :]}")

    # searched up to a little past what the tokens left hold at the text's own characters per
    # token (a long output is not tokenized whole at every step)
    per_token = len(text) / max(draft.text_tokens(text), 1)
    hi = min(len(text) - 1, int(max(before - need, 0) * per_token * 1.5) + 64)
    kept, best = _largest(draft, 0, hi, narrowed, before - need)
    if best is None:
        kept, best = 0, narrowed(0)
    after = draft.tokens(best)
    if after >= before:
        return 0
    draft.artifacts.setdefault(artifact.id, artifact)
    part = message.parts[k]
    call = part.tool_call_id if isinstance(part, ToolResultPart) else "?"
    draft.replace_message(
        position,
        best,
        "compact-inline",
        f"compact: tool output {call}; gave way to facts: {kept} chars of its head and tail kept",
        part_index=k,
        artifact_id=artifact.id,
    )
    return before - after
