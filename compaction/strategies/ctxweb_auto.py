"""ctxweb's own strategy, ``ctxweb-auto``: escalate from lossless to lossy until under a target.

Steps, each run only while the counted total is still above the target:

1. **externalize** tool outputs and tool-call argument strings above ``externalize_bytes``: the
   text moves to an artifact and leaves ``[EXTERNALIZED:<id>]`` plus a one-line description
   (arguments stay valid JSON, every key kept);
2. **compact** medium ones (above ``compact_bytes``): head and tail kept around a pointer to the
   full text's artifact;
3. **prune**: every remaining older tool output, and argument strings above 512 bytes, become
   their pointer;
4. **digest**: the oldest user turns, one at a time, each become a short digest (the request,
   the tools called, errors, facts, the last reply) that points at the turn's full text;
5. **summarize**: the oldest whole user turns (digests included) are replaced by one
   ``[CTXWEB_SUMMARY]`` user message (incremental over a previous one) that keeps their facts:
   paths, commands, errors, tests, URLs, identifiers and numbers, cut to what the target leaves
   room for, and ends with a pointer to one artifact holding the full text of the summarized
   messages (a previous summary's pointers are carried over), so every fact of what it removes
   stays reachable, not only those the summary has room for.

The latest user turn (``latest_turn``):

- ``auto`` (default): kept verbatim while the target can be met without it. When steps 1-5 leave
  the total above the target (in an agent session one user request often drives every tool call,
  and the latest turn is then nearly the whole context), steps 1-3 also reach the latest turn's
  tool outputs and arguments, all but its last ``keep_recent_outputs`` tool calls, and a warning
  says so;
- ``verbatim``: never touched, even if the target is then missed;
- ``outputs``: steps 1-3 reach the same tool outputs and arguments from the start.

The latest turn's messages are never dropped, digested or summarized; its user message is never
changed. Cuts fall only at user-turn starts and never orphan a tool call or result; an edit that
would not make a message smaller is skipped; whatever leaves the context is kept as an artifact,
and the context points at it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import pairwise
from typing import Any

from compaction.messages.model import Message, Part, TextPart, ToolCallPart, ToolResultPart
from compaction.regions import CTXWEB_SUMMARY_MARKER, is_summary
from compaction.strategies.base import (
    Artifact,
    Draft,
    Param,
    Strategy,
    make_artifact,
    render_message,
)
from compaction.strategies.ctxweb_text import (
    CUT_NOTE,
    DIGEST_HEADER,
    POINTER,
    describe,
    digest_text,
    fit_summary,
    pointer,
    shrink_arguments,
)
from compaction.strategies.outputs import with_result_text
from compaction.summarizers import FactSummarizer, Summarizer
from compaction.tokens import REQUEST_OVERHEAD
from compaction.turns import find_legal_start, is_user_turn_start, orphans

__all__ = ["SUMMARY_HEADER", "CtxwebAuto", "pointer"]

SUMMARY_HEADER = CTXWEB_SUMMARY_MARKER + "\n"
SUMMARY_PROMPT = (
    "Summarize the removed conversation into the sections Goal, Constraints & Preferences,"
    " Progress (Done, In Progress, Blocked), Key Decisions, Next Steps and Critical Context."
    " Keep every file path, command, error line, test name, URL, identifier and number."
)

STEPS = ("externalize", "compact", "prune", "digest", "summarize")
OUTPUT_STEPS = STEPS[:3]

_FULL_TEXT = "Full text of the summarized messages:"
#: Argument strings above this many bytes become their pointer in the prune step.
PRUNE_ARGUMENT_BYTES = 512
#: A turn is digested only when its digest costs less than this share of its tokens.
DIGEST_GAIN = 0.7
#: Characters kept before and after the pointer when a text is compacted.
HEAD, TAIL = 600, 400


class CtxwebAuto(Strategy):
    """``ctxweb-auto``: externalize, compact, prune, digest, summarize, until under the target."""

    id = "ctxweb-auto"
    description = (
        "Escalate from lossless to lossy until under a target: externalize big tool outputs and"
        " arguments, compact medium ones, prune old ones, digest then summarize the oldest user"
        " turns; never orphans a tool pair, keeps the latest user turn verbatim unless the target"
        " needs its older tool outputs, and keeps removed facts in digests, the summary or behind"
        " artifacts."
    )
    source = "ctxweb"
    params = (
        Param(
            "target_tokens",
            "int",
            None,
            min=1,
            max=10_000_000,
            help="target total tokens; default target_fraction of usable",
        ),
        Param(
            "target_fraction",
            "float",
            0.5,
            min=0.05,
            max=1.0,
            help="target as a fraction of usable (window minus output reserve)",
        ),
        Param(
            "context_window",
            "int",
            200_000,
            min=1000,
            max=10_000_000,
            help="the model's context window",
        ),
        Param(
            "output_reserve",
            "int",
            None,
            min=0,
            max=1_000_000,
            help="output tokens reserved; default the context's max output tokens, else 32,000",
        ),
        Param(
            "externalize_bytes",
            "int",
            8192,
            min=256,
            max=100_000_000,
            help="tool outputs and argument strings above this many bytes are externalized",
        ),
        Param(
            "compact_bytes",
            "int",
            2048,
            min=128,
            max=100_000_000,
            help="tool outputs and argument strings above this many bytes are compacted around"
            " a pointer",
        ),
        Param(
            "max_step",
            "str",
            "summarize",
            choices=STEPS,
            help="the most lossy step allowed",
        ),
        Param(
            "latest_turn",
            "str",
            "auto",
            choices=("auto", "verbatim", "outputs"),
            help="auto: keep the latest user turn verbatim unless the target needs its older tool"
            " outputs (then warn); verbatim: never touch it; outputs: let steps 1-3 reach its"
            " older tool outputs from the start",
        ),
        Param(
            "keep_recent_outputs",
            "int",
            3,
            min=0,
            max=1000,
            help="the latest turn's last tool calls (and their outputs) always kept verbatim",
        ),
    )

    def run(self, draft: Draft, params: dict[str, Any], summarizer: Summarizer | None) -> None:
        target = _target(draft, params)
        total = _total(draft)
        allowed = STEPS[: STEPS.index(params["max_step"]) + 1]
        latest = _latest_start(draft.messages)
        reach = latest
        # each digest this plan writes -> the turn it replaced (as it stood, and as it came in),
        # so a summary of the digest reads the turn itself
        digested: dict[int, Digested] = {}
        if params["latest_turn"] == "outputs":
            reach = _recent_start(draft.messages, latest, params["keep_recent_outputs"])
        for step in allowed:
            if total <= target:
                return
            if step == "summarize":
                total = self._summarize(draft, total, target, latest, summarizer, digested)
            elif step == "digest":
                total = self._digest(draft, total, target, latest, digested)
            else:
                total = self._shrink(draft, step, params, total, target, 0, reach)
            latest = _latest_start(draft.messages)
        if total > target and params["latest_turn"] == "auto":
            total = self._into_latest_turn(draft, params, total, target, allowed)
        if total > target and "summarize" in allowed:
            total = self._fit_summary(draft, total, target)
        if total > target:
            draft.warn(f"ctxweb-auto: {total} tokens remain above the target of {target}")

    def _into_latest_turn(
        self,
        draft: Draft,
        params: dict[str, Any],
        total: int,
        target: int,
        allowed: tuple[str, ...],
    ) -> int:
        """The last resort of ``latest_turn=auto``: steps 1-3 on the latest turn's older tool
        outputs and arguments."""
        latest = _latest_start(draft.messages)
        recent = _recent_start(draft.messages, latest, params["keep_recent_outputs"])
        edits = len(draft.edits)
        before = total
        for step in allowed:
            if total <= target or step not in OUTPUT_STEPS:
                break
            total = self._shrink(draft, step, params, total, target, latest, recent)
        if len(draft.edits) > edits:
            draft.warn(
                f"ctxweb-auto: the target needed the latest user turn: {len(draft.edits) - edits}"
                f" of its older tool outputs and arguments moved behind artifacts"
                f" ({before - total} tokens); its messages are all kept."
                " latest_turn=verbatim forbids this"
            )
        return total

    def _fit_summary(self, draft: Draft, total: int, target: int) -> int:
        """The very last resort: cut the summary this plan wrote to what the target leaves room
        for (its pointer to the full text stays). Nothing is cut when even an empty summary
        would leave the total above the target."""
        position = next(
            (
                i
                for i, (m, origin) in enumerate(zip(draft.messages, draft.origin, strict=True))
                if origin is None and m.text.startswith(SUMMARY_HEADER)
            ),
            None,
        )
        if position is None:
            return total
        old = draft.messages[position]
        body, marker, pointers = old.text[len(SUMMARY_HEADER) :].partition(f"\n\n{_FULL_TEXT}")
        trailer = marker + pointers

        def message(text: str) -> Message:
            return Message("user", (TextPart(SUMMARY_HEADER + text + trailer),))

        rest = total - draft.tokens(old)
        floor = draft.tokens(message(CUT_NOTE))
        if rest + floor > target:
            return total
        room = target - rest - floor + draft.text_tokens(CUT_NOTE)
        new = message(fit_summary(body, room, draft.text_tokens))
        while rest + draft.tokens(new) > target and room > 0:
            room -= rest + draft.tokens(new) - target
            new = message(fit_summary(body, max(room, 0), draft.text_tokens))
        draft.messages[position] = new
        # the summary's insert edit reports what the context now holds
        for k in range(len(draft.edits) - 1, -1, -1):
            if draft.edits[k].kind == "insert-summary":
                draft.edits[k] = replace(draft.edits[k], tokens_after=draft.tokens(new))
                break
        draft.warn("ctxweb-auto: the summary was shortened to fit the target")
        return rest + draft.tokens(new)

    # --- steps 1-3: tool outputs and arguments -------------------------------------------------

    def _shrink(
        self,
        draft: Draft,
        step: str,
        params: dict[str, Any],
        total: int,
        target: int,
        lo: int,
        hi: int,
    ) -> int:
        """Step ``step`` on the tool outputs and call arguments of ``messages[lo:hi]``, oldest
        first, until the total is within the target. An edit that would not make its message
        smaller is skipped, and so is its artifact."""
        for position in range(lo, min(hi, len(draft.messages))):
            for part_index, part in enumerate(draft.messages[position].parts):
                if total <= target:
                    return total
                if isinstance(part, ToolResultPart):
                    over = _thresholds(params)[step]
                    shrunk = _shrunk_text(draft, step, part.text, over, "tool_result")
                    if shrunk is None:
                        continue
                    text, artifacts, kind = shrunk
                    message = with_result_text(draft.messages[position], part_index, text)
                    detail = f"{step}: tool output {part.tool_call_id}"
                elif isinstance(part, ToolCallPart):
                    shrunk = _shrunk_arguments(draft, step, params, part.arguments)
                    if shrunk is None:
                        continue
                    arguments, artifacts, kind = shrunk
                    parts = list(draft.messages[position].parts)
                    parts[part_index] = replace(part, arguments=arguments)
                    message = replace(draft.messages[position], parts=tuple(parts))
                    detail = f"{step}: tool input {part.id}"
                else:
                    continue
                before = draft.tokens(draft.messages[position])
                after = draft.tokens(message)
                if after >= before:
                    continue
                for artifact in artifacts:
                    draft.artifacts.setdefault(artifact.id, artifact)
                draft.replace_message(
                    position,
                    message,
                    kind,  # type: ignore[arg-type]
                    detail,
                    part_index=part_index,
                    artifact_id=artifacts[0].id,
                )
                total += after - before
        return total

    # --- step 4: digests -----------------------------------------------------------------------

    def _digest(
        self,
        draft: Draft,
        total: int,
        target: int,
        limit: int,
        digested: dict[int, Digested],
    ) -> int:
        """Replace the oldest user turns before ``limit``, one at a time, with their digests
        (recorded in ``digested`` by the digest's ``id``)."""
        bounds = [i for i in range(limit) if is_user_turn_start(draft.messages[i])] + [limit]
        shift = 0
        for start, end in pairwise(bounds):
            if total <= target:
                break
            lo, hi = start - shift, end - shift
            turn = draft.messages[lo:hi]
            if is_summary(turn[0]) or not orphans(turn).ok:
                continue
            originals = _originals(draft, lo, hi)
            full = _full_text("turn", originals, draft, f"user turn of {len(originals)} messages")
            message = Message("user", (TextPart(digest_text(originals, full.id)),))
            removed = sum(map(draft.tokens, turn))
            added = draft.tokens(message)
            if added >= removed * DIGEST_GAIN:
                continue
            draft.artifacts.setdefault(full.id, full)
            draft.drop(range(lo, hi), "summarize-range", "digested by ctxweb-auto")
            draft.insert(lo, message, "ctxweb turn digest")
            digested[id(message)] = Digested(turn, originals)
            total += added - removed
            shift += hi - lo - 1
        return total

    # --- step 5: the summary -------------------------------------------------------------------

    def _summarize(
        self,
        draft: Draft,
        total: int,
        target: int,
        limit: int,
        summarizer: Summarizer | None,
        digested: dict[int, Digested],
    ) -> int:
        """Replace the oldest whole user turns before ``limit`` with one summary, when that
        makes the context smaller."""
        messages = draft.messages
        first = 0
        while first < len(messages) and messages[first].role in ("system", "developer"):
            first += 1
        previous: str | None = None
        if first < limit and messages[first].text.startswith(SUMMARY_HEADER):
            previous = messages[first].text[len(SUMMARY_HEADER) :]
        starts = [
            i for i in range(first, limit + 1) if i == limit or is_user_turn_start(messages[i])
        ]
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
            body = [
                _without_pointers(m) for m in _expand(messages[first:cut], digested, current=True)
            ]
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
            return total  # the summary would cost more than what it replaces (a few digests)
        if not orphans(messages[cut:]).ok:
            draft.warn("ctxweb-auto: the kept messages already had orphaned tool pairs")
        # The artifact holds the messages as they came in, before steps 1-4 shrank or digested
        # them, so one hop reaches every original (a digest from an earlier plan keeps its own
        # pointer to its turn).
        summarized = _expand(_originals(draft, first, cut), digested, current=False)
        full = _full_text(
            "summarized_messages",
            summarized,
            draft,
            f"{len(summarized)} messages summarized by ctxweb-auto",
        )
        draft.artifacts.setdefault(full.id, full)
        pointers = [*POINTER.findall(previous or ""), pointer(full.id)]
        trailer = f"\n\n{_FULL_TEXT} {' '.join(dict.fromkeys(pointers))}"
        summary = POINTER.sub("", summary).replace(_FULL_TEXT, "").rstrip()
        draft.drop(range(first, cut), "summarize-range", "summarized into the ctxweb summary")
        message = Message("user", (TextPart(SUMMARY_HEADER + summary + trailer),))
        draft.insert(first, message, "ctxweb summary")
        return total - removed + draft.tokens(message)


def _thresholds(params: dict[str, Any]) -> dict[str, int]:
    """The size (bytes) above which each output step takes a text."""
    return {
        "externalize": params["externalize_bytes"],
        "compact": params["compact_bytes"],
        "prune": 0,
    }


def _shrunk_text(
    draft: Draft, step: str, text: str, over: int, kind: str
) -> tuple[str, list[Artifact], str] | None:
    """``text`` after ``step`` when it is above ``over`` bytes, as (new text, artifacts, edit
    kind); a text compacted by step 2 is pruned to its pointer whatever its size. Artifacts are
    built, not stored: the caller stores them once it keeps the edit."""
    if not text or text.startswith("[EXTERNALIZED:"):
        return None
    found = POINTER.search(text)
    if found is not None:
        kept = draft.artifacts.get(found.group(0)[14:-1])
        if step != "prune" or kept is None:
            return None
        return f"{found.group(0)} {kept.summary}", [kept], "clear"
    size = len(text.encode("utf-8"))
    if size <= over:
        return None
    if step == "compact":
        omitted = len(text) - HEAD - TAIL
        if omitted <= 0:
            return None
        artifact = _artifact(draft, kind, text)
        note = f"[... {omitted} chars omitted; full text: {pointer(artifact.id)}]"
        return f"{text[:HEAD]}\n{note}\n{text[-TAIL:]}", [artifact], "compact-inline"
    # A pointer and its description take about 200 bytes: not worth it for a shorter text.
    if size <= 64 + 24 + len(describe(text)):
        return None
    artifact = _artifact(draft, kind, text)
    edit = "externalize" if step == "externalize" else "clear"
    return f"{pointer(artifact.id)} {describe(text)}", [artifact], edit


def _shrunk_arguments(
    draft: Draft, step: str, params: dict[str, Any], arguments: str
) -> tuple[str, list[Artifact], str] | None:
    """A tool call's argument JSON after ``step``: each string value it takes becomes a pointer
    (or is compacted around one), every key kept."""
    over = {**_thresholds(params), "prune": PRUNE_ARGUMENT_BYTES}[step]
    if len(arguments.encode("utf-8")) <= min(over, PRUNE_ARGUMENT_BYTES):
        return None
    artifacts: list[Artifact] = []
    kinds: list[str] = []

    def shrink(value: str) -> str | None:
        shrunk = _shrunk_text(draft, step, value, over, "tool_input")
        if shrunk is None:
            return None
        artifacts.extend(shrunk[1])
        kinds.append(shrunk[2])
        return shrunk[0]

    new = shrink_arguments(arguments, shrink)
    if new is None or not artifacts:
        return None
    return new, artifacts, kinds[0]


def _artifact(draft: Draft, kind: str, text: str) -> Artifact:
    return make_artifact(kind, text, tokens=draft.text_tokens(text), summary=describe(text))


def _target(draft: Draft, params: dict[str, Any]) -> int:
    target = params["target_tokens"]
    if target is not None:
        return int(target)
    reserve = params["output_reserve"]
    if reserve is None:
        reserve = draft.context.max_output_tokens or 32_000
    return int(max(params["context_window"] - reserve, 1) * params["target_fraction"])


def _latest_start(messages: list[Message]) -> int:
    """Where the latest user turn starts (``len(messages)`` when there is none)."""
    for i in range(len(messages) - 1, -1, -1):
        if is_user_turn_start(messages[i]) and not is_summary(messages[i]):
            return i
    return len(messages)


def _recent_start(messages: list[Message], turn_start: int, keep: int) -> int:
    """Where the latest turn's last ``keep`` tool calls begin: steps 1-3 on the latest turn
    stop there."""
    if keep == 0:
        return len(messages)
    calls = [i for i in range(turn_start, len(messages)) if messages[i].tool_calls]
    if len(calls) <= keep:
        return calls[0] if calls else len(messages)
    return calls[-keep]


@dataclass(frozen=True)
class Digested:
    """A user turn a digest replaced: its messages as they stood, and as they came in."""

    current: list[Message]
    original: list[Message]


def _expand(
    messages: Sequence[Message], digested: dict[int, Digested], *, current: bool
) -> list[Message]:
    """``messages`` without a previous summary, each digest this plan wrote replaced by the turn
    it digested (as it stood with ``current``, else as it came in). With ``current``, a digest
    from an earlier plan is read back as its request (a user message) and the rest (an
    assistant message), so a summarizer does not take the whole digest for the user's goal."""
    out: list[Message] = []
    for m in messages:
        if m.text.startswith(SUMMARY_HEADER):
            continue
        if id(m) in digested:
            turn = digested[id(m)]
            out.extend(turn.current if current else turn.original)
        elif current and m.text.startswith(DIGEST_HEADER):
            out.extend(_read_digest(m.text))
        else:
            out.append(m)
    return out


def _without_pointers(message: Message) -> Message:
    """``message`` with each ``[EXTERNALIZED:<id>]`` read as ``[externalized]``: a summary has
    no room for 64-digit ids (its own pointer reaches the originals)."""
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


def _total(draft: Draft) -> int:
    counter = draft.counter
    total = int(getattr(counter, "REQUEST_OVERHEAD", REQUEST_OVERHEAD))
    if draft.system:
        total += counter.count_system(draft.system)
    if draft.context.tools:
        total += counter.count_tools(draft.context.tools)
    return total + sum(draft.tokens(m) for m in draft.messages)
