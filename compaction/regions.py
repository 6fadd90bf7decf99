"""Regions of a context window, the markers that identify summaries and placeholders, and budgets.

A turn's tokens are split into the named regions of DESIGN.md §3, stacked in :data:`REGIONS`
order. The split is exact: the regions of a context always add up to its total, and tokens the
provider reported beyond what ctxweb counted go to ``unattributed``, never spread over the others.

Token counts come from a :class:`Counter` (the protocol :class:`compaction.tokens.TokenCounter`
implements), so this module never tokenizes on its own.

Where a message's tokens go (:func:`message_regions`):

- each part's tokens go to the region of its kind: text to the message's text region (``system``
  for system and developer messages, ``user``, ``assistant``; ``summary`` when the message or
  the text block carries a summary marker), tool calls to ``tool_calls``, tool results to
  ``tool_results`` (except the media inside them, which go to ``media``), reasoning to
  ``reasoning``, media to ``media``;
- the message's overhead goes to the region of its role (system and developer to ``system``, user
  to ``user``, assistant to ``assistant``, tool to ``tool_results``), or to ``summary`` for a
  summary message of any role.

Example:
    >>> b = budget(200_000, 32_000, Policy.baseagent())
    >>> b.usable, b.trigger, b.over_trigger(142_800), b.over_trigger(142_801)
    (168000, 142800, False, True)
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Literal, Protocol, TypeAlias

from compaction.messages.model import (
    Context,
    MediaPart,
    Message,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolDefinition,
    ToolResultPart,
)

__all__ = [
    "ANTHROPIC_CLEARED_MARKER",
    "BASEAGENT_SUMMARY_PREFIX",
    "CLAUDE_CODE_SUMMARY_PREFIX",
    "CODEX_SUMMARY_PREFIX",
    "CTXWEB_SUMMARY_MARKER",
    "PICOCLAW_SUMMARY_PREFIX",
    "PLACEHOLDER_PATTERNS",
    "PRUNE_MARKER",
    "REGIONS",
    "SUMMARY_MARKERS",
    "USED_REGIONS",
    "Budget",
    "CountedMessage",
    "Counter",
    "Placeholder",
    "PlaceholderKind",
    "PlaceholderPattern",
    "Policy",
    "Region",
    "RegionMemo",
    "RegionTotals",
    "SummaryMarker",
    "TriggerKind",
    "budget",
    "context_regions",
    "is_summary",
    "is_summary_text",
    "message_regions",
    "part_placeholder",
    "placeholder_of",
    "region_of_part",
    "sum_regions",
    "system_regions",
]

Region: TypeAlias = Literal[
    "system",
    "tools",
    "summary",
    "user",
    "assistant",
    "tool_calls",
    "tool_results",
    "reasoning",
    "media",
    "unattributed",
    "reserve",
    "free",
]

#: Every region, bottom to top: the used regions, then the output reserve and the free space.
REGIONS: tuple[Region, ...] = (
    "system",
    "tools",
    "summary",
    "user",
    "assistant",
    "tool_calls",
    "tool_results",
    "reasoning",
    "media",
    "unattributed",
    "reserve",
    "free",
)

#: The regions that hold a turn's tokens; they add up to its total.
USED_REGIONS: tuple[Region, ...] = REGIONS[:10]


# --- the counter this module needs ------------------------------------------------------------


class CountedMessage(Protocol):
    """A message's count: one number per part plus the message's own overhead."""

    @property
    def parts(self) -> tuple[int, ...]: ...

    @property
    def overhead(self) -> int: ...

    @property
    def total(self) -> int: ...


class Counter(Protocol):
    """What :mod:`compaction.tokens`' ``TokenCounter`` offers; regions depend on this, not on it."""

    @property
    def REQUEST_OVERHEAD(self) -> int:
        """Tokens every request costs beyond its messages (priming the reply)."""
        ...

    def count_part(self, part: Part) -> int: ...

    def count_message(self, message: Message) -> CountedMessage: ...

    def count_tools(self, tools: tuple[ToolDefinition, ...]) -> int: ...

    def count_system(self, parts: tuple[Part, ...]) -> int: ...

    def count_text(self, text: str) -> int: ...


# --- summary markers --------------------------------------------------------------------------

