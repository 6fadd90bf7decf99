"""picoclaw's strategies (sipeed/picoclaw ``pkg/agent/context_legacy.go``, ``context_budget.go``).

``picoclaw-summarize`` (``maybeSummarize`` + ``summarizeSession``), ``picoclaw-force-compress``
(``forceCompression``) and ``picoclaw-trim`` (``trimHistoryToFitContextWindow``). picoclaw's history
is every non-system message; its summary lives in the system prompt after the exact
``CONTEXT_SUMMARY:`` prefix; its estimator is runes×2/5 with overheads
(``docs/seed-strategies.md`` §2).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from typing import Any

from compaction.messages.model import Message, TextPart
from compaction.strategies.base import Draft, Param, Strategy
from compaction.strategies.outputs import set_system_block, system_block
from compaction.summarizers import FactSummarizer, Summarizer
from compaction.tokens.estimators import picoclaw_message_tokens, picoclaw_tooldefs_tokens
from compaction.turns import (
    find_legal_start,
    find_safe_boundary,
    is_user_turn_start,
    orphans,
    parse_turn_boundaries,
)

__all__ = [
    "BATCH_PROMPT",
    "CONTEXT_SUMMARY_PREFIX",
    "MERGE_PROMPT",
    "OMITTED_NOTE",
    "PicoclawForceCompress",
    "PicoclawSummarize",
    "PicoclawTrim",
    "emergency_note",
    "force_compression_cut",
    "trim_cut",
]

CONTEXT_SUMMARY_PREFIX = (
    "CONTEXT_SUMMARY: The following is an approximate summary of prior conversation for reference"
    " only. It may be incomplete or outdated — always defer to explicit instructions.\n\n"
)
BATCH_PROMPT = (
    "Provide a concise summary of this conversation segment, preserving core context and key"
    " points.\n"
)
MERGE_PROMPT = "Merge these two conversation summaries into one cohesive summary:\n\n1: %s\n\n2: %s"
OMITTED_NOTE = "\n[Note: Some oversized messages were omitted from this summary for efficiency.]"
DEFAULT_CONTEXT_WINDOW = 131_072
DEFAULT_MAX_TOKENS = 32_768


def emergency_note(dropped: int) -> str:
    """picoclaw's note for ``forceCompression``."""
    return f"[Emergency compression dropped {dropped} oldest messages due to context limit]"


def _history_positions(draft: Draft) -> list[int]:
    return [i for i, m in enumerate(draft.messages) if m.role not in ("system", "developer")]


