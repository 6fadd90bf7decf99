"""``ctxweb-auto`` itself: its parameters, the target, and the order of the steps."""

from __future__ import annotations

from typing import Any

from compaction.cache import last_breakpoint
from compaction.messages.model import Message
from compaction.regions import is_summary
from compaction.strategies.base import Draft, Param, Strategy
from compaction.strategies.ctxweb_auto._carry import carry_facts, lost_facts
from compaction.strategies.ctxweb_auto._give import give_back, narrow, verbatim_outputs
from compaction.strategies.ctxweb_auto._outputs import OUTPUT_STEPS, shrink
from compaction.strategies.ctxweb_auto._search import LAND, Attempt, search
from compaction.strategies.ctxweb_auto._steps import Sources, digest_steps
from compaction.strategies.ctxweb_auto._summaries import (
    Digested,
    digest,
    shorten_summary,
    summarize,
)
from compaction.summarizers import Summarizer
from compaction.turns import is_user_turn_start

__all__ = ["STEPS", "CtxwebAuto"]

STEPS = (*OUTPUT_STEPS, "digest", "summarize")
CACHE_MODES = ("ignore", "prefer", "keep_prefix")


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
            "cache",
            "str",
            "ignore",
            choices=CACHE_MODES,
            help="the provider's prompt cache: ignore it; keep_prefix: edit only after the last"
            " cache_control breakpoint of the request (or cache_prefix_tokens), and say so when"
            " the target cannot be met that way; prefer: the same, then edit the prefix only if"
            " the target needs it",
        ),
        Param(
            "cache_prefix_tokens",
            "int",
            None,
            min=0,
            max=10_000_000,
            help="with cache keep_prefix or prefer: the leading tokens to keep byte-identical;"
            " default up to the request's last cache_control breakpoint",
        ),
        Param(
            "keep_recent_outputs",
            "int",
            3,
            min=0,
            max=1000,
            help="the latest turn's last tool calls (and their outputs) kept verbatim; in a"
            " session of one prompt (or when nothing else can be shrunk) they give way, oldest"
            " first, each behind a pointer to its full text, when nothing else reaches the"
            " target",
        ),
    )

    def run(self, draft: Draft, params: dict[str, Any], summarizer: Summarizer | None) -> None:
        target = _target(draft, params)
        original = draft.total_tokens()
        if original <= target:
            return
        best = search(self.attempt, draft, params, summarizer, target, original)
        draft.messages, draft.origin, draft.system = (
            best.draft.messages,
            best.draft.origin,
            best.draft.system,
        )
        draft.edits, draft.artifacts = best.draft.edits, best.draft.artifacts
        for warning in best.draft.warnings:
            draft.warn(warning)
        if params["latest_turn"] == "auto":
            _warn_latest_turn(draft, params)
        if best.lost:
            draft.warn(
                f"ctxweb-auto: {best.lost} of the {best.facts} facts (paths, names, errors, URLs)"
                " of what it removed no longer fit in the context; they stay in its artifacts"
            )
        if best.total > target:
            draft.warn(f"ctxweb-auto: {best.total} tokens remain above the target of {target}")

    def attempt(
        self,
        draft: Draft,
        params: dict[str, Any],
        summarizer: Summarizer | None,
        target: int,
        aim: int,
    ) -> Attempt:
        """The steps on a fresh copy of ``draft``, each stopping once the total is within
        ``aim``; then the facts they took out written back within ``target``."""
        draft = Draft.start(draft.context, draft.counter, draft.pinned)
        total = draft.total_tokens()
        allowed = STEPS[: STEPS.index(params["max_step"]) + 1]
        # each digest this plan writes -> the turn it replaced (as it stood, and as it came in),
        # so a summary of the digest reads the turn itself
        digested: dict[int, Digested] = {}
        sources: Sources = {}
        state = (digested, sources)
        start = _cache_start(draft, params)
        total = self._escalate(draft, params, summarizer, total, aim, allowed, state, start)
        if total > aim and start > 0:
            kept = _prefix_tokens(draft, start)
            if params["cache"] == "keep_prefix":
                draft.warn(
                    f"ctxweb-auto: cache=keep_prefix keeps the first {start} messages"
                    f" ({kept} tokens) byte-identical; the target of {target} cannot be met"
                    f" without editing them ({total} tokens remain)"
                )
            else:
                draft.warn(
                    f"ctxweb-auto: cache=prefer: the target of {target} needed the cached prefix"
                    f" (the first {start} messages, {kept} tokens): the next call writes them to"
                    " the cache again"
                )
                start = 0
                total = self._escalate(draft, params, summarizer, total, aim, allowed, state, start)
        if total > aim and "summarize" in allowed:
            total = shorten_summary(draft, total, aim, sources)
        steps = total
        total, lost, wanted = self._carry(draft, params, total, target, allowed, start, sources)
        if total < LAND * target:
            given = give_back(draft, total, target, sources)
            if given != total and lost:
                lost = len(lost_facts(draft))  # what came back may show some again
            total = given
        # what a lower aim must make room for: the lost facts' own tokens (a list short of room
        # is written compact, with no separator to pay for)
        cost = sum(draft.text_tokens(text) for _, text in lost_facts(draft)) if lost else 0
        return Attempt(draft, aim, steps, total, lost, wanted, cost)

    def _carry(
        self,
        draft: Draft,
        params: dict[str, Any],
        total: int,
        target: int,
        allowed: tuple[str, ...],
        start: int,
        sources: Sources,
    ) -> tuple[int, int, int]:
        """The facts the steps took out written back within ``target`` (:func:`carry_facts`).
        When some do not fit, once more from the same draft with the tool outputs the steps left
        verbatim giving way to them (:func:`_verbatim_range`, compacted around a pointer, the
        oldest first): the attempt that keeps more facts visible is kept (the first on a tie)."""
        over = params["compact_bytes"]
        lo, hi = _verbatim_range(draft, params, start)
        if "compact" not in allowed or next(verbatim_outputs(draft, lo, hi, over), None) is None:
            return carry_facts(draft, total, target - total, sources)
        saved = _Saved(draft, sources)
        first = carry_facts(draft, total, target - total, sources)
        if not first[1]:
            return first
        kept = _Saved(draft, sources)
        saved.restore(draft, sources)

        def give_way(draft: Draft, total: int, need: int) -> int:
            if total > target:
                return total
            return narrow(draft, total, need, lo, hi, over)

        second = carry_facts(draft, total, target - total, sources, give_way)
        if second[1] < first[1]:
            return second
        kept.restore(draft, sources)
        return first

    def _escalate(
        self,
        draft: Draft,
        params: dict[str, Any],
        summarizer: Summarizer | None,
        total: int,
        target: int,
        allowed: tuple[str, ...],
        state: tuple[dict[int, Digested], Sources],
        start: int,
    ) -> int:
        """Steps 1-5 on the messages from ``start`` (the cached prefix before it untouched),
        then, with ``latest_turn=auto``, steps 1-3 on the latest turn."""
        latest = _latest_start(draft.messages)
        reach = latest
        if params["latest_turn"] == "outputs":
            reach = _recent_start(draft.messages, latest, params["keep_recent_outputs"])
        for step in allowed:
            if total <= target:
                return total
            if step == "summarize":
                total = summarize(
                    draft, total, target, latest, summarizer, *state[:1], start, state[1]
                )
            elif step == "digest":
                total = digest(draft, total, target, latest, state[0], start, state[1])
            else:
                total = shrink(draft, step, params, total, target, start, reach)
            latest = _latest_start(draft.messages)
        if total > target and params["latest_turn"] == "auto":
            total = self._into_latest_turn(draft, params, total, target, allowed, start, state[1])
        return total

    def _into_latest_turn(
        self,
        draft: Draft,
        params: dict[str, Any],
        total: int,
        target: int,
        allowed: tuple[str, ...],
        start: int,
        sources: Sources,
    ) -> int:
        """The last resort of ``latest_turn=auto``: steps 1-3 on the latest turn's older tool
        outputs and arguments (from ``start`` on); then, in a session of one prompt or when
        nothing else was found to shrink, its last ``keep_recent_outputs`` tool calls give way to
        externalization, oldest first (lossless: behind artifacts); then its oldest steps are
        digested; then those last calls are compacted and pruned, oldest first. Only parts of a
        call or of its output change: no call loses its result."""
        latest = max(_latest_start(draft.messages), start)
        recent = _recent_start(draft.messages, latest, params["keep_recent_outputs"])
        for step in allowed:
            if total <= target or step not in OUTPUT_STEPS:
                break
            total = shrink(draft, step, params, total, target, latest, recent)
        # the protected calls give way only where they are all there is to shrink: a session of
        # one prompt, or a plan that found nothing else (else older turns are the material, and
        # the latest turn's last calls stay verbatim even above the target)
        yields = not draft.edits or not any(map(is_user_turn_start, draft.messages[:latest]))
        if yields:
            total = _give_way(draft, params, total, target, latest, ("externalize",), allowed)
        if total > target and "digest" in allowed:
            # the fewest oldest steps that fit, reaching up to the last tool call if need be
            first = max(latest + 1, start)
            last = _recent_start(draft.messages, latest, min(params["keep_recent_outputs"], 1))
            total = digest_steps(draft, total, target, first, max(last, first), sources)
        if not yields:
            return total
        latest = max(_latest_start(draft.messages), start)
        return _give_way(draft, params, total, target, latest, ("compact", "prune"), allowed)


