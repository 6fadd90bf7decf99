"""The OpenAI Responses adapter: a request body to a :class:`Context` and back.

``instructions`` becomes ``Context.system``; ``input`` (a string or a list of items) becomes the
messages, one per item: a ``message`` item keeps its role and content parts, a ``function_call``
becomes an ``assistant`` message holding one :class:`ToolCallPart`, a ``function_call_output`` a
``tool`` message holding one :class:`ToolResultPart`, a ``reasoning`` item an ``assistant``
message holding one :class:`ReasoningPart` (``encrypted_content`` as its ``data``). Items of other
types are kept verbatim. ``max_output_tokens`` is the output reserve.

Example:
    >>> ctx = parse({"model": "gpt-5", "instructions": "Be brief.", "input": "hi"})
    >>> ctx.system[0].text, ctx.messages[0].role, ctx.messages[0].text
    ('Be brief.', 'user', 'hi')
    >>> render(ctx)["input"]
    'hi'
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from compaction.messages._common import (
    ABSENT,
    ARGS,
    ARGS_OBJECT,
    INPUT,
    ITEM,
    MISSING,
    PLAIN_DATA,
    RAW,
    SHAPE,
    SUMMARY,
    TYPE,
    add_explicit,
    check_depth,
    content_is_string,
    data_url,
    drop_absent,
    dumps,
    expect_list,
    expect_obj,
    expect_str,
    explicit,
    extra_of,
    is_plain_text,
    join,
    list_shape,
    loads_object,
    mark_absent,
    opt_int,
    opt_str,
    public,
    raw_of,
    raw_part,
    raw_value_of,
    raw_value_part,
    split_data_url,
)
from compaction.messages.model import (
    Context,
    MediaPart,
    Message,
    Part,
    ReasoningPart,
    Role,
    TextPart,
    ToolCallPart,
    ToolDefinition,
    ToolResultPart,
)

__all__ = ["MESSAGES", "build", "parse", "parse_item", "render"]

#: The request key of the item list.
MESSAGES = "input"

#: Call items an output item answers by ``call_id``: each type, the key holding its arguments
#: (JSON text, or an object), and the tool's name when the item carries none.
_CALLS: dict[str, tuple[str, str]] = {
    "custom_tool_call": ("input", "custom"),
    "local_shell_call": ("action", "local_shell"),
    "shell_call": ("action", "shell"),
    "apply_patch_call": ("operation", "apply_patch"),
    "computer_call": ("action", "computer"),
}
_OUTPUTS = frozenset(f"{kind}_output" for kind in _CALLS)
#: Items that configure the model rather than converse with it (tool definitions sent inside
#: ``input``, as Codex sends them, and an MCP server's tool list): kept verbatim, as developer
#: messages, which no strategy summarizes, moves or removes.
CONFIGURATION_ITEMS = frozenset({"additional_tools", "mcp_list_tools"})

_ROLES: dict[str, Role] = {
    "system": "system",
    "developer": "developer",
    "user": "user",
    "assistant": "assistant",
}


def parse(request: Mapping[str, Any]) -> Context:
    """Parse a Responses request body into a :class:`Context`.

    Raises:
        FormatError: naming the first malformed field (``input.4.call_id``).
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
    ``input`` items already parsed (by :mod:`compaction.messages.incremental`), so only when
    ``input`` is a list; ``tools``, when given, its tool definitions, parsed from an equal
    value."""
    consumed: set[str] = set()
    extra: dict[str, Any] = {}
    system: tuple[Part, ...] = ()
    instructions = opt_str(req, "instructions", "")
    if instructions is not None:
        consumed.add("instructions")
        system = (TextPart(text=instructions),)
    items: tuple[Message, ...] = ()
    value = req.get("input", MISSING)
    if value is MISSING:
        extra[ABSENT] = ["input"]
    elif isinstance(value, str):
        consumed.add("input")
        extra[INPUT] = "string"
        items = (Message(role="user", parts=(TextPart(text=value),)),)
    elif value is not None:
        consumed.add("input")
        listed = expect_list(value, "input")
        if messages is None:
            messages = tuple(parse_item(item, join("input", i)) for i, item in enumerate(listed))
        items = messages
    if req.get("tools") is not None:
        consumed.add("tools")
        defs = expect_list(req["tools"], "tools")
        if not defs:
            add_explicit(extra, "tools")
        if tools is None:
            tools = tuple(_parse_tool(t, join("tools", i)) for i, t in enumerate(defs))
    if tools is None:
        tools = ()
    max_output_tokens = opt_int(req, "max_output_tokens", "")
    if max_output_tokens is not None:
        consumed.add("max_output_tokens")
    extra.update(extra_of(req, consumed, ""))
    return Context(
        format="openai-responses",
        messages=items,
        system=system,
        tools=tools,
        max_output_tokens=max_output_tokens,
        extra=extra,
    )


def render(context: Context) -> dict[str, Any]:
    """Render a :class:`Context` as a Responses request body.

    A context parsed from this format renders back exactly. One built from model objects renders
    as a valid request: each message becomes a ``message`` item for its text and media, and one
    item per tool call, tool result and reasoning part, in part order.
    """
    out = public(context.extra)
    if context.system:
        out["instructions"] = "\n\n".join(p.text for p in context.system if isinstance(p, TextPart))
    items: list[dict[str, Any]] = []
    for message in context.messages:
        items.extend(_render_message(message))
    if context.extra.get(INPUT) == "string" and _is_plain_input(context.messages):
        out["input"] = context.messages[0].parts[0].text  # type: ignore[union-attr]
    elif items or not ("input" in out or "input" in context.extra.get(ABSENT, ())):
        out["input"] = items
    if context.tools or explicit(context.extra, "tools"):
        out["tools"] = [_render_tool(t) for t in context.tools]
    if context.max_output_tokens is not None:
        out["max_output_tokens"] = context.max_output_tokens
    return out


def _is_plain_input(messages: tuple[Message, ...]) -> bool:
    if len(messages) != 1:
        return False
    message = messages[0]
    return (
        message.role == "user"
        and not message.extra
        and len(message.parts) == 1
        and is_plain_text(message.parts[0])
    )


# -- input items --------------------------------------------------------------------------------


def parse_item(value: object, path: str) -> Message:
    """One item of ``input`` (at ``path``, such as ``input.3``) as a :class:`Message`."""
    item = expect_obj(value, path)
    kind = item.get("type", MISSING)
    if kind is MISSING and "role" in item:
        kind = "message"
    kind = expect_str(kind, join(path, "type"))
    if kind == "message":
        return _parse_message_item(item, path)
    if kind == "function_call":
        call_id = expect_str(item.get("call_id", MISSING), join(path, "call_id"))
        name = expect_str(item.get("name", MISSING), join(path, "name"))
        arguments = expect_str(item.get("arguments", MISSING), join(path, "arguments"))
        extra = extra_of(item, ("type", "call_id", "name", "arguments"), path)
        call = ToolCallPart(id=call_id, name=name, arguments=arguments, extra=extra)
        return Message(role="assistant", parts=(call,))
    if kind == "function_call_output":
        call_id = expect_str(item.get("call_id", MISSING), join(path, "call_id"))
        extra = {}
        content = _parse_content(item.get("output", MISSING), join(path, "output"), "user", extra)
        extra.update(extra_of(item, ("type", "call_id", "output"), path))
        result = ToolResultPart(tool_call_id=call_id, content=content, extra=extra)
        return Message(role="tool", parts=(result,))
    if kind == "reasoning":
        return Message(role="assistant", parts=(_parse_reasoning(item, path),))
    if kind in _CALLS:
        call_part = _parse_call(item, kind, path)
        if call_part is not None:
            return Message(role="assistant", parts=(call_part,))
    if kind in _OUTPUTS:
        output = _parse_output(item, kind, path)
        if output is not None:
            return Message(role="tool", parts=(output,))
    raw = raw_part(item, path, **{ITEM: True})
    if kind in CONFIGURATION_ITEMS:
        return Message(role="developer", parts=(raw,))
    role: Role = "tool" if kind.endswith("_output") else "assistant"
    return Message(role=role, parts=(raw,))


def _parse_call(item: Mapping[str, Any], kind: str, path: str) -> ToolCallPart | None:
    """A call item other than ``function_call``; None when it lacks what pairing needs (then it
    is kept verbatim)."""
    key, default_name = _CALLS[kind]
    call_id, name, arguments = item.get("call_id"), item.get("name"), item.get(key, MISSING)
    if not isinstance(call_id, str) or not isinstance(name, str | None):
        return None
    extra: dict[str, Any] = {TYPE: kind}
    if key != "arguments":
        extra[ARGS] = key
    if isinstance(arguments, str):
        text = arguments
    elif isinstance(arguments, Mapping | list):
        text = dumps(arguments, join(path, key))
        extra[ARGS_OBJECT] = True
    else:
        return None
    extra.update(extra_of(item, ("type", "call_id", "name", key), path))
    mark_absent(extra, item, ("name",))
    return ToolCallPart(id=call_id, name=name or default_name, arguments=text, extra=extra)


def _parse_output(item: Mapping[str, Any], kind: str, path: str) -> ToolResultPart | None:
    """The output item of a call :func:`_parse_call` reads; None without a ``call_id``."""
    call_id = item.get("call_id")
    if not isinstance(call_id, str):
        return None
    extra: dict[str, Any] = {TYPE: kind}
    value = item.get("output", MISSING)
    content: tuple[Part, ...]
    if value is MISSING:
        content = ()
        extra[ABSENT] = ["output"]
    elif isinstance(value, list) and all(
        isinstance(v, Mapping) and isinstance(v.get("type"), str) for v in value
    ):
        content = _parse_content(value, join(path, "output"), "user", extra)
    elif isinstance(value, str):
        content = (TextPart(text=value),)
    else:
        content = (raw_value_part(value, join(path, "output")),)
    extra.update(extra_of(item, ("type", "call_id", "output"), path))
    return ToolResultPart(tool_call_id=call_id, content=content, extra=extra)


def _parse_message_item(item: Mapping[str, Any], path: str) -> Message:
    role = expect_str(item.get("role", MISSING), join(path, "role"))
    if role not in _ROLES:
        # A role this adapter does not know: the item kept whole, verbatim, as configuration.
        return Message(role="system", parts=(raw_part(item, path, **{ITEM: True}),))
    extra: dict[str, Any] = {}
    content = _parse_content(item.get("content", MISSING), join(path, "content"), role, extra)
    extra.update(extra_of(item, ("type", "role", "content"), path))
    mark_absent(extra, item, ("type",))
    return Message(role=_ROLES[role], parts=content, extra=extra)


def _parse_reasoning(item: Mapping[str, Any], path: str) -> ReasoningPart:
    consumed = ["type"]
    extra: dict[str, Any] = {}
    texts: list[str] = []
    if "summary" in item:
        consumed.append("summary")
        summary = expect_list(item["summary"], join(path, "summary"))
        for i, entry in enumerate(summary):
            entry_path = join(path, "summary", i)
            texts.append(
                expect_str(
                    expect_obj(entry, entry_path).get("text", MISSING), join(entry_path, "text")
                )
            )
        extra[SUMMARY] = summary
    else:
        extra[ABSENT] = ["summary"]
    data = opt_str(item, "encrypted_content", path)
    if data is not None:
        consumed.append("encrypted_content")
    extra.update(extra_of(item, consumed, path))
    return ReasoningPart(text="\n\n".join(texts), data=data, extra=extra)


def _default_type(role: str) -> str:
    return "output_text" if role == "assistant" else "input_text"


def _parse_content(value: object, path: str, role: str, extra: dict[str, Any]) -> tuple[Part, ...]:
    if isinstance(value, str):
        return (TextPart(text=value),)
    items = expect_list(value, path)
    parts = [_parse_part(item, join(path, i), role) for i, item in enumerate(items)]
    list_shape(parts, extra)
    return tuple(parts)


def _parse_part(value: object, path: str, role: str) -> Part:
    block = expect_obj(value, path)
    kind = expect_str(block.get("type", MISSING), join(path, "type"))
    if kind in ("input_text", "output_text"):
        text = expect_str(block.get("text", MISSING), join(path, "text"))
        extra = extra_of(block, ("type", "text"), path)
        if kind != _default_type(role):
            extra[TYPE] = kind
        return TextPart(text=text, extra=extra)
    if kind == "refusal":
        text = expect_str(block.get("refusal", MISSING), join(path, "refusal"))
        return TextPart(text=text, extra={TYPE: kind, **extra_of(block, ("type", "refusal"), path)})
    if kind == "input_image":
        url = opt_str(block, "image_url", path)
        extra = extra_of(block, ("type", "image_url") if url is not None else ("type",), path)
        mark_absent(extra, block, ("detail",))
        split = split_data_url(url) if url is not None else None
        if split is not None:
            return MediaPart(media="image", media_type=split[0], data=split[1], extra=extra)
        return MediaPart(media="image", url=url, extra=extra)
    if kind == "input_file":
        file_data = opt_str(block, "file_data", path)
        file_url = opt_str(block, "file_url", path)
        consumed = ["type"]
        consumed += ["file_data"] if file_data is not None else []
        consumed += ["file_url"] if file_url is not None else []
        extra = extra_of(block, consumed, path)
        split = split_data_url(file_data) if file_data is not None else None
        if split is not None:
            return MediaPart(
                media="file", media_type=split[0], data=split[1], url=file_url, extra=extra
            )
        if file_data is not None:
            extra[PLAIN_DATA] = True
        return MediaPart(media="file", data=file_data, url=file_url, extra=extra)
    return raw_part(block, path)


def _render_message(message: Message) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    pending: list[Part] = []
    extra_used = False

    def flush() -> None:
        nonlocal extra_used
        if pending:
            items.append(_message_item(message, tuple(pending), with_extra=not extra_used))
            extra_used = True
            pending.clear()

    for part in message.parts:
        raw = raw_of(part)
        if raw is not None and part.extra.get(ITEM):
            flush()
            items.append(dict(raw))
        elif isinstance(part, TextPart | MediaPart):
            pending.append(part)
        else:
            flush()
            items.append(_render_item(part))
    flush()
    if not message.parts:
        items.append(_message_item(message, (), with_extra=True))
    return items


def _message_item(message: Message, parts: tuple[Part, ...], *, with_extra: bool) -> dict[str, Any]:
    role = "user" if message.role == "tool" else message.role
    out = public(message.extra) if with_extra else {}
    out["type"] = "message"
    out["role"] = role
    if content_is_string(parts, message.extra):
        out["content"] = parts[0].text  # type: ignore[union-attr]
    else:
        out["content"] = [_render_part(p, role) for p in parts]
    return drop_absent(out, message.extra) if with_extra else out


def _render_item(part: Part) -> dict[str, Any]:
    out = public(part.extra)
    if isinstance(part, ToolCallPart):
        key = part.extra.get(ARGS, "arguments")
        arguments: Any = part.arguments
        if part.extra.get(ARGS_OBJECT):
            arguments = loads_object(part.arguments)
        kind = part.extra.get(TYPE, "function_call")
        out.update({"type": kind, "call_id": part.id, "name": part.name, key: arguments})
        return drop_absent(out, part.extra)
    if isinstance(part, ToolResultPart):
        kind = part.extra.get(TYPE, "function_call_output")
        body = tuple(p for p in part.content if isinstance(p, TextPart | MediaPart))
        verbatim, value = raw_value_of(body[0]) if len(body) == 1 else (False, None)
        if verbatim:
            out.update(type=kind, call_id=part.tool_call_id, output=value)
            return out
        if not body and "output" in part.extra.get(ABSENT, ()):
            out.update(type=kind, call_id=part.tool_call_id)
            return out
        if content_is_string(body, part.extra):
            output: str | list[Any] = body[0].text  # type: ignore[union-attr]
        elif not body and part.extra.get(SHAPE) != "list":
            output = ""
        else:
            output = [_render_part(p, "user") for p in body]
        out.update(type=kind, call_id=part.tool_call_id, output=output)
        return out
    assert isinstance(part, ReasoningPart)
    stored = part.extra.get(SUMMARY)
    if isinstance(stored, list) and _summary_text(stored) == part.text:
        summary = stored
    else:
        summary = [{"type": "summary_text", "text": part.text}] if part.text else []
    out.update(type="reasoning", summary=summary)
    if part.data is not None:
        out["encrypted_content"] = part.data
    return drop_absent(out, part.extra)


def _summary_text(summary: list[Any]) -> str | None:
    texts = [e.get("text") for e in summary if isinstance(e, Mapping)]
    if len(texts) != len(summary) or not all(isinstance(t, str) for t in texts):
        return None
    return "\n\n".join(texts)  # type: ignore[arg-type]


def _render_part(part: Part, role: str) -> dict[str, Any]:
    raw = raw_of(part)
    if raw is not None:
        return dict(raw)
    out = public(part.extra)
    if isinstance(part, TextPart):
        kind = part.extra.get(TYPE, _default_type(role))
        if kind == "refusal":
            out.update(type="refusal", refusal=part.text)
        else:
            out.update(type=kind, text=part.text)
        return out
    if not isinstance(part, MediaPart):
        return {"type": _default_type(role), "text": getattr(part, "text", "")}
    if part.media == "image":
        out.update(type="input_image", detail=out.get("detail", "auto"))
        if part.data is not None:
            out["image_url"] = data_url(part)
        elif part.url is not None:
            out["image_url"] = part.url
        return drop_absent(out, part.extra)
    if part.media == "audio":
        fmt = (part.media_type or "audio/wav").removeprefix("audio/")
        out.update(type="input_audio", input_audio={"data": part.data or "", "format": fmt})
        return out
    out["type"] = "input_file"
    if part.data is not None:
        out["file_data"] = part.data if part.extra.get(PLAIN_DATA) else data_url(part)
    if part.url is not None:
        out["file_url"] = part.url
    return out


# -- tools --------------------------------------------------------------------------------------


def _parse_tool(value: object, path: str) -> ToolDefinition:
    tool = expect_obj(value, path)
    kind = tool.get("type", "function")
    if kind != "function":
        name = tool.get("name")
        return ToolDefinition(name=name if isinstance(name, str) else str(kind), extra={RAW: tool})
    name = expect_str(tool.get("name", MISSING), join(path, "name"))
    consumed = ["type", "name"]
    description = opt_str(tool, "description", path)
    if description is not None:
        consumed.append("description")
    parameters: Mapping[str, Any] = {}
    if tool.get("parameters") is not None:
        parameters = expect_obj(tool["parameters"], join(path, "parameters"))
        consumed.append("parameters")
    extra = extra_of(tool, consumed, path)
    mark_absent(extra, tool, ("type", "description", "parameters"))
    return ToolDefinition(
        name=name, description=description or "", parameters=parameters, extra=extra
    )


def _render_tool(tool: ToolDefinition) -> dict[str, Any]:
    raw = tool.extra.get(RAW)
    if isinstance(raw, Mapping):
        return dict(raw)
    out = public(tool.extra)
    out["type"] = "function"
    out["name"] = tool.name
    if tool.description or "description" not in out:
        out["description"] = tool.description
    if tool.parameters or "parameters" not in out:
        out["parameters"] = dict(tool.parameters)
    return drop_absent(out, tool.extra)
