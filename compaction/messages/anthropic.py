"""The Anthropic Messages adapter: a request body to a :class:`Context` and back.

The top-level ``system`` (a string or text blocks) becomes ``Context.system``; content blocks map
to parts: ``text``, ``image`` and ``document`` (media), ``tool_use`` (its ``input`` object as JSON
text in ``ToolCallPart.arguments``), ``tool_result``, ``thinking`` and ``redacted_thinking``.
Tool results stay in their ``user`` message, as Anthropic sends them. ``cache_control``,
``citations`` and every other key are kept in ``extra``; blocks of other types are kept verbatim.

Example:
    >>> ctx = parse({"model": "claude", "max_tokens": 1024, "system": "Be brief.",
    ...              "messages": [{"role": "user", "content": "hi"}]})
    >>> ctx.system[0].text, ctx.max_output_tokens
    ('Be brief.', 1024)
    >>> render(ctx)["system"]
    'Be brief.'
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from compaction.errors import FormatError
from compaction.messages._common import (
    INLINE,
    ITEM,
    MISSING,
    SHAPE,
    SOURCE,
    add_explicit,
    check_depth,
    content_is_string,
    drop_absent,
    dumps,
    expect_list,
    expect_obj,
    expect_str,
    explicit,
    extra_of,
    join,
    list_shape,
    loads_object,
    mark_absent,
    opt_int,
    opt_str,
    public,
    raw_message,
    raw_of,
    raw_part,
)
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

__all__ = ["MESSAGES", "build", "parse", "parse_message", "render"]

#: The request key of the message list.
MESSAGES = "messages"


def parse(request: Mapping[str, Any]) -> Context:
    """Parse an Anthropic Messages request body into a :class:`Context`.

    Raises:
        FormatError: naming the first malformed field (``messages.1.content.0.tool_use_id``).
    """
    req = expect_obj(request, "")
    check_depth(req)
    return build(req)


def build(
    req: Mapping[str, Any],
    messages: tuple[Message, ...] | None = None,
    *,
    tools: tuple[ToolDefinition, ...] | None = None,
) -> Context:
    """The context of a depth-checked request object; ``messages``, when given, are its
    ``messages`` already parsed, and ``tools`` its tool definitions, parsed from an equal value
    (by :mod:`compaction.messages.incremental`)."""
    consumed = {"messages"}
    extra: dict[str, Any] = {}
    items = expect_list(req.get("messages", MISSING), "messages")
    if messages is None:
        messages = tuple(parse_message(m, join("messages", i)) for i, m in enumerate(items))
    system: tuple[Part, ...] = ()
    if req.get("system") is not None:
        consumed.add("system")
        system = _parse_content(req["system"], "system", extra, system_only=True)
    if req.get("tools") is not None:
        consumed.add("tools")
        items = expect_list(req["tools"], "tools")
        if not items:
            add_explicit(extra, "tools")
        if tools is None:
            tools = tuple(_parse_tool(t, join("tools", i)) for i, t in enumerate(items))
    if tools is None:
        tools = ()
    max_output_tokens = opt_int(req, "max_tokens", "")
    if max_output_tokens is not None:
        consumed.add("max_tokens")
    extra.update(extra_of(req, consumed, ""))
    return Context(
        format="anthropic-messages",
        messages=messages,
        system=system,
        tools=tools,
        max_output_tokens=max_output_tokens,
        extra=extra,
    )


def render(context: Context) -> dict[str, Any]:
    """Render a :class:`Context` as an Anthropic Messages request body.

    A context parsed from this format renders back exactly. One built from model objects renders
    as a valid request: system and developer messages join ``system``, ``tool`` messages become
    ``user`` messages of ``tool_result`` blocks.
    """
    out = public(context.extra)
    system = list(context.system)
    messages: list[dict[str, Any]] = []
    for message in context.messages:
        if message.role in ("system", "developer") and not message.extra.get(INLINE):
            system.extend(p for p in message.parts if isinstance(p, TextPart))
            continue
        messages.append(_render_message(message))
    out["messages"] = messages
    if system or context.extra.get(SHAPE) == "list":
        out["system"] = _render_content(tuple(system), context.extra)
    if context.tools or explicit(context.extra, "tools"):
        out["tools"] = [_render_tool(t) for t in context.tools]
    if context.max_output_tokens is not None:
        out["max_tokens"] = context.max_output_tokens
    return out


# -- messages -----------------------------------------------------------------------------------


def parse_message(value: object, path: str) -> Message:
    """One item of ``messages`` (at ``path``, such as ``messages.3``) as a :class:`Message`.

    A ``system`` message inside the list (Claude Code sends its agent and skill lists so) stays a
    system message in its place; a message of a role this adapter does not know is kept whole,
    verbatim, as a system message of one raw part: configuration a strategy never removes."""
    msg = expect_obj(value, path)
    role = expect_str(msg.get("role", MISSING), join(path, "role"))
    if role not in ("user", "assistant", "system"):
        extra_of(msg, (), path)  # refuses reserved keys, as every other item does
        return Message(role="system", parts=(raw_message(msg, path),), extra={INLINE: True})
    extra: dict[str, Any] = {}
    parts = _parse_content(msg.get("content", MISSING), join(path, "content"), extra)
    extra.update(extra_of(msg, ("role", "content"), path))
    if role == "system":
        extra[INLINE] = True
        return Message(role="system", parts=parts, extra=extra)
    return Message(role="user" if role == "user" else "assistant", parts=parts, extra=extra)


def _parse_content(
    value: object,
    path: str,
    extra: dict[str, Any],
    *,
    nested: bool = False,
    system_only: bool = False,
) -> tuple[Part, ...]:
    if isinstance(value, str):
        return (TextPart(text=value),)
    blocks = expect_list(value, path)
    parts: list[Part] = []
    for i, block in enumerate(blocks):
        block_path = join(path, i)
        part = _parse_block(block, block_path, nested=nested)
        if system_only and not isinstance(part, TextPart):
            raise FormatError(join(block_path, "type"), "expected a text block")
        parts.append(part)
    list_shape(parts, extra)
    return tuple(parts)


def _parse_block(value: object, path: str, *, nested: bool) -> Part:
    block = expect_obj(value, path)
    kind = expect_str(block.get("type", MISSING), join(path, "type"))
    if kind == "text":
        text = expect_str(block.get("text", MISSING), join(path, "text"))
        return TextPart(text=text, extra=extra_of(block, ("type", "text"), path))
    if kind in ("image", "document"):
        return _parse_media(block, kind, path)
    if kind == "tool_use":
        call_id = expect_str(block.get("id", MISSING), join(path, "id"))
        name = expect_str(block.get("name", MISSING), join(path, "name"))
        arguments = expect_obj(block.get("input", MISSING), join(path, "input"))
        extra = extra_of(block, ("type", "id", "name", "input"), path)
        return ToolCallPart(
            id=call_id, name=name, arguments=dumps(arguments, join(path, "input")), extra=extra
        )
    if kind == "tool_result" and not nested:
        return _parse_tool_result(block, path)
    if kind == "thinking":
        text = expect_str(block.get("thinking", MISSING), join(path, "thinking"))
        signature = opt_str(block, "signature", path)
        consumed = (
            ("type", "thinking", "signature") if signature is not None else ("type", "thinking")
        )
        return ReasoningPart(text=text, signature=signature, extra=extra_of(block, consumed, path))
    if kind == "redacted_thinking":
        data = expect_str(block.get("data", MISSING), join(path, "data"))
        extra = extra_of(block, ("type", "data"), path)
        return ReasoningPart(text="", redacted=True, data=data, extra=extra)
    return raw_part(block, path)


def _parse_media(block: Mapping[str, Any], kind: str, path: str) -> MediaPart:
    source_path = join(path, "source")
    source = expect_obj(block.get("source", MISSING), source_path)
    media_type = opt_str(source, "media_type", source_path)
    data = opt_str(source, "data", source_path)
    url = opt_str(source, "url", source_path)
    fields = (("media_type", media_type), ("data", data), ("url", url))
    consumed = [key for key, field_value in fields if field_value is not None]
    source_extra = extra_of(source, consumed, source_path)
    mark_absent(source_extra, source, ("type",))
    extra = extra_of(block, ("type", "source"), path)
    extra[SOURCE] = source_extra
    return MediaPart(
        media="image" if kind == "image" else "file",
        media_type=media_type,
        data=data,
        url=url,
        extra=extra,
    )


def _parse_tool_result(block: Mapping[str, Any], path: str) -> ToolResultPart:
    call_id = expect_str(block.get("tool_use_id", MISSING), join(path, "tool_use_id"))
    extra: dict[str, Any] = {}
    consumed = ["type", "tool_use_id"]
    content: tuple[Part, ...] = ()
    if block.get("content") is not None:
        consumed.append("content")
        content = _parse_content(block["content"], join(path, "content"), extra, nested=True)
    is_error = False
    if isinstance(block.get("is_error"), bool):
        consumed.append("is_error")
        is_error = block["is_error"]
        if not is_error:
            add_explicit(extra, "is_error")
    elif block.get("is_error") is not None:
        raise FormatError(join(path, "is_error"), "expected a boolean")
    extra.update(extra_of(block, consumed, path))
    return ToolResultPart(tool_call_id=call_id, content=content, is_error=is_error, extra=extra)


def _render_message(message: Message) -> dict[str, Any]:
    if len(message.parts) == 1 and message.parts[0].extra.get(ITEM):
        raw = raw_of(message.parts[0])
        if raw is not None:
            return dict(raw)
    msg = public(message.extra)
    if message.extra.get(INLINE):
        msg["role"] = "system"
    else:
        msg["role"] = "assistant" if message.role == "assistant" else "user"
    msg["content"] = _render_content(message.parts, message.extra)
    return msg


def _render_content(parts: tuple[Part, ...], extra: Mapping[str, Any]) -> str | list[Any]:
    if content_is_string(parts, extra):
        return parts[0].text  # type: ignore[union-attr]
    return [_render_block(p) for p in parts]


def _render_block(part: Part) -> dict[str, Any]:
    raw = raw_of(part)
    if raw is not None:
        return dict(raw)
    out = public(part.extra)
    if isinstance(part, TextPart):
        out.update(type="text", text=part.text)
    elif isinstance(part, MediaPart):
        out.update(_render_media(part))
    elif isinstance(part, ToolCallPart):
        out.update(type="tool_use", id=part.id, name=part.name, input=loads_object(part.arguments))
    elif isinstance(part, ToolResultPart):
        out.update(type="tool_result", tool_use_id=part.tool_call_id)
        if part.content or part.extra.get(SHAPE) == "list":
            body = tuple(p for p in part.content if not isinstance(p, ToolResultPart))
            out["content"] = _render_content(body, part.extra)
        if part.is_error or explicit(part.extra, "is_error"):
            out["is_error"] = part.is_error
    elif part.redacted:
        out.update(type="redacted_thinking", data=part.data or "")
    else:
        out.update(type="thinking", thinking=part.text)
        if part.signature is not None:
            out["signature"] = part.signature
    return out


def _render_media(part: MediaPart) -> dict[str, Any]:
    if part.media == "audio":
        return {"type": "text", "text": f"[audio: {part.media_type or 'unknown type'}]"}
    stored = part.extra.get(SOURCE)
    source: dict[str, Any] = dict(stored) if isinstance(stored, Mapping) else {}
    if part.data is not None:
        source.setdefault("type", "base64")
        source["data"] = part.data
    elif part.url is not None:
        source.setdefault("type", "url")
        source["url"] = part.url
    if part.media_type is not None:
        source["media_type"] = part.media_type
    drop_absent(source, source)
    return {
        "type": "image" if part.media == "image" else "document",
        "source": public(source),
    }


# -- tools --------------------------------------------------------------------------------------


def _parse_tool(value: object, path: str) -> ToolDefinition:
    tool = expect_obj(value, path)
    name = expect_str(tool.get("name", MISSING), join(path, "name"))
    consumed = ["name"]
    description = opt_str(tool, "description", path)
    if description is not None:
        consumed.append("description")
    parameters: Mapping[str, Any] = {}
    if tool.get("input_schema") is not None:
        parameters = expect_obj(tool["input_schema"], join(path, "input_schema"))
        consumed.append("input_schema")
    extra = extra_of(tool, consumed, path)
    mark_absent(extra, tool, ("description", "input_schema"))
    return ToolDefinition(
        name=name, description=description or "", parameters=parameters, extra=extra
    )


def _render_tool(tool: ToolDefinition) -> dict[str, Any]:
    out = public(tool.extra)
    out["name"] = tool.name
    if tool.description or "description" not in out:
        out["description"] = tool.description
    if tool.parameters or "input_schema" not in out:
        out["input_schema"] = dict(tool.parameters)
    return drop_absent(out, tool.extra)
