"""Steps 4-5 of ``ctxweb-auto`` on the oldest user turns: each turn's digest, then one summary
of the oldest turns (digests included) that points at their full text, and the summary's last
resort, cut to fit the target."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import pairwise

from compaction.messages.model import Message, Part, TextPart, ToolCallPart, ToolResultPart
from compaction.regions import is_summary
from compaction.strategies.base import Artifact, Draft, make_artifact, render_message
from compaction.strategies.ctxweb_auto._steps import Sources, digest_steps
from compaction.strategies.ctxweb_auto._texts import (
    DIGEST_HEADER,
    FULL_TEXT,
    POINTER,
    SUMMARY_HEADER,
    SUMMARY_PROMPT,
    digest_text,
    fit_summary,
    pointer,
)
from compaction.summarizers import FactSummarizer, Summarizer
from compaction.turns import find_legal_start, is_user_turn_start, orphans

__all__ = [
    "Digested",
    "Sources",
    "bare_summary",
    "digest",
    "make_room",
    "shorten_summary",
    "summarize",
]

#: A turn is digested only when its digest costs less than this share of its tokens.
DIGEST_GAIN = 0.7


@dataclass(frozen=True)
class Digested:
    """A user turn a digest replaced: the digest (held, so its ``id`` is not reused while the
    plan runs), the turn's messages as they stood, and as they came in."""

    digest: Message
    current: list[Message]
    original: list[Message]


def digest(
    draft: Draft,
    total: int,
    target: int,
    limit: int,
    digested: dict[int, Digested],
    start: int = 0,
    sources: Sources | None = None,
) -> int:
    """Replace the oldest user turns from ``start`` and before ``limit``, one at a time, with
    their digests (recorded in ``digested`` by the digest's ``id``)."""
    bounds = [i for i in range(start, limit) if is_user_turn_start(draft.messages[i])] + [limit]
    shift = 0
    for start, end in pairwise(bounds):
        if total <= target:
            break
        lo, hi = start - shift, end - shift
        turn = draft.messages[lo:hi]
        if is_summary(turn[0]) or not orphans(turn).ok:
            continue
        originals = _originals(draft, lo, hi)
        removed = sum(map(draft.tokens, turn))
        # Judged with a stand-in id first: the turn's full text is built only for a digest
        # that is kept.
        estimate = draft.text_tokens(digest_text(originals, "0" * 64))
        if estimate >= removed * DIGEST_GAIN:
            continue
        request = draft.tokens(turn[0])
        if total - removed + request + estimate <= target and sources is not None:
            # the whole turn's digest would take more than the target needs: the finest cut,
            # its request kept and only its oldest steps digested
            fine = digest_steps(draft, total, target, lo + 1, hi, sources)
            if fine < total:
                return fine
        full = _full_text("turn", originals, draft, f"user turn of {len(originals)} messages")
        message = Message("user", (TextPart(digest_text(originals, full.id)),))
        added = draft.tokens(message)
        draft.artifacts.setdefault(full.id, full)
        draft.drop(range(lo, hi), "summarize-range", "digested by ctxweb-auto")
        draft.insert(lo, message, "ctxweb turn digest")
        digested[id(message)] = Digested(message, turn, originals)
        if sources is not None:
            sources[id(message)] = (message, originals)
        total += added - removed
        shift += hi - lo - 1
    return total


