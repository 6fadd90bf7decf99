"""A context's items (:func:`context_items`), built from the items of its parts: the tool
definitions (:func:`tool_items`), the top-level system prompt (:func:`system_items`) and each
message (:func:`message_items`), so that items can be computed once per message and added up.

Every item's tokens come from the same counter as the regions, and the items of a region add up
exactly to that region's tokens (:func:`compaction.regions.message_regions`,
:func:`~compaction.regions.system_regions`, the counter's ``count_tools``): whatever a part
holds outside its blocks stays with the part's own item (the text, the tool's output), and what
no part holds (a message's wrapper, the tools' wrapper, the request's priming) is the region's
``unattributed`` item. A block's tokens are its text counted alone, capped so that the blocks
of a part never take more than the part's tokens.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from compaction.attribution._carving import (
    MAX_NAME_CHARS,
    UNATTRIBUTED,
    UNATTRIBUTED_KIND,
    balance,
    json_escaped,
    text_items,
)
from compaction.attribution._files import call_files, call_patch, output_file, tool_server
from compaction.attribution._model import Attribution, Item, ItemKind, Where
from compaction.messages._common import RAW
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
from compaction.regions import (
    Counter,
    RegionMemo,
    context_regions,
    is_summary,
    is_summary_text,
    message_regions,
    raw_region,
    region_of_part,
    system_regions,
)
from compaction.regions._summary_markers import _summary_start
from compaction.tokens._counter import tool_definition_json

__all__ = [
    "MAX_NAME_CHARS",
    "CallTarget",
    "call_targets",
    "context_items",
    "message_items",
    "system_items",
    "tool_items",
]


@dataclass(frozen=True)
class CallTarget:
    """What a tool call is: the ``tool``'s name, its ``group`` (MCP server, else the tool) and
    the ``files`` it reads or writes (:func:`compaction.attribution.call_files`)."""

    tool: str
    group: str
    files: tuple[str, ...] = ()


def call_targets(
    message: Message, servers: Mapping[str, str] | None = None
) -> dict[str, CallTarget]:
    """The tool calls ``message`` makes, by call id; ``servers`` maps tool names to the MCP
    server their definition names (:func:`compaction.attribution.tool_server`).

    Example:
        >>> from compaction.messages.model import Message, ToolCallPart
        >>> call = ToolCallPart("c1", "Read", '{"file_path": "/a.py"}')
        >>> call_targets(Message("assistant", (call,)))
        {'c1': CallTarget(tool='Read', group='Read', files=('/a.py',))}
    """
    return {part.id: _target(part, servers or {}) for part in message.tool_calls}


def _target(call: ToolCallPart, servers: Mapping[str, str]) -> CallTarget:
    server = servers.get(call.name) or tool_server(call.name)
    return CallTarget(call.name, server or call.name, call_files(call.name, call.arguments))


def _media_item(part: MediaPart, tokens: int, where: Where, group: str) -> Item:
    kind: ItemKind = "image" if part.media == "image" else "media"
    return Item(kind, part.media, group, "media", tokens, where, part.media_type or "")


def _raw_items(
    part: TextPart, region: str, tokens: int, counter: Counter, where: Where
) -> list[Item]:
    """An item kept verbatim: named by its ``name`` (a provider-side call) or its type; one that
    defines tools (Codex's ``additional_tools``, a namespace) is split into its tools."""
    raw = part.extra.get(RAW)
    data = raw if isinstance(raw, Mapping) else {}
    kind_of = str(data.get("type") or "item")
    name = data.get("name")
    label = name if isinstance(name, str) and name else kind_of
    server = tool_server(label, data)
    kinds: dict[str, ItemKind] = {
        "tools": "tool_definition",
        "tool_calls": "tool_call",
        "tool_results": "tool_output",
        "summary": "summary",
    }
    kind = kinds.get(region, "raw")
    detail = kind_of if label != kind_of else ""
    own = Item(kind, label, server or label, region, tokens, where, detail)
    if region != "tools" or not nested_tools(data):
        return [own]
    prefix = label if kind_of == "namespace" else ""
    return _split_tools(own, nested_tools(data), prefix, counter)


def nested_tools(data: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The tool definitions a verbatim tool or item holds in its ``tools`` (a namespace of tools,
    Codex's ``additional_tools``); empty for any other."""
    tools = data.get("tools")
    if not isinstance(tools, list):
        return []
    return [tool for tool in tools if isinstance(tool, Mapping)]


def _child_name(tool: Mapping[str, Any], prefix: str) -> str:
    """A namespaced tool's name: ``mcp__<server>__<tool>`` inside an MCP server's namespace
    (as Claude Code names MCP tools), ``<namespace>.<tool>`` inside another."""
    name = str(tool.get("name") or tool.get("type") or "tool")
    if not prefix:
        return name
    if tool_server(prefix) is not None:
        return f"{prefix}__{name}"
    return f"{prefix}.{name}"


def _split_tools(
    own: Item, tools: list[Mapping[str, Any]], prefix: str, counter: Counter
) -> list[Item]:
    """``own`` (a definition of ``tools``, worth its tokens) as one item per tool it holds
    (namespaces within flattened), each its compact JSON counted alone (as the whole was
    counted), and ``own`` keeping what is
    left (the wrapper, the namespace's description). Should the tools' counts exceed ``own``
    (tokens do not add across a split), the largest give the excess back."""
    items: list[Item] = []
    for tool in tools:
        name = _child_name(tool, prefix)
        inner = nested_tools(tool) if tool.get("type") == "namespace" else []
        tokens = counter.count_text(
            json.dumps(tool, ensure_ascii=False, separators=(",", ":"), default=str)
        )
        server = tool_server(name, tool)
        child = Item(own.kind, name, server or name, own.region, tokens, own.where)
        items += _split_tools(child, inner, name, counter) if inner else [child]
    left = own.tokens - sum(item.tokens for item in items)
    while left < 0 and items:
        largest = max(range(len(items)), key=lambda k: items[k].tokens)
        cut = min(items[largest].tokens, -left)
        items[largest] = dataclasses.replace(items[largest], tokens=items[largest].tokens - cut)
        left += cut
    rest = [dataclasses.replace(own, tokens=left)] if left > 0 else []
    return [item for item in items if item.tokens] + rest


def _result_items(
    part: ToolResultPart,
    tokens: int,
    counter: Counter,
    *,
    message: Message,
    calls: Mapping[str, CallTarget],
    where: Where,
) -> list[Item]:
    """A tool result: its media to ``media``, the rest to the file it shows (named by its call,
    else by its first line) or to the tool's outputs, its instruction blocks carved out."""
    target = calls.get(part.tool_call_id)
    tool = target.tool if target is not None else (message.name or "tool")
    group = target.group if target is not None else tool
    media_parts = [p for p in part.content if isinstance(p, MediaPart)]
    media = min(sum(counter.count_part(p) for p in media_parts), tokens)
    items: list[Item] = []
    left = media
    for media_part in media_parts:
        share = min(counter.count_part(media_part), left)
        left -= share
        if share:
            items.append(_media_item(media_part, share, where, group))
    text = part.text
    files = target.files if target is not None else ()
    file = files[0] if len(files) == 1 else output_file(text)
    base: tuple[ItemKind, str, str, str] = (
        ("file", file, group, "") if file else ("tool_output", tool, group, "")
    )
    items += text_items(
        text, tokens - media, counter, base=base, region="tool_results", where=where, group=group
    )
    return items


def _call_items(
    call: ToolCallPart, tokens: int, counter: Counter, target: CallTarget, where: Where
) -> list[Item]:
    """A tool call: to the file it names when it names one; a patch of several files is split
    by file (each its section of the patch), its envelope staying with the tool's calls."""
    files = target.files
    if len(files) == 1:
        return [Item("file", files[0], target.group, "tool_calls", tokens, where)]
    patch = call_patch(call.arguments) if files else ()
    items: list[Item] = []
    left = tokens
    for path, section in patch:
        share = min(counter.count_text(section), left)
        left -= share
        if share:
            items.append(Item("file", path, target.group, "tool_calls", share, where))
    if left:
        items.append(Item("tool_call", target.tool, target.group, "tool_calls", left, where))
    return items


def _system_text(
    message: Message, part: TextPart, tokens: int, counter: Counter, where: Where
) -> list[Item]:
    """A system or developer message's text: a summary inside it to ``summary`` (as the
    regions split it), the rest to the system prompt with its instruction blocks."""
    start = _summary_start(part.text)
    if start == 0:
        return [Item("summary", "summary", "summary", "summary", tokens, where)]
    share = min(counter.count_text(part.text[start:]), tokens) if start else 0
    items = text_items(
        part.text[:start] if start else part.text,
        tokens - share,
        counter,
        base=("system_prompt", f"{message.role} prompt", "system", ""),
        region="system",
        where=where,
    )
    if share:
        items.append(Item("summary", "summary", "summary", "summary", share, where))
    return items


def _text_base(message: Message, region: str, text: str) -> tuple[ItemKind, str, str, str]:
    if region == "tool_results":
        tool = message.name or "tool"
        return ("tool_output", tool, tool, "")
    if region == "user":
        file = output_file(text)
        if file:
            return ("file", file, "observation", "")
    return ("message_text", f"{message.role} text", message.role, "")


def message_items(
    message: Message,
    counter: Counter,
    *,
    where: Where,
    calls: Mapping[str, CallTarget] | None = None,
    servers: Mapping[str, str] | None = None,
    memo: RegionMemo | None = None,
) -> list[Item]:
    """The items of one message at ``where``; ``calls`` are the calls made before it or in it
    (:func:`call_targets`, for its tool results), ``servers`` the tools' MCP servers. Their
    tokens add up, region by region, to :func:`compaction.regions.message_regions`.

    Example:
        >>> from compaction.messages.model import Message, TextPart
        >>> from compaction.tokens import TokenCounter, get_tokenizer
        >>> counter = TokenCounter(get_tokenizer("cl100k_base"))
        >>> text = "Fix it.<system-reminder>Todo list is empty.</system-reminder>"
        >>> items = message_items(Message("user", (TextPart(text),)), counter, where=0)
        >>> [(i.kind, i.name, i.tokens) for i in items]  # doctest: +NORMALIZE_WHITESPACE
        [('instruction', '<system-reminder>', 14), ('message_text', 'user text', 2),
         ('unattributed', 'unattributed', 3)]
    """
    servers = servers or {}
    known: Mapping[str, CallTarget] = calls or {}
    if message.tool_calls and message.tool_results:  # a result answering a call beside it
        known = {**known, **call_targets(message, servers)}
    count = counter.count_message(message)
    if memo is not None:
        expected = memo.regions(message, counter)
    else:
        expected = message_regions(message, counter)
    summary = is_summary(message)
    items: list[Item] = []
    for part, tokens in zip(message.parts, count.parts, strict=True):
        if isinstance(part, ToolResultPart):
            items += _result_items(part, tokens, counter, message=message, calls=known, where=where)
        elif isinstance(part, ToolCallPart):
            # its own target, not ``known``'s: agents reuse call ids (SWE-agent does)
            items += _call_items(part, tokens, counter, _target(part, servers), where)
        elif isinstance(part, ReasoningPart):
            items.append(Item("reasoning", "reasoning", "reasoning", "reasoning", tokens, where))
        elif isinstance(part, MediaPart):
            items.append(_media_item(part, tokens, where, message.role))
        elif (raw := raw_region(part)) is not None:
            items += _raw_items(part, raw, tokens, counter, where)
        elif message.role in ("system", "developer") and not summary:
            items += _system_text(message, part, tokens, counter, where)
        else:
            region = region_of_part(message, part)
            if region == "summary":
                items.append(Item("summary", "summary", "summary", "summary", tokens, where))
            else:
                base = _text_base(message, region, part.text)
                items += text_items(
                    part.text, tokens, counter, base=base, region=region, where=where
                )
    return balance(items, expected, where)


def system_items(parts: tuple[Part, ...], counter: Counter) -> list[Item]:
    """The items of a top-level system prompt: its summary blocks, its instruction blocks, the
    prompt's own text, its wrapper as ``unattributed``; they add up to
    :func:`compaction.regions.system_regions`."""
    items: list[Item] = []
    where: Where = "system"
    for part in parts:
        tokens = counter.count_part(part)
        if isinstance(part, TextPart) and is_summary_text(part.text):
            items.append(Item("summary", "summary", "summary", "summary", tokens, where))
        elif isinstance(part, TextPart):
            base: tuple[ItemKind, str, str, str] = ("system_prompt", "system prompt", "system", "")
            items += text_items(part.text, tokens, counter, base=base, region="system", where=where)
        elif isinstance(part, MediaPart):
            kind: ItemKind = "image" if part.media == "image" else "media"
            items.append(Item(kind, part.media, "system", "system", tokens, where))
        else:
            items.append(Item("system_prompt", "system prompt", "system", "system", tokens, where))
    return balance(items, system_regions(parts, counter), where)


def tool_items(tools: tuple[ToolDefinition, ...], counter: Counter) -> list[Item]:
    """One item per tool definition (named by the tool, grouped by its MCP server), with the
    skills and agent lists inside descriptions carved out, and the tools' wrapper as
    ``unattributed``; they add up to the counter's ``count_tools``."""
    if not tools:
        return []
    items: list[Item] = []
    where: Where = "tools"
    for tool in tools:
        tokens = counter.count_text(tool_definition_json(tool))
        server = tool_server(tool.name, tool.extra)
        raw = tool.extra.get(RAW)
        inner = nested_tools(raw) if isinstance(raw, Mapping) else []
        if inner:  # a namespace: its tools one by one
            own = Item("tool_definition", tool.name, server or tool.name, "tools", tokens, where)
            items += _split_tools(own, inner, tool.name, counter)
            continue
        name = server if server and isinstance(raw, Mapping) else tool.name
        group = server or tool.name
        items += text_items(
            tool.description,
            tokens,
            counter,
            base=("tool_definition", name, group, ""),
            region="tools",
            where=where,
            group=group,
            as_counted=json_escaped,
        )
    return balance(items, {"tools": counter.count_tools(tools)}, where)


class PrefixMemo:
    """The items of each message of the last context :func:`context_items` attributed with
    it, reused for a later context that starts with the same message objects under the same
    tools' MCP servers (a message's items depend only on it, the messages before it and those
    servers): a turn and the one before it share most of their messages. Messages are frozen;
    the memo holds the ones it remembers. Use one memo with one counter, for one job.

    Example:
        >>> from compaction.messages.model import Context, Message, TextPart
        >>> from compaction.tokens import TokenCounter, get_tokenizer
        >>> counter, memo = TokenCounter(get_tokenizer("cl100k_base")), PrefixMemo()
        >>> first = Message("user", (TextPart("Fix the bug in parser.py"),))
        >>> one = context_items(Context("openai-chat", (first,)), counter, prefix=memo)
        >>> reply = Message("assistant", (TextPart("Done."),))
        >>> two = context_items(Context("openai-chat", (first, reply)), counter, prefix=memo)
        >>> two == context_items(Context("openai-chat", (first, reply)), counter)
        True
    """

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.items: list[list[Item]] = []
        self.servers: dict[str, str] | None = None


def context_items(
    context: Context,
    counter: Counter,
    *,
    reported_input_tokens: int | None = None,
    memo: RegionMemo | None = None,
    prefix: PrefixMemo | None = None,
) -> Attribution:
    """Every item of ``context``, counted with ``counter`` (the counter ingest counts with).

    The items of each region add up to exactly that region of
    :func:`compaction.regions.context_regions` (the request's priming tokens are the system
    region's ``unattributed``); with ``reported_input_tokens`` above the count, the difference is
    one ``unattributed (provider)`` item in the ``unattributed`` region.

    Example:
        >>> from compaction.messages.model import Context, Message, ToolCallPart
        >>> from compaction.tokens import TokenCounter, get_tokenizer
        >>> counter = TokenCounter(get_tokenizer("cl100k_base"))
        >>> call = ToolCallPart("c1", "mcp__github__get_issue", '{"number": 7}')
        >>> context = Context("anthropic-messages", (Message("assistant", (call,)),))
        >>> items = context_items(context, counter)
        >>> [(i.kind, i.name, i.group) for i in items.items if i.region == "tool_calls"]
        [('tool_call', 'mcp__github__get_issue', 'github')]
    """
    memo = memo if memo is not None else RegionMemo()
    items: list[Item] = [
        Item(
            UNATTRIBUTED_KIND,
            UNATTRIBUTED,
            UNATTRIBUTED,
            "system",
            counter.REQUEST_OVERHEAD,
            "request",
        )
    ]
    items += system_items(context.system, counter)
    items += tool_items(context.tools, counter)
    servers = {
        tool.name: server
        for tool in context.tools
        if (server := tool_server(tool.name, tool.extra)) is not None
    }
    calls: dict[str, CallTarget] = {}
    # the messages the last context began with, as long as this one begins with the same
    known = prefix.messages if prefix is not None and prefix.servers == servers else []
    each: list[list[Item]] = []
    for index, message in enumerate(context.messages):
        calls.update(call_targets(message, servers))
        if index < len(known) and known[index] is message:
            assert prefix is not None
            found = prefix.items[index]
        else:
            known = []
            found = message_items(
                message, counter, where=index, calls=calls, servers=servers, memo=memo
            )
        each.append(found)
        items += found
    if prefix is not None:
        prefix.messages, prefix.items, prefix.servers = list(context.messages), each, servers
    totals = context_regions(
        context, counter, reported_input_tokens=reported_input_tokens, memo=memo
    )
    if totals.unattributed:
        items.append(
            Item(
                UNATTRIBUTED_KIND,
                "unattributed (provider)",
                "provider",
                "unattributed",
                totals.unattributed,
                "provider",
            )
        )
    return Attribution(
        tuple(i for i in items if i.tokens), dict(totals.regions), reported_input_tokens
    )