#: BaseAgent's ``SUMMARY_PREFIX`` (seed-strategies §1.4), concatenated directly with the summary.
BASEAGENT_SUMMARY_PREFIX = (
    "Another language model started to solve this problem and produced a summary of its thinking "
    "process. You also have access to the state of the tools that were used. Use this to build on "
    "the work that has already been done and avoid duplicating work.\n\n"
    "Here is the summary from the previous context:\n\n"
)

#: Codex's ``SUMMARY_PREFIX`` (seed-strategies §1b): note the double space before "assist".
CODEX_SUMMARY_PREFIX = (
    "Another language model started to solve this problem and produced a summary of its thinking "
    "process. You also have access to the state of the tools that were used by that language "
    "model. Use this to build on the work that has already been done and avoid duplicating work. "
    "Here is the summary produced by the other language model, use the information in this "
    "summary to  assist with your own analysis:"
)

#: picoclaw's summary block inside the system prompt (seed-strategies §2.1).
PICOCLAW_SUMMARY_PREFIX = (
    "CONTEXT_SUMMARY: The following is an approximate summary of prior conversation for reference "
    "only. It may be incomplete or outdated — always defer to explicit instructions.\n\n"
)

#: How Claude Code's compact summary message (``isCompactSummary``) begins.
CLAUDE_CODE_SUMMARY_PREFIX = "This session is being continued from a previous conversation"

#: ctxweb's own summary marker: the first line of every summary ctxweb writes.
CTXWEB_SUMMARY_MARKER = "[CTXWEB_SUMMARY]"


@dataclass(frozen=True)
class SummaryMarker:
    """One known way a message says it is a summary.

    ``prefix``: the message (or a text block) starts with this text, after leading whitespace.
    ``extra_key``: the message's ``extra`` maps this key to ``extra_value`` (records that are
    summaries by their metadata: Claude Code's ``isCompactSummary``, Codex's ``compacted``).
    """

    source: str
    prefix: str | None = None
    extra_key: str | None = None
    extra_value: object = True


#: Every known summary marker. Prefixes are byte for byte the seeds' own.
SUMMARY_MARKERS: tuple[SummaryMarker, ...] = (
    SummaryMarker("llm4s", prefix="[HISTORY_SUMMARY]"),
    SummaryMarker("baseagent", prefix=BASEAGENT_SUMMARY_PREFIX),
    SummaryMarker("codex", prefix=CODEX_SUMMARY_PREFIX),
    SummaryMarker("copaw", prefix="<previous-summary>"),
    SummaryMarker("picoclaw", prefix="CONTEXT_SUMMARY:"),
    SummaryMarker("claude-code", prefix=CLAUDE_CODE_SUMMARY_PREFIX),
    SummaryMarker("claude-code", extra_key="isCompactSummary"),
    # A Codex rollout's ``{"type": "compacted", ...}`` record, as the adapters keep it in extra.
    SummaryMarker("codex", extra_key="type", extra_value="compacted"),
    SummaryMarker("codex", extra_key="compacted"),
    # OpenCode marks its summary assistant message ``summary: true``.
    SummaryMarker("opencode", extra_key="summary"),
    SummaryMarker("ctxweb", prefix=CTXWEB_SUMMARY_MARKER),
)

_PREFIXES = tuple(m.prefix for m in SUMMARY_MARKERS if m.prefix is not None)
_EXTRA_MARKERS = tuple(
    (m.extra_key, m.extra_value) for m in SUMMARY_MARKERS if m.extra_key is not None
)
# picoclaw joins its system prompt blocks with "\n\n---\n\n" when a format takes one string, so
# its summary block can sit in the middle of a system text: it starts at a line start.
_EMBEDDED_SUMMARY = re.compile(r"(?m)^CONTEXT_SUMMARY: ")


def is_summary_text(text: str) -> bool:
    """Whether ``text`` starts (after leading whitespace) with a known summary prefix.

    Example:
        >>> is_summary_text("[HISTORY_SUMMARY]\\nBlock1: ...")
        True
    """
    return text.lstrip().startswith(_PREFIXES)


def is_summary(message: Message) -> bool:
    """Whether ``message`` is a summary: a summary prefix on its text, or a summary record.

    Example:
        >>> from compaction.messages.model import Message, TextPart
        >>> is_summary(Message("user", (TextPart("<previous-summary>\\nGoal...\\n"),)))
        True
        >>> is_summary(Message("user", (TextPart("hi"),), extra={"isCompactSummary": True}))
        True
    """
    for key, value in _EXTRA_MARKERS:
        if key in message.extra and message.extra[key] == value:
            return True
    return is_summary_text(message.text)


