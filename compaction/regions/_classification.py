"""Which region each token goes to: the region names (:data:`REGIONS`), the counter the split uses
(:class:`Counter`), and the split of a part, a message or a system prompt into regions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, Protocol, TypeAlias

from compaction.messages._common import RAW as _RAW
from compaction.messages.model import (
    MediaPart,
    Message,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolDefinition,
    ToolResultPart,
)
from compaction.regions._summary_markers import _summary_start, is_summary, is_summary_text

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
    "other",
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
    "other",
    "unattributed",
    "reserve",
    "free",
)

#: The regions that hold a turn's tokens; they add up to its total.
USED_REGIONS: tuple[Region, ...] = REGIONS[:11]

#: The region of an item or block the model has no class for (kept verbatim), by its ``type``;
#: any other such item (an unknown role, an API's newest item type) is ``other``.
RAW_REGIONS: Mapping[str, Region] = {
    # tool definitions sent inside the conversation (Codex) and an MCP server's tool list
    "additional_tools": "tools",
    "mcp_list_tools": "tools",
    # calls that run on the provider's side and carry their own result
    "web_search_call": "tool_calls",
    "file_search_call": "tool_calls",
    "code_interpreter_call": "tool_calls",
    "image_generation_call": "tool_calls",
    "mcp_call": "tool_calls",
    "tool_search_call": "tool_calls",
    "server_tool_use": "tool_calls",
    "mcp_tool_use": "tool_calls",
    "mcp_approval_request": "tool_calls",
    "mcp_approval_response": "tool_results",
    "mcp_tool_result": "tool_results",
    # a provider's own compaction of the history (opaque)
    "compaction": "summary",
    "compaction_summary": "summary",
}


def raw_region(part: Part) -> Region | None:
    """The region of a part kept verbatim (see :data:`RAW_REGIONS`), or None for other parts.

    Example:
        >>> from compaction.messages import parse
        >>> item = {"type": "additional_tools", "tools": []}
        >>> message = parse("openai-responses", {"input": [item]}).messages[0]
        >>> raw_region(message.parts[0])
        'tools'
    """
    if not isinstance(part, TextPart):
        return None
    raw = part.extra.get(_RAW)
    if not isinstance(raw, Mapping):
        return None
    kind = raw.get("type")
    if isinstance(kind, str):
        region = RAW_REGIONS.get(kind)
        if region is not None:
            return region
        if kind.endswith("_tool_result"):  # Anthropic's server tools' results
            return "tool_results"
    return "other"


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
    raw = raw_region(part)
    if raw is not None:
        return raw
    return _text_region(message, is_summary(message) or is_summary_text(part.text))


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
        elif (
            isinstance(part, TextPart)
            and message.role in ("system", "developer")
            and not summary
            and raw_region(part) is None
        ):
            start = _summary_start(part.text)
            share = tokens if start == 0 else 0
            if start:
                share = counter.count_text(part.text[start:])
            rest, share = _split(tokens, share)
            add("system", rest)
            add("summary", share)
        else:
            add(region_of_part(message, part), tokens)
    overhead_region = _text_region(message, summary)
    if len(message.parts) == 1 and (raw := raw_region(message.parts[0])) is not None:
        overhead_region = raw  # an item kept whole: its overhead is the item's
    add(overhead_region, count.overhead)
    return out


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
