"""What a replay measures of each sent context, incrementally: regions and tokens remembered per
message object, each call building on the previous one's shared prefix; and the facts a context
shows, remembered per message object too.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from compaction.errors import FormatError
from compaction.facts import Fact, part_facts
from compaction.messages import message_identity
from compaction.messages.model import (
    Context,
    Message,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolDefinition,
    ToolResultPart,
)
from compaction.regions import REGIONS, RegionMemo, system_regions
from compaction.tokens import TokenCounter


def _marked(value: Any) -> bool:
    """Whether ``value`` (a message, part or tool) or a part inside it carries ``cache_control``."""
    extra = getattr(value, "extra", None)
    if isinstance(extra, Mapping) and "cache_control" in extra:
        return True
    if isinstance(value, Message):
        return any(_marked(p) for p in value.parts)
    if isinstance(value, ToolResultPart):
        return any(_marked(p) for p in value.content)
    return False


@dataclass(frozen=True)
class Head:
    """What comes before the messages in a request: the request overhead, tools, system prompt.

    ``tools_end`` and ``end`` are token positions: after the overhead and tools, and after the
    system prompt too (Anthropic's order: tools, system, messages). ``breakpoints`` are the
    positions of the cache breakpoints the tools and the system prompt carry.
    """

    system: tuple[Part, ...]
    tools: tuple[ToolDefinition, ...]
    regions: Mapping[str, int]
    tools_end: int
    end: int
    breakpoints: tuple[int, ...]


@dataclass(frozen=True)
class Sent:
    """One call's sent context, measured.

    ``cumulative[i]`` is the tokens of the first ``i`` messages; ``regions`` the messages'
    regions (zeros possible); ``marked`` the indices of the messages with a cache breakpoint.
    """

    context: Context
    head: Head
    cumulative: list[int]
    regions: dict[str, int]
    marked: list[int]

    @property
    def total(self) -> int:
        """The call's tokens, as ingest counts a turn."""
        return self.head.end + self.cumulative[-1]

    def all_regions(self, unattributed: int = 0) -> dict[str, int]:
        """The call's regions with tokens, adding up to :attr:`total` plus ``unattributed``
        (tokens the provider reported beyond ctxweb's count), in :data:`REGIONS` order."""
        out = dict(self.head.regions)
        for name, tokens in self.regions.items():
            out[name] = out.get(name, 0) + tokens
        out["unattributed"] = unattributed
        return {name: out[name] for name in REGIONS if out.get(name)}

    def breakpoints(self) -> list[int]:
        """The token positions of the call's cache breakpoints, ascending (a breakpoint inside a
        message counts through the whole message)."""
        end, cumulative = self.head.end, self.cumulative
        return [*self.head.breakpoints, *(end + cumulative[i + 1] for i in self.marked)]

    def shared_with(self, previous: Sent, messages: int) -> int:
        """The leading tokens this call shares with ``previous``, given how many leading
        ``messages`` they share: nothing when the tools changed (they come first), the tools
        when only the system prompt did."""
        head, other = self.head, previous.head
        if head.tools is not other.tools and head.tools != other.tools:
            return 0
        if head.system is not other.system and head.system != other.system:
            return head.tools_end
        return head.end + self.cumulative[messages]


def strict_prefix(a: Sequence[Message], b: Sequence[Message]) -> int:
    """How many leading messages ``a`` and ``b`` share: the same objects, else equal ones."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:  # tuples compare by identity first, in C
        return n
    for i in range(n):
        x, y = a[i], b[i]
        if x is not y and x != y:
            return i
    return n


class Meter:
    """Measures sent contexts with one counter, remembering each message object it has seen.

    A message's regions, tokens, cache breakpoint and facts are computed once per object (the
    meter holds the objects, so their ids are not reused while it lives); a call's measure
    starts from the previous call's, so a call costs its new messages, not its whole history.
    """

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        #: every message's regions, shared with the plans (which split the same messages)
        self.memo = RegionMemo()
        self._known: dict[int, tuple[Message, Mapping[str, int], int, bool]] = {}
        self._facts: dict[int, tuple[Message, frozenset[Fact]]] = {}
        self._identities: dict[int, tuple[Message, str]] = {}

    def identity(self, message: Message) -> str:
        """What ``message`` says (:func:`~compaction.messages.message_identity`: cache
        breakpoints and how it was sent aside), once per object."""
        known = self._identities.get(id(message))
        if known is None or known[0] is not message:
            try:
                digest = message_identity(message)
            except FormatError:  # extra that is not JSON: equal to no other message
                digest = f"object {id(message)}"
            known = (message, digest)
            self._identities[id(message)] = known
        return known[1]

    def same_from(self, a: Sequence[Message], b: Sequence[Message], start: int) -> int:
        """How many leading messages ``a`` and ``b`` share, given that the first ``start`` are
        the same, comparing what they say past it (as managed mode matches a prefix)."""
        n = min(len(a), len(b))
        identity = self.identity
        i = start
        while i < n and (a[i] is b[i] or identity(a[i]) == identity(b[i])):
            i += 1
        return i

    def starts_with(self, messages: tuple[Message, ...], prefix: tuple[Message, ...]) -> bool:
        """Whether ``messages`` starts with what ``prefix`` says (the same objects, else
        messages that say the same: the agent moves its cache breakpoints)."""
        if len(messages) < len(prefix):
            return False
        if messages[: len(prefix)] == prefix:
            return True
        return self.same_from(messages, prefix, strict_prefix(messages, prefix)) == len(prefix)

    def _message(self, message: Message) -> tuple[Message, Mapping[str, int], int, bool]:
        known = self._known.get(id(message))
        if known is None or known[0] is not message:
            regions = self.memo.regions(message, self.counter)
            known = (message, regions, sum(regions.values()), _marked(message))
            self._known[id(message)] = known
        return known

    def _head(self, context: Context, previous: Head | None) -> Head:
        system, tools = context.system, context.tools
        if (
            previous is not None
            and (system is previous.system or system == previous.system)
            and (tools is previous.tools or tools == previous.tools)
        ):
            return previous
        counter = self.counter
        regions: dict[str, int] = {"system": counter.REQUEST_OVERHEAD}
        tools_tokens = counter.count_tools(tools) if tools else 0
        if tools_tokens:
            regions["tools"] = tools_tokens
        for name, tokens in system_regions(system, counter).items():
            regions[name] = regions.get(name, 0) + tokens
        tools_end = counter.REQUEST_OVERHEAD + tools_tokens
        end = sum(regions.values())
        breakpoints: list[int] = []
        if any(_marked(t) for t in tools):
            breakpoints.append(tools_end)
        if any(_marked(p) for p in system):
            breakpoints.append(end)
        return Head(system, tools, regions, tools_end, end, tuple(breakpoints))

    def measure(self, context: Context, previous: Sent | None) -> tuple[Sent, int]:
        """``context`` measured, building on ``previous`` (the last call's), and how many leading
        messages the two share as managed mode and the provider's cache compare them (what they
        say, cache breakpoints aside)."""
        messages = context.messages
        head = self._head(context, previous.head if previous is not None else None)
        shared = 0
        if previous is None:
            cumulative, regions, marked = [0], {}, []
        else:
            old = previous.context.messages
            shared = strict_prefix(old, messages)
            cumulative = previous.cumulative[: shared + 1]
            marked = previous.marked[: bisect.bisect_left(previous.marked, shared)]
            if len(old) - shared <= shared:  # fewer to take out than to add up again
                regions = dict(previous.regions)
                for message in old[shared:]:
                    for name, tokens in self._message(message)[1].items():
                        regions[name] -= tokens
            else:
                regions = {}
                for message in messages[:shared]:
                    for name, tokens in self._message(message)[1].items():
                        regions[name] = regions.get(name, 0) + tokens
        running = cumulative[-1]
        for i in range(shared, len(messages)):
            _, counted, tokens, mark = self._message(messages[i])
            running += tokens
            cumulative.append(running)
            for name, n in counted.items():
                regions[name] = regions.get(name, 0) + n
            if mark:
                marked.append(i)
        said = shared
        if previous is not None and shared < len(previous.context.messages):
            said = self.same_from(previous.context.messages, messages, shared)
        return Sent(context, head, cumulative, regions, marked), said

    def facts(self, context: Context) -> set[Fact]:
        """Every fact ``context`` shows: its system prompt's and its messages'."""
        found: set[Fact] = set()
        for part in context.system:
            found |= part_facts(part)
        memo = self._facts
        for message in context.messages:
            known = memo.get(id(message))
            if known is None or known[0] is not message:
                facts: frozenset[Fact] = frozenset()
                for part in message.parts:
                    facts |= part_facts(part)
                known = (message, facts)
                memo[id(message)] = known
            found |= known[1]
        return found


def part_texts(part: Part) -> list[str]:
    """The texts a model reads in ``part`` (where a pointer to an artifact may be)."""
    if isinstance(part, TextPart | ReasoningPart):
        return [part.text]
    if isinstance(part, ToolCallPart):
        return [part.arguments]
    if isinstance(part, ToolResultPart):
        return [t for p in part.content for t in part_texts(p)]
    return []