def summarize(
    draft: Draft,
    total: int,
    target: int,
    limit: int,
    summarizer: Summarizer | None,
    digested: dict[int, Digested],
    start: int = 0,
    sources: Sources | None = None,
) -> int:
    """Replace the oldest whole user turns from ``start`` and before ``limit`` with one
    summary, when that makes the context smaller."""
    messages = draft.messages
    first = 0
    while first < len(messages) and messages[first].role in ("system", "developer"):
        first += 1
    if start > first:
        # the summary must open a user turn: the first one at or after ``start``
        first = next((i for i in range(start, limit) if is_user_turn_start(messages[i])), limit)
    previous: str | None = None
    if first < limit and messages[first].text.startswith(SUMMARY_HEADER):
        previous = messages[first].text[len(SUMMARY_HEADER) :]
    starts = [i for i in range(first, limit + 1) if i == limit or is_user_turn_start(messages[i])]
    summarizer = summarizer or FactSummarizer()
    # prefix[i]: tokens of messages[first:first + i], so each candidate cut costs O(1)
    prefix = [0]
    for m in messages[first:limit]:
        prefix.append(prefix[-1] + draft.tokens(m))

    def attempt(need: float) -> tuple[int, str, int]:
        """The first user-turn cut that removes ``need`` tokens (the last one before
        ``limit`` if none does), its summary and the summary's size."""
        removed = 0
        cut = first
        for start in starts:
            if removed >= need and start > first:
                break
            cut = start
            removed = prefix[cut - first]
        cut += find_legal_start(messages[cut:limit]) if cut < limit else 0
        if cut <= first:
            return cut, "", 0
        body = [_without_pointers(m) for m in _expand(messages[first:cut], digested, current=True)]
        summary = summarizer.summarize(body, previous=previous, prompt=SUMMARY_PROMPT)
        # + the trailer that points at the full text (about 25 tokens a pointer)
        return cut, summary, draft.text_tokens(SUMMARY_HEADER + summary) + 8 + 60

    def fits(cut: int, size: int) -> bool:
        return total - prefix[cut - first] + size <= target

    allowance = 0
    for _attempt in range(4):
        cut, summary, size = attempt(total + allowance - target)
        if cut <= first:
            return total
        if size <= allowance or fits(cut, size) or cut >= limit:
            break
        allowance = size
    if not fits(cut, size) and cut < limit:
        cut, summary, size = attempt(math.inf)  # everything before the latest turn
    removed = prefix[cut - first]
    if size >= removed:
        # the summary would cost more than what it replaces (a few digests): its prose cut to
        # what still saves tokens, the goal and next steps kept first, its facts carried later
        frame = size - draft.text_tokens(summary)  # its header and trailer
        summary = fit_summary(summary, removed - 1 - frame, draft.text_tokens)
        size = draft.text_tokens(summary) + frame
        if size >= removed:
            return total
    if not orphans(messages[cut:]).ok:
        draft.warn("ctxweb-auto: the kept messages already had orphaned tool pairs")
    # The artifact holds the messages as they came in, before steps 1-4 shrank or digested
    # them, so one hop reaches every original (a digest from an earlier plan keeps its own
    # pointer to its turn).
    summarized = _expand(_originals(draft, first, cut), digested, current=False)
    earlier = [messages[first]] if previous is not None else []
    full = _full_text(
        "summarized_messages",
        summarized,
        draft,
        f"{len(summarized)} messages summarized by ctxweb-auto",
    )
    draft.artifacts.setdefault(full.id, full)
    pointers = [*POINTER.findall(previous or ""), pointer(full.id)]
    trailer = f"\n\n{FULL_TEXT} {' '.join(dict.fromkeys(pointers))}"
    summary = POINTER.sub("", summary).replace(FULL_TEXT, "").rstrip()
    draft.drop(range(first, cut), "summarize-range", "summarized into the ctxweb summary")
    message = Message("user", (TextPart(SUMMARY_HEADER + summary + trailer),))
    draft.insert(first, message, "ctxweb summary")
    if sources is not None:
        # what the summary replaced, a previous summary included (``_expand`` leaves it out)
        sources[id(message)] = (message, [*summarized, *earlier])
    return total - removed + draft.tokens(message)


def _summary_position(draft: Draft) -> int | None:
    """Where the summary this plan wrote sits, if it wrote one."""
    return next(
        (
            i
            for i, (m, origin) in enumerate(zip(draft.messages, draft.origin, strict=True))
            if origin is None and m.text.startswith(SUMMARY_HEADER)
        ),
        None,
    )


def bare_summary(summary: Message) -> Message:
    """``summary`` cut to nothing: its header and its pointers to the full text, without even
    the note that it was cut (the least a summary of this plan can be)."""
    _, marker, pointers = summary.text.partition(f"\n\n{FULL_TEXT}")
    return Message("user", (TextPart(SUMMARY_HEADER + marker + pointers),))


def _least(draft: Draft, summary: Message) -> int:
    """The tokens of ``summary`` in its bare form (:func:`bare_summary`)."""
    return draft.tokens(bare_summary(summary))


def _cut_summary(
    draft: Draft, position: int, budget: int, sources: Sources | None
) -> tuple[int, int]:
    """Cut the prose of the summary at ``position`` to what leaves it at most ``budget`` tokens
    (its header, a note that it was cut and its pointers to the full text stay), as far as
    that goes. Returns (its tokens before, after); nothing changes when it would not shrink."""
    old = draft.messages[position]
    before = draft.tokens(old)
    body, marker, pointers = old.text[len(SUMMARY_HEADER) :].partition(f"\n\n{FULL_TEXT}")
    trailer = marker + pointers

    def message(text: str) -> Message:
        return Message("user", (TextPart(SUMMARY_HEADER + text + trailer),))

    floor = _least(draft, old)
    if floor >= before:
        return before, before
    room = max(budget, floor) - floor
    new = message(fit_summary(body, room, draft.text_tokens))
    while draft.tokens(new) > max(budget, floor) and room > 0:
        room -= draft.tokens(new) - max(budget, floor)
        new = message(fit_summary(body, max(room, 0), draft.text_tokens))
    if draft.tokens(new) > max(budget, floor):
        new = bare_summary(old)  # not even the note that it was cut fits
    after = draft.tokens(new)
    if after >= before:
        return before, before
    draft.messages[position] = new
    if sources is not None and id(old) in sources:
        sources[id(new)] = (new, sources.pop(id(old))[1])
    # the summary's insert edit reports what the context now holds
    for k in range(len(draft.edits) - 1, -1, -1):
        if draft.edits[k].kind == "insert-summary":
            draft.edits[k] = replace(draft.edits[k], tokens_after=after)
            break
    return before, after