class _Saved:
    """What a draft and this plan's sources hold at one moment, to go back to: the fact pass
    replaces items of these lists and dicts, never a message in place."""

    def __init__(self, draft: Draft, sources: Sources) -> None:
        self.messages = list(draft.messages)
        self.origin = list(draft.origin)
        self.system = draft.system
        self.edits = list(draft.edits)
        self.warnings = list(draft.warnings)
        self.artifacts = dict(draft.artifacts)
        self.sources = dict(sources)

    def restore(self, draft: Draft, sources: Sources) -> None:
        draft.messages, draft.origin = list(self.messages), list(self.origin)
        draft.system, draft.edits = self.system, list(self.edits)
        draft.warnings, draft.artifacts = list(self.warnings), dict(self.artifacts)
        sources.clear()
        sources.update(self.sources)


def _verbatim_range(draft: Draft, params: dict[str, Any], start: int) -> tuple[int, int]:
    """Where verbatim tool outputs may give way to facts: the messages the plan's steps may
    reach, from ``start`` (after the cached prefix kept) up to the latest user turn with
    ``latest_turn=verbatim``; else up to its last ``keep_recent_outputs`` tool calls, or to
    the end in a session of one prompt (where those calls give way too, as in
    :meth:`CtxwebAuto._into_latest_turn`)."""
    latest = _latest_start(draft.messages)
    if params["latest_turn"] == "verbatim":
        return start, latest
    if not any(map(is_user_turn_start, draft.messages[:latest])):
        return start, len(draft.messages)
    return start, _recent_start(draft.messages, latest, params["keep_recent_outputs"])