def _summary_start(text: str) -> int | None:
    """Where a summary starts inside a system text, or None."""
    if is_summary_text(text):
        return 0
    found = _EMBEDDED_SUMMARY.search(text)
    return found.start() if found else None


# --- placeholders -----------------------------------------------------------------------------

PlaceholderKind: TypeAlias = Literal["cleared", "truncated", "externalized"]

#: BaseAgent's and OpenCode's cleared tool output.
PRUNE_MARKER = "[Old tool result content cleared]"

#: What ctxweb's ``anthropic-clear-tool-uses`` strategy leaves in a cleared tool result. Anthropic's
#: server-side context editing does not put its placeholder text in the request we see, so
#: ctxweb chooses this one and recognizes it.
ANTHROPIC_CLEARED_MARKER = "[cleared to save context]"


@dataclass(frozen=True)
class Placeholder:
    """What a strategy left in place of content: how it was pruned, and where it went.

    ``artifact_id`` is set when the full content was kept somewhere: a ctxweb artifact id
    (``source == "ctxweb"``), an LLM4S artifact-store key, or the file path CoPaw saved it to.
    """

    kind: PlaceholderKind
    source: str
    artifact_id: str | None = None


@dataclass(frozen=True)
class PlaceholderPattern:
    """One placeholder as a regular expression; group ``artifact`` (if any) is the artifact id."""

    kind: PlaceholderKind
    source: str
    pattern: re.Pattern[str]
    whole: bool = False  # the text must be exactly the placeholder (stripped), not contain it


#: Every known placeholder, most specific first (an externalization wins over the truncation
#: marker that CoPaw writes beside it).
PLACEHOLDER_PATTERNS: tuple[PlaceholderPattern, ...] = (
    PlaceholderPattern(
        "externalized", "ctxweb", re.compile(r"\[EXTERNALIZED:(?P<artifact>[^\s\]|]+)\]")
    ),
    PlaceholderPattern(
        "externalized",
        "llm4s",
        re.compile(r"\[EXTERNALIZED: content_(?P<artifact>[0-9a-f]{64}) \| [A-Z]+ \| [^\]]*\]"),
    ),
    PlaceholderPattern(
        "externalized", "copaw", re.compile(r"\[Full content saved to: (?P<artifact>[^\]]+)\]")
    ),
    PlaceholderPattern(
        "externalized", "copaw", re.compile(r"The full content is saved to the file")
    ),
    PlaceholderPattern("cleared", "baseagent", re.compile(re.escape(PRUNE_MARKER)), whole=True),
    PlaceholderPattern(
        "cleared", "anthropic", re.compile(re.escape(ANTHROPIC_CLEARED_MARKER)), whole=True
    ),
    PlaceholderPattern(
        "truncated", "baseagent", re.compile(r"\n\.\.\.\d+ tokens truncated\.\.\.\n")
    ),
    PlaceholderPattern("truncated", "codex", re.compile(r"…\d+ tokens truncated…")),
    PlaceholderPattern("truncated", "reme", re.compile(r"<<<TRUNCATED>>>")),
    PlaceholderPattern(
        "truncated", "codex", re.compile(r"\[\.\.\. (omitted \d+ of \d+ lines|output truncated)")
    ),
    # LLM4S stores nothing for binary output despite the wording: the content is gone.
    PlaceholderPattern("truncated", "llm4s", re.compile(r"\[BINARY CONTENT - \d+ bytes - ")),
    PlaceholderPattern(
        "truncated",
        "llm4s",
        re.compile(
            r"\.\.\. ?\[(\+-?\d+ (items|words|additional stack frames)"
            r"|collapsed \d+ repeated/verbose log lines)\] ?\.\.\."
        ),
    ),
    PlaceholderPattern("truncated", "opencode", re.compile(r"\n\[truncated\]\Z")),
)


def placeholder_of(text: str) -> Placeholder | None:
    """The placeholder ``text`` carries, if a strategy pruned it.

    Example:
        >>> placeholder_of("[EXTERNALIZED:art_12]")
        Placeholder(kind='externalized', source='ctxweb', artifact_id='art_12')
        >>> placeholder_of("head\\n\\n...120 tokens truncated...\\n\\ntail").kind
        'truncated'
        >>> placeholder_of("plain output") is None
        True
    """
    for p in PLACEHOLDER_PATTERNS:
        if p.whole:
            if p.pattern.fullmatch(text.strip()) is None:
                continue
            return Placeholder(p.kind, p.source)
        found = p.pattern.search(text)
        if found is None:
            continue
        artifact = found.groupdict().get("artifact")
        return Placeholder(p.kind, p.source, artifact.strip() if artifact else None)
    return None