def shorten_summary(
    draft: Draft,
    total: int,
    target: int,
    sources: Sources | None = None,
) -> int:
    """The very last resort: cut the summary this plan wrote to what the target leaves room
    for (its pointer to the full text stays). Nothing is cut when even an empty summary
    would leave the total above the target."""
    position = _summary_position(draft)
    if position is None:
        return total
    rest = total - draft.tokens(draft.messages[position])
    if rest + _least(draft, draft.messages[position]) > target:
        return total
    before, after = _cut_summary(draft, position, target - rest, sources)
    if after < before:
        draft.warn("ctxweb-auto: the summary was shortened to fit the target")
    return total - before + after


def make_room(
    draft: Draft, total: int, need: int, room: int, sources: Sources | None = None
) -> int:
    """Cut the prose of the summary this plan wrote by up to ``need`` tokens, for the facts of
    what it replaced: a fact line keeps more of what the model needs per token than prose
    (the goal and next steps are the last lines cut). Nothing is cut when the ``room`` the
    target leaves (negative: the total is above it) would stay empty even so. Returns the new
    total."""
    position = _summary_position(draft)
    if position is None or need <= 0:
        return total
    size = draft.tokens(draft.messages[position])
    if room + size - _least(draft, draft.messages[position]) <= 0:
        return total
    before, after = _cut_summary(draft, position, size - need, sources)
    if after < before:
        draft.warn(
            "ctxweb-auto: the summary was shortened to make room for the facts of what it replaced"
        )
    return total - before + after


def _expand(
    messages: Sequence[Message], digested: dict[int, Digested], *, current: bool
) -> list[Message]:
    """``messages`` without a previous summary, each digest this plan wrote replaced by the turn
    it digested (as it stood with ``current``, else as it came in). With ``current``, a digest
    from an earlier plan is read back as its request (a user message) and the rest (an
    assistant message), so a summarizer does not take the whole digest for the user's goal."""
    out: list[Message] = []
    for m in messages:
        turn = digested.get(id(m))
        if m.text.startswith(SUMMARY_HEADER):
            continue
        if turn is not None and turn.digest is m:
            out.extend(turn.current if current else turn.original)
        elif current and m.text.startswith(DIGEST_HEADER):
            out.extend(_read_digest(m.text))
        else:
            out.append(m)
    return out


def _without_pointers(message: Message) -> Message:
    """``message`` with each ``[EXTERNALIZED:<id>]`` read as ``[externalized]``: a summary has
    no room for artifact ids (its own pointer reaches the originals)."""
    if "[EXTERNALIZED:" not in render_message(message):
        return message

    def text(part: Part) -> Part:
        if isinstance(part, TextPart):
            return replace(part, text=POINTER.sub("[externalized]", part.text))
        if isinstance(part, ToolCallPart):
            return replace(part, arguments=POINTER.sub("[externalized]", part.arguments))
        if isinstance(part, ToolResultPart):
            return replace(part, content=tuple(map(text, part.content)))
        return part

    return replace(message, parts=tuple(map(text, message.parts)))


def _read_digest(text: str) -> list[Message]:
    lines = [x for x in text.splitlines()[1:] if not x.startswith("full turn: ")]
    request = [x.removeprefix("user: ") for x in lines if x.startswith("user: ")]
    rest = [x for x in lines if not x.startswith("user: ")]
    return [
        *(Message("user", (TextPart(x),)) for x in request),
        Message("assistant", (TextPart(POINTER.sub("", "\n".join(rest))),)),
    ]


def _originals(draft: Draft, lo: int, hi: int) -> list[Message]:
    """``draft.messages[lo:hi]`` as they came in (messages the strategy inserted as they are)."""
    return [
        m if origin is None else draft.context.messages[origin]
        for m, origin in zip(draft.messages[lo:hi], draft.origin[lo:hi], strict=True)
    ]


def _full_text(kind: str, messages: list[Message], draft: Draft, summary: str) -> Artifact:
    """An artifact holding ``messages`` as text. Built directly rather than with ``draft.keep``:
    its tokens are the messages' (already counted), not a second tokenization of the range."""
    return make_artifact(
        kind,
        "\n\n".join(f"[{m.role}]\n{render_message(m)}" for m in messages),
        tokens=sum(map(draft.tokens, messages)),
        summary=summary,
    )