def _give_way(
    draft: Draft,
    params: dict[str, Any],
    total: int,
    target: int,
    latest: int,
    steps: tuple[str, ...],
    allowed: tuple[str, ...],
) -> int:
    """``steps`` on the latest turn's protected tool calls (its last ``keep_recent_outputs``)
    and their outputs, the oldest protected call first, until the total is within ``target``:
    a session of one prompt and its tool rounds has no other outputs to shrink."""
    keep = params["keep_recent_outputs"]
    for step in steps:
        if step not in allowed:
            continue
        for kept in range(keep - 1, -1, -1):
            if total <= target:
                return total
            total = shrink(
                draft,
                step,
                params,
                total,
                target,
                latest,
                _recent_start(draft.messages, latest, kept),
            )
    return total


def _warn_latest_turn(draft: Draft, params: dict[str, Any]) -> None:
    """Say what the finished plan took from the latest user turn, if anything (counted on the
    result, after what was given back)."""
    latest = _latest_start(draft.messages)
    if latest >= len(draft.messages) or draft.origin[latest] is None:
        return
    first = draft.origin[latest]
    assert first is not None
    kept = {
        origin
        for message, origin in zip(draft.messages[latest:], draft.origin[latest:], strict=True)
        if origin is not None and message is draft.context.messages[origin]
    }
    taken = [i for i in range(first, len(draft.context.messages)) if i not in kept]
    if not taken:
        return
    before = sum(
        draft.tokens(draft.context.messages[i]) for i in range(first, len(draft.context.messages))
    )
    after = sum(draft.tokens(m) for m in draft.messages[latest:])
    keep = params["keep_recent_outputs"]
    protected = _recent_start(list(draft.context.messages), first, keep)
    gave = sum(1 for i in taken if i >= protected)
    if gave:
        kept_part = (
            f"its request is kept verbatim; nothing else could reach the target, so {gave} of"
            f" the messages of its last {keep} tool calls (keep_recent_outputs) gave way too,"
            " oldest first, each behind a pointer to its full text"
        )
    else:
        kept_part = f"its request and last {keep} tool calls are kept verbatim"
    draft.warn(
        f"ctxweb-auto: the target needed the latest user turn: {len(taken)} of its messages"
        f" (older tool outputs, arguments and steps) shrunk or digested behind artifacts"
        f" ({before - after} tokens); {kept_part}. latest_turn=verbatim forbids this"
    )


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


def _cache_start(draft: Draft, params: dict[str, Any]) -> int:
    """The first message the plan may edit: 0 with ``cache=ignore``; else the one after the
    request's last ``cache_control`` breakpoint, or after ``cache_prefix_tokens``."""
    if params["cache"] == "ignore":
        return 0
    wanted = params["cache_prefix_tokens"]
    if wanted is None:
        start = last_breakpoint(draft.context) + 1
        if start == 0:
            draft.warn(
                f"ctxweb-auto: cache={params['cache']}: the request has no cache_control"
                " breakpoint and no cache_prefix_tokens was given: no prefix to keep"
            )
        return start
    # messages wholly inside the first ``wanted`` tokens (system prompt and tools included)
    spent = draft.total_tokens() - sum(map(draft.tokens, draft.messages))
    start = 0
    for message in draft.messages:
        spent += draft.tokens(message)
        if spent > wanted:
            break
        start += 1
    return start


def _prefix_tokens(draft: Draft, start: int) -> int:
    fixed = draft.total_tokens() - sum(map(draft.tokens, draft.messages))
    return fixed + sum(map(draft.tokens, draft.messages[:start]))