def part_placeholder(part: Part) -> Placeholder | None:
    """The placeholder in a text part or a tool result's text, else None."""
    if isinstance(part, TextPart):
        return placeholder_of(part.text)
    if isinstance(part, ToolResultPart):
        return placeholder_of(part.text)
    return None


# --- regions of messages and contexts ---------------------------------------------------------


def _text_region(message: Message, summary: bool) -> Region:
    if summary:
        return "summary"
    if message.role in ("system", "developer"):
        return "system"
    if message.role == "tool":
        return "tool_results"
    return "user" if message.role == "user" else "assistant"


def region_of_part(message: Message, part: Part) -> Region:
    """The region ``part`` of ``message`` belongs to (a tool result's media aside).

    Example:
        >>> from compaction.messages.model import Message, TextPart, ToolCallPart
        >>> call = ToolCallPart("c1", "read", "{}")
        >>> region_of_part(Message("assistant", (call,)), call)
        'tool_calls'
    """
    if isinstance(part, ToolCallPart):
        return "tool_calls"
    if isinstance(part, ToolResultPart):
        return "tool_results"
    if isinstance(part, ReasoningPart):
        return "reasoning"
    if isinstance(part, MediaPart):
        return "media"
    return _text_region(message, is_summary(message) or is_summary_text(part.text))


def _zeros() -> dict[str, int]:
    return dict.fromkeys(USED_REGIONS, 0)


def _split(total: int, share: int) -> tuple[int, int]:
    """``total`` as (the rest, ``share`` capped to it), both non-negative."""
    taken = max(0, min(share, total))
    return total - taken, taken


def message_regions(message: Message, counter: Counter) -> dict[str, int]:
    """The tokens of ``message`` by region; only the regions it touches, summing to its total.

    Example:
        >>> from compaction.messages.model import Message, TextPart
        >>> class Chars:
        ...     REQUEST_OVERHEAD = 3
        ...     def count_message(self, m):
        ...         from types import SimpleNamespace as NS
        ...         return NS(parts=(len(m.text),), overhead=4, total=len(m.text) + 4)
        >>> message_regions(Message("user", (TextPart("hello"),)), Chars())
        {'user': 9}
    """
    count = counter.count_message(message)
    out: dict[str, int] = {}

    def add(region: str, tokens: int) -> None:
        if tokens:
            out[region] = out.get(region, 0) + tokens

    summary = is_summary(message)
    for part, tokens in zip(message.parts, count.parts, strict=True):
        if isinstance(part, ToolResultPart):
            media = sum(counter.count_part(p) for p in part.content if isinstance(p, MediaPart))
            rest, media = _split(tokens, media)
            add("tool_results", rest)
            add("media", media)
        elif isinstance(part, TextPart) and message.role in ("system", "developer") and not summary:
            start = _summary_start(part.text)
            share = tokens if start == 0 else 0
            if start:
                share = counter.count_text(part.text[start:])
            rest, share = _split(tokens, share)
            add("system", rest)
            add("summary", share)
        else:
            add(region_of_part(message, part), tokens)
    add(_text_region(message, summary), count.overhead)
    return out


def sum_regions(parts: Iterable[Mapping[str, int]]) -> dict[str, int]:
    """Add region dicts (stored per message, system, tools) into one, in :data:`REGIONS` order.

    The used regions are always present (zeros included); ``reserve`` and ``free`` appear only if
    an input has them. An unknown region name is an error.

    Example:
        >>> sum_regions([{"user": 3}, {"user": 2, "tools": 7}])["user"]
        5
    """
    total = _zeros()
    for regions in parts:
        for name, tokens in regions.items():
            if name not in REGIONS:
                raise ValueError(f"unknown region {name!r}")
            total[name] = total.get(name, 0) + tokens
    return {name: total[name] for name in REGIONS if name in total}


