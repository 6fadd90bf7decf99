"""nanobot's history trim (HKUDS/nanobot PR #2317, ``trim_history_for_budget``): ``nanobot-trim``.

From the second LLM call of a user turn on, old history (between the system message and the
current user message) is trimmed message by message from the oldest until its estimate fits
``context_budget_tokens``, then snapped to a legal start so no tool result loses its call. The
system message and the current turn are never touched (``docs/seed-strategies.md`` §4).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from compaction.messages.model import Message
from compaction.strategies.base import Draft, Param, Strategy
from compaction.summarizers import Summarizer
from compaction.tokens import TokenCounter, get_tokenizer
from compaction.tokens.estimators import (
    nanobot_message_tokens,
    nanobot_payload_tokens,
    nanobot_payloads,
)
from compaction.turns import find_legal_start, is_user_turn_start

__all__ = ["NanobotTrim", "clamp_budget", "fallback_tokens", "trim_history_for_budget"]


def clamp_budget(value: int) -> int:
    """AgentLoop's clamp: ``max(value, 500)`` when positive, else 0 (off)."""
    return max(value, 500) if value > 0 else 0


def fallback_tokens(message: Message) -> int:
    """nanobot's estimate when tiktoken fails: ``max(4, len(payload)//4 + 4)``."""
    return nanobot_message_tokens(message, None)


@functools.lru_cache(maxsize=1)
def _cl100k_estimate() -> _Cl100k:
    """nanobot's tokenizer, cl100k_base, its counts kept by content for the process."""
    return _Cl100k(TokenCounter(get_tokenizer("cl100k_base")))


class _Cl100k:
    """cl100k through a :class:`TokenCounter` (its cache: each payload encoded once per process),
    as the ``tokenizer`` nanobot's estimator takes."""

    name = "cl100k_base"

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter

    def count(self, text: str) -> int:
        return self.counter.count_text(text)

    def encode(self, text: str) -> list[int]:
        return self.counter.tokenizer.encode(text)

    def __call__(self, message: Message) -> int:
        return nanobot_message_tokens(message, self)

    def estimates(self, messages: Sequence[Message]) -> Callable[[Message], int]:
        """The estimate of each of ``messages``, their payloads encoded at once, on every core
        (:meth:`TokenCounter.prime`); another message is estimated when asked."""
        payloads = {id(m): (m, nanobot_payloads(m)) for m in messages}
        self.counter.prime([p for _, found in payloads.values() for p in found])

        def estimate(message: Message) -> int:
            known = payloads.get(id(message))
            if known is None or known[0] is not message:
                return self(message)
            return nanobot_payload_tokens(known[1], self)

        return estimate


def _dropped(
    messages: Sequence[Message],
    turn_start_index: int,
    iteration: int,
    budget: int,
    estimate: Callable[[Message], int],
) -> int | None:
    """How many old messages (from index 1) the trim drops, or None when it returns the input."""
    if budget <= 0 or iteration <= 1:
        return None
    if turn_start_index <= 1:
        return None
    old = messages[1:turn_start_index]
    counts = [estimate(m) for m in old]
    total = sum(counts)
    if total <= budget:
        return None
    cut = 0
    while cut < len(old) and total > budget:
        total -= counts[cut]
        cut += 1
    return cut + find_legal_start(old[cut:])


def trim_history_for_budget(
    messages: Sequence[Message],
    turn_start_index: int,
    iteration: int,
    budget: int,
    estimate: Callable[[Message], int],
) -> Sequence[Message]:
    """nanobot's ``trim_history_for_budget``; returns ``messages`` itself when nothing is trimmed.

    ``messages[0]`` is taken as the system message and kept (even if it is not one);
    ``messages[turn_start_index:]`` is the current turn, never trimmed. A new list otherwise.

    Example:
        >>> trim_history_for_budget([], 0, 2, 0, fallback_tokens)
        []
    """
    dropped = _dropped(messages, turn_start_index, iteration, budget, estimate)
    if dropped is None:
        return messages
    return [*messages[:1], *messages[1 + dropped : turn_start_index], *messages[turn_start_index:]]


class NanobotTrim(Strategy):
    """``nanobot-trim``: trim old history to a token budget, never the current user turn."""

    id = "nanobot-trim"
    description = (
        "Trim old history message by message from the oldest until it fits context_budget_tokens"
        " (clamped to at least 500), never the system message or the current user turn, then"
        " drop up to the last orphaned tool result."
    )
    source = "nanobot"
    params = (
        Param(
            "budget",
            "int",
            4000,
            min=0,
            max=10_000_000,
            help="context_budget_tokens for old history (nanobot's default 0 is off; its docs"
            " call 4000 conservative); clamped to max(value, 500) when positive",
        ),
        Param(
            "iteration",
            "int",
            2,
            min=1,
            max=10_000,
            help="LLM call number within the user turn; the first call is never trimmed",
        ),
        Param(
            "estimator",
            "str",
            "tiktoken",
            choices=("tiktoken", "fallback"),
            help="cl100k tiktoken, or nanobot's fallback len(payload)//4 + 4",
        ),
    )

    def run(self, draft: Draft, params: dict[str, Any], summarizer: Summarizer | None) -> None:
        messages = draft.messages
        # nanobot's list starts with its system message; a top-level system prompt, or system
        # messages set aside as configuration, play that role, so the first message then belongs
        # to the old history.
        offset = 0 if draft.system or draft.pinned else 1
        starts = [i for i, m in enumerate(messages) if is_user_turn_start(m)]
        if not starts:
            return
        sentinel = [Message("system", ())] if offset == 0 else []
        view = [*sentinel, *messages]
        turn_start = starts[-1] + len(sentinel)
        estimate: Callable[[Message], int] = fallback_tokens
        if params["estimator"] == "tiktoken":
            estimate = _cl100k_estimate().estimates(view[1:turn_start])
        dropped = _dropped(
            view, turn_start, params["iteration"], clamp_budget(params["budget"]), estimate
        )
        if not dropped:
            return
        first = 1 - len(sentinel)
        draft.drop(range(first, first + dropped), "drop", "old history trimmed to the budget")