def force_compression_cut(history: Sequence[Message]) -> list[int] | None:
    """The history indexes ``forceCompression`` keeps, or None when it does nothing (len ≤ 2).

    Example:
        >>> from compaction.messages.model import Message, TextPart
        >>> u = lambda t: Message("user", (TextPart(t),))
        >>> a = lambda t: Message("assistant", (TextPart(t),))
        >>> force_compression_cut([u("1"), a("r1"), u("2"), a("r2"), u("3")])
        [2, 3, 4]
    """
    n = len(history)
    if n <= 2:
        return None
    turns = parse_turn_boundaries(history)
    mid = turns[len(turns) // 2] if len(turns) >= 2 else find_safe_boundary(history, n // 2)
    if mid <= 0:
        users = [i for i, m in enumerate(history) if is_user_turn_start(m)]
        return users[-1:]
    return list(range(mid, n))


def trim_cut(history: Sequence[Message]) -> int:
    """How many leading history messages one step of ``trimHistoryToFitContextWindow`` drops."""
    turns = parse_turn_boundaries(history)
    if len(turns) >= 2:
        return turns[1]
    if len(turns) == 1 and turns[0] > 0:
        return turns[0]
    return len(history)


def _budget_params() -> tuple[Param, ...]:
    return (
        Param(
            "context_window",
            "int",
            DEFAULT_CONTEXT_WINDOW,
            min=1,
            max=10_000_000,
            help="the model's context window (picoclaw default MaxTokens*4 = 131,072)",
        ),
        Param(
            "max_tokens",
            "int",
            None,
            min=0,
            max=1_000_000,
            help="output reserve; default the context's max output tokens, else 32,768",
        ),
    )


def _max_tokens(draft: Draft, params: dict[str, Any]) -> int:
    if params["max_tokens"] is not None:
        return int(params["max_tokens"])
    return draft.context.max_output_tokens or DEFAULT_MAX_TOKENS


def _fixed_estimate(draft: Draft) -> int:
    """What picoclaw's ``isOverContextBudget`` counts besides the history: est(system messages,
    the top-level system prompt) + est(tool definitions)."""
    messages = (*draft.pinned, *draft.messages)  # system messages set aside are counted too
    total = sum(picoclaw_message_tokens(m) for m in messages if m.role in ("system", "developer"))
    if draft.system:
        total += picoclaw_message_tokens(Message("system", draft.system))
    return total + picoclaw_tooldefs_tokens(draft.context.tools)


def _next_cut(turn_starts: Sequence[int], start: int, length: int) -> int:
    """Where :func:`trim_cut` of ``history[start:]`` ends, from the history's turn starts
    (:func:`parse_turn_boundaries` of the whole history; a message's kind does not depend on
    its neighbours, so the suffix's boundaries are the whole history's from ``start`` on)."""
    first = bisect_left(turn_starts, start)
    turns = turn_starts[first : first + 2]
    if len(turns) >= 2:
        return turns[1]
    if len(turns) == 1 and turns[0] > start:
        return turns[0]
    return length


class PicoclawForceCompress(Strategy):
    """``picoclaw-force-compress``: drop the oldest half of user turns, note it in the summary."""

    id = "picoclaw-force-compress"
    description = (
        "Drop the oldest half of the user turns (a single turn keeps only its last user message)"
        " and append '[Emergency compression dropped N oldest messages…]' to the summary in the"
        " system prompt."
    )
    source = "picoclaw"
    params = (
        Param(
            "avoid_orphans",
            "bool",
            False,
            help="when history has no user message picoclaw may cut inside a tool sequence;"
            " snap the cut to a legal start instead",
        ),
    )

    def run(self, draft: Draft, params: dict[str, Any], summarizer: Summarizer | None) -> None:
        positions = _history_positions(draft)
        history = [draft.messages[p] for p in positions]
        kept = force_compression_cut(history)
        if kept is None:
            return
        if not parse_turn_boundaries(history):
            if params["avoid_orphans"]:
                start = kept[0] + find_legal_start(history[kept[0] :]) if kept else len(history)
                kept = list(range(start, len(history)))
            elif not orphans([history[i] for i in kept]).ok:
                draft.warn(
                    "picoclaw-force-compress: the history has no user message, so picoclaw cuts at"
                    " len/2 and orphans a tool call or result (set avoid_orphans to prevent it)"
                )
        if len(kept) == 1 and kept[0] < len(history) - 1:
            draft.warn(
                "picoclaw-force-compress: single turn: only the last user message is kept, its"
                " assistant and tool messages are dropped"
            )
        keep = {positions[i] for i in kept}
        dropped = [p for p in positions if p not in keep]
        note = emergency_note(len(history) - len(kept))
        existing = system_block(draft, CONTEXT_SUMMARY_PREFIX)
        draft.drop(dropped, "drop", "dropped by emergency compression")
        summary = f"{existing}\n\n{note}" if existing else note
        set_system_block(draft, CONTEXT_SUMMARY_PREFIX, summary, "emergency note in the summary")


class PicoclawTrim(Strategy):
    """``picoclaw-trim``: drop whole user turns from the front until the context fits."""

    id = "picoclaw-trim"
    description = (
        "Drop whole user turns from the front until est(system + history) + tool definitions +"
        " max tokens fits the window (picoclaw's trimHistoryToFitContextWindow)."
    )
    source = "picoclaw"
    params = _budget_params()

    def run(self, draft: Draft, params: dict[str, Any], summarizer: Summarizer | None) -> None:
        window = params["context_window"]
        max_tokens = _max_tokens(draft, params)
        positions = _history_positions(draft)
        history = [draft.messages[p] for p in positions]
        # picoclaw re-estimates est(system + history[start:]) + tools + maxTokens > window after
        # each cut; every message's estimate is taken once and the dropped ones subtracted.
        estimates = [picoclaw_message_tokens(m) for m in history]
        fixed = _fixed_estimate(draft) + max_tokens
        kept = sum(estimates)
        turn_starts = parse_turn_boundaries(history)
        start = 0
        while fixed + kept > window:
            if start >= len(history):
                draft.warn("picoclaw-trim: the context does not fit even with an empty history")
                break
            cut = _next_cut(turn_starts, start, len(history))
            kept -= sum(estimates[start:cut])
            start = cut
        draft.drop(positions[:start], "drop", "turn trimmed to fit the window")


class PicoclawSummarize(Strategy):
    """``picoclaw-summarize``: summarize all but the last ~4 messages into the system prompt."""

    id = "picoclaw-summarize"
    description = (
        "When history has more than 20 messages or its estimate exceeds 75% of the window:"
        " summarize all but the last ~4 messages (cut at a user-turn start); the summary goes"
        " into the system prompt after 'CONTEXT_SUMMARY:'."
    )
    source = "picoclaw"
    params = (
        Param(
            "context_window",
            "int",
            DEFAULT_CONTEXT_WINDOW,
            min=1,
            max=10_000_000,
            help="the model's context window",
        ),
        Param(
            "message_threshold",
            "int",
            20,
            min=0,
            max=100_000,
            help="summarize when history has strictly more messages than this",
        ),
        Param(
            "token_percent",
            "int",
            75,
            min=1,
            max=100,
            help="or when est(history) > window*percent/100",
        ),
        Param(
            "keep_messages",
            "int",
            4,
            min=0,
            max=10_000,
            help="target number of recent messages kept (snapped to a turn start)",
        ),
        Param("force", "bool", False, help="summarize even under both thresholds"),
        Param(
            "keep_previous_summary",
            "bool",
            False,
            help="picoclaw loses the previous summary when it splits more than 10 messages;"
            " merge it instead",
        ),
    )

    def run(self, draft: Draft, params: dict[str, Any], summarizer: Summarizer | None) -> None:
        window = params["context_window"]
        positions = _history_positions(draft)
        history = [draft.messages[p] for p in positions]
        estimate = sum(picoclaw_message_tokens(m) for m in history)
        triggered = (
            len(history) > params["message_threshold"]
            or estimate > window * params["token_percent"] // 100
        )
        if not (triggered or params["force"]):
            return
        keep = params["keep_messages"]
        if len(history) <= keep:
            return
        cut = find_safe_boundary(history, len(history) - keep)
        if cut <= 0:
            return
        valid: list[Message] = []
        omitted = False
        for message in history[:cut]:
            if message.role not in ("user", "assistant"):
                continue
            if message.role == "user" and not is_user_turn_start(message):
                continue
            content = message.text
            if len(content.encode("utf-8")) // 2 > window // 2:
                omitted = True
                continue
            valid.append(Message(message.role, (TextPart(content),)))
        if not valid:
            return
        summarizer = summarizer or FactSummarizer()
        existing = system_block(draft, CONTEXT_SUMMARY_PREFIX)
        if len(valid) > 10:
            mid = _split_point(valid)
            first = summarizer.summarize(valid[:mid], previous=None, prompt=BATCH_PROMPT)
            second = summarizer.summarize(valid[mid:], previous=None, prompt=BATCH_PROMPT)
            halves = [Message("user", (TextPart(s),)) for s in (first, second) if s]
            merged = summarizer.summarize(
                halves,
                previous=existing if params["keep_previous_summary"] else None,
                prompt=MERGE_PROMPT % (first, second),
            )
            summary = merged or f"{first} {second}"
            if existing and not params["keep_previous_summary"]:
                draft.warn(
                    "picoclaw-summarize: more than 10 messages are split and merged without the"
                    " previous summary, which is lost (set keep_previous_summary to keep it)"
                )
        else:
            prompt = BATCH_PROMPT + (f"Existing context: {existing}\n" if existing else "")
            summary = summarizer.summarize(valid, previous=existing, prompt=prompt)
        if not summary:
            summary = _fallback_summary(valid)
        if omitted:
            summary += OMITTED_NOTE
        draft.drop([positions[i] for i in range(cut)], "summarize-range", "summarized")
        set_system_block(draft, CONTEXT_SUMMARY_PREFIX, summary, "summary in the system prompt")


def _split_point(messages: Sequence[Message]) -> int:
    mid = len(messages) // 2
    for i in range(mid, 0, -1):
        if messages[i].role == "user":
            return i
    for i in range(mid, len(messages)):
        if messages[i].role == "user":
            return i
    return mid


def _fallback_summary(messages: Sequence[Message]) -> str:
    items: list[str] = []
    for message in messages:
        text = message.text
        limit = max(200, len(text) // 10)
        cut = text[:limit]
        items.append(f"{message.role}: {cut}" + ("[...]" if len(text) > limit else ""))
    return "Conversation summary: " + " | ".join(items)