@dataclass(frozen=True)
class RegionTotals:
    """A context's tokens by region.

    ``counted`` is what ctxweb counted; ``unattributed`` is what the provider reported beyond it
    (0 without a report, or when the report is not larger); ``total = counted + unattributed``
    and always equals the sum of ``regions``, which lists every used region in order.
    """

    regions: dict[str, int]
    counted: int
    reported: int | None = None
    unattributed: int = 0
    total: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "total", self.counted + self.unattributed)

    def stacked(self, budget: Budget) -> dict[str, int]:
        """The regions plus ``reserve`` (window minus usable) and ``free`` (usable left), for
        the stacked chart. ``free`` is 0 once the total passes the usable limit."""
        return {
            **self.regions,
            "reserve": budget.window - budget.usable,
            "free": max(0, budget.usable - self.total),
        }


def system_regions(parts: tuple[Part, ...], counter: Counter) -> dict[str, int]:
    """The tokens of a top-level system prompt by region: ``system``, and ``summary`` for a
    block that is a summary (picoclaw's ``CONTEXT_SUMMARY:``). Empty parts count nothing.

    Example:
        >>> system_regions((), None)
        {}
    """
    if not parts:
        return {}
    tokens = counter.count_system(parts)
    share = sum(
        counter.count_part(p) for p in parts if isinstance(p, TextPart) and is_summary_text(p.text)
    )
    rest, share = _split(tokens, share)
    out = {"system": rest}
    if share:
        out["summary"] = share
    return out


class RegionMemo:
    """Each message's regions (:func:`message_regions`), remembered by message identity.

    A plan's result keeps most of its input's message objects; given one memo, the
    :func:`context_regions` of the input and of the result split each shared message once.
    Messages are frozen, so an object's regions never change; the memo holds the messages it
    remembers (their ids cannot be reused meanwhile). Use one memo with one counter, for one job.

    Example:
        >>> from compaction.messages.model import Message, TextPart
        >>> class Chars:
        ...     REQUEST_OVERHEAD = 3
        ...     def count_message(self, m):
        ...         from types import SimpleNamespace as NS
        ...         return NS(parts=(len(m.text),), overhead=4, total=len(m.text) + 4)
        >>> memo, message = RegionMemo(), Message("user", (TextPart("hello"),))
        >>> memo.regions(message, Chars()) is memo.regions(message, Chars())
        True
    """

    def __init__(self) -> None:
        self._known: dict[int, tuple[Message, Mapping[str, int]]] = {}

    def regions(self, message: Message, counter: Counter) -> Mapping[str, int]:
        """:func:`message_regions` of ``message``, split once per message object."""
        known = self._known.get(id(message))
        if known is not None and known[0] is message:
            return known[1]
        regions = message_regions(message, counter)
        self._known[id(message)] = (message, regions)
        return regions


def context_regions(
    context: Context,
    counter: Counter,
    *,
    reported_input_tokens: int | None = None,
    memo: RegionMemo | None = None,
) -> RegionTotals:
    """Split ``context``'s tokens into regions.

    ``system`` holds the top-level system parts, system and developer messages, and the
    counter's ``REQUEST_OVERHEAD`` (the per-request priming tokens belong to no message; the
    system prompt is the request's fixed cost, so that is where they are shown). A system block
    that is a summary (picoclaw's ``CONTEXT_SUMMARY:``) goes to ``summary``. ``tools`` is the
    tool definitions' count. Empty system and tools are not counted at all.

    With ``reported_input_tokens`` above the counted total, the difference is ``unattributed``.
    With a ``memo`` (for this counter), a message object it has seen is not split again.

    Example:
        >>> from compaction.messages.model import Context
        >>> class Zero:
        ...     REQUEST_OVERHEAD = 3
        >>> context_regions(Context("openai-chat", ()), Zero(), reported_input_tokens=10).total
        10
    """
    head: dict[str, int] = {"system": counter.REQUEST_OVERHEAD}
    if context.tools:
        head["tools"] = counter.count_tools(context.tools)
    split = memo.regions if memo is not None else message_regions
    regions = sum_regions(
        [
            head,
            system_regions(context.system, counter),
            *(split(m, counter) for m in context.messages),
        ]
    )
    counted = sum(regions.values())
    unattributed = 0
    if reported_input_tokens is not None and reported_input_tokens > counted:
        unattributed = reported_input_tokens - counted
    regions["unattributed"] = unattributed
    return RegionTotals(regions, counted, reported_input_tokens, unattributed)


# --- policies and budgets ---------------------------------------------------------------------

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
