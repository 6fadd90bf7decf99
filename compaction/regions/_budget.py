"""Budgets: when compaction triggers as each seed defines it (:class:`Policy`), and a session's
window, reserve, usable limit and trigger in tokens (:func:`budget`).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Literal, TypeAlias

TriggerKind: TypeAlias = Literal["ratio_of_window", "ratio_of_usable", "tokens"]


@dataclass(frozen=True)
class Policy:
    """When compaction triggers, as one seed defines it.

    ``trigger``/``value``: the threshold is ``value`` times the window, times the usable limit,
    or ``value`` tokens; it is rounded down to whole tokens, as every seed does (``int()``,
    integer division), which keeps comparisons with integer totals exact. ``strict``: over when
    the total is ``>`` the threshold (else ``>=``). ``headroom``: tokens kept free beyond the
    output reserve; ``headroom_of_reserve`` makes it ``min(that, reserve)`` (OpenCode).
    ``scope`` says what the seed compares: the whole ``context``, or the ``history`` only
    (picoclaw's summarize, nanobot). ``max_messages``: also over past this many messages.
    """

    name: str
    trigger: TriggerKind
    value: float
    strict: bool = True
    headroom: int = 0
    headroom_of_reserve: int | None = None
    scope: Literal["context", "history"] = "context"
    max_messages: int | None = None

    @classmethod
    def baseagent(cls) -> Policy:
        """BaseAgent: estimate ``> 0.85 × (window − 32K)`` (strict; §1.1, 142,800 at 200K)."""
        return cls("baseagent", "ratio_of_usable", 0.85, strict=True)

    @classmethod
    def copaw(cls, ratio: float = 0.75) -> Policy:
        """CoPaw: ``total >= int(0.75 × window)`` (§5.1, 98,304 at 131,072)."""
        return cls("copaw", "ratio_of_window", ratio, strict=False)

    @classmethod
    def picoclaw_summarize(cls, percent: int = 75, message_threshold: int = 20) -> Policy:
        """picoclaw after a turn: ``len(history) > 20`` or ``est(history) > window × 75 / 100``."""
        return cls(
            "picoclaw-summarize",
            "ratio_of_window",
            percent / 100,
            strict=True,
            scope="history",
            max_messages=message_threshold,
        )

    @classmethod
    def picoclaw_compress(cls) -> Policy:
        """picoclaw before a call: ``est(msgs) + tools + max_tokens > window`` (strict)."""
        return cls("picoclaw-compress", "ratio_of_usable", 1.0, strict=True)

    @classmethod
    def opencode(cls, reserved: int | None = None) -> Policy:
        """OpenCode: ``count >= context − maxOutput − reserved``.

        ``reserved`` is the configured ``compaction.reserved``, else ``min(20K, maxOutput)``.
        """
        if reserved is None:
            return cls("opencode", "ratio_of_usable", 1.0, strict=False, headroom_of_reserve=20_000)
        return cls("opencode", "ratio_of_usable", 1.0, strict=False, headroom=reserved)

    @classmethod
    def llm4s(cls, budget_tokens: int) -> Policy:
        """LLM4S: history compression when ``count > budget`` (its trim keeps 8% headroom)."""
        return cls("llm4s", "tokens", budget_tokens, strict=True)

    @classmethod
    def nanobot(cls, budget_tokens: int) -> Policy:
        """nanobot: old history (not the current turn) trimmed when ``> context_budget_tokens``."""
        return cls("nanobot", "tokens", budget_tokens, strict=True, scope="history")

    @classmethod
    def ctxweb(cls, ratio: float = 0.8) -> Policy:
        """ctxweb's default: above 80% of usable (strict). Below BaseAgent's 85% so a summary
        call still fits, above CoPaw's 75% of the window so short sessions are left alone."""
        return cls("ctxweb", "ratio_of_usable", ratio, strict=True)


@dataclass(frozen=True)
class Budget:
    """A session's window, reserve, usable limit and compaction trigger, in tokens."""

    window: int
    reserve: int
    headroom: int
    usable: int
    trigger: int
    strict: bool = True
    max_messages: int | None = None

    def fill(self, total: int) -> float:
        """``total`` as a share of the usable limit (1.0 = full; infinite if nothing is usable)."""
        if self.usable <= 0:
            return float("inf") if total > 0 else 0.0
        return total / self.usable

    def over_trigger(self, total: int, *, messages: int | None = None) -> bool:
        """Whether ``total`` passes the trigger, with the policy's own comparison.

        A window of 0 means unknown and never triggers. ``messages`` (the history's length) also
        triggers past the policy's ``max_messages``
        (picoclaw summarizes above 20 messages whatever their size).
        """
        if self.window <= 0:
            return False  # an unknown window never overflows (OpenCode's context == 0)
        if messages is not None and self.max_messages is not None and messages > self.max_messages:
            return True
        return total > self.trigger if self.strict else total >= self.trigger


def budget(window: int, reserve: int, policy: Policy) -> Budget:
    """The budget of a ``window`` with an output ``reserve`` under ``policy``.

    ``usable = window − reserve − headroom``, never negative.

    Example:
        >>> budget(100_000, 32_000, Policy.opencode(reserved=12_000)).usable
        56000
    """
    headroom = policy.headroom
    if policy.headroom_of_reserve is not None:
        headroom = min(policy.headroom_of_reserve, reserve)
    usable = max(0, window - reserve - headroom)
    base = {"ratio_of_window": window, "ratio_of_usable": usable, "tokens": 1}[policy.trigger]
    trigger = int(Fraction(base) * Fraction(repr(policy.value)))
    return Budget(window, reserve, headroom, usable, trigger, policy.strict, policy.max_messages)
