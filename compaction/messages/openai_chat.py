"""The OpenAI Chat Completions adapter: a request body to a :class:`Context` and back.

System and developer prompts stay messages (``Context.system`` is empty on parse); a ``tool``
message becomes a message holding one :class:`ToolResultPart`; ``reasoning_content`` becomes a
leading :class:`ReasoningPart`. ``max_tokens`` or ``max_completion_tokens`` is the output reserve.
Everything else is kept in ``extra`` so that ``render(parse(body)) == body``.

Example:
    >>> ctx = parse({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]})
    >>> ctx.messages[0].text
    'hi'
    >>> render(ctx)
    {'model': 'gpt-4o', 'messages': [{'role': 'user', 'content': 'hi'}]}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from compaction.messages._common import (
    INNER,
    ITEM,
    LEGACY,
    MAX_KEY,
    MISSING,
    PLAIN_DATA,
    RAW,
    SHAPE,
    TYPE,
    add_explicit,
    check_depth,
    content_is_string,
    data_url,
    drop_absent,
    expect_list,
    expect_obj,
    expect_str,
    explicit,
    extra_of,
    join,
    list_shape,
    mark_absent,
    opt_int,
    opt_str,
    public,
    raw_message,
    raw_of,
    raw_part,
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

__all__ = ["MESSAGES", "build", "parse", "parse_message", "render"]

#: The request key of the message list.
MESSAGES = "messages"
#: The request's keys that hold tool definitions (``functions``: the legacy ones).
TOOL_KEYS = ("tools", "functions")

_ROLES: dict[str, Role] = {
    "system": "system",
    "developer": "developer",
    "user": "user",
    "assistant": "assistant",
    "tool": "tool",
}


def parse(request: Mapping[str, Any]) -> Context:
    """Parse a Chat Completions request body into a :class:`Context`.

    Raises:
        FormatError: naming the first malformed field (``messages.2.role``).
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
    parsed: list[ToolDefinition] = []
    for key in TOOL_KEYS:
        if req.get(key) is None:
            continue
        consumed.add(key)
        items = expect_list(req[key], key)
        if not items:
            add_explicit(extra, key)
        if tools is not None:
            continue
        for i, tool in enumerate(items):
            path = join(key, i)
            parsed.append(
                _parse_function(tool, path) if key == "functions" else _parse_tool(tool, path)
            )
    max_output_tokens = None
    for key in ("max_completion_tokens", "max_tokens"):
        value = opt_int(req, key, "")
        if value is not None and max_output_tokens is None:
            max_output_tokens = value
            consumed.add(key)
            if key == "max_tokens":
                extra[MAX_KEY] = key
    extra.update(extra_of(req, consumed, ""))
    return Context(
        format="openai-chat",
        messages=messages,
        tools=tools if tools is not None else tuple(parsed),
        max_output_tokens=max_output_tokens,
        extra=extra,
    )


def render(context: Context) -> dict[str, Any]:
    """Render a :class:`Context` as a Chat Completions request body.

    A context parsed from this format renders back exactly; one built from model objects renders
    as a valid request (tool results become ``tool`` messages, ``system`` a leading message).
    """
    out = public(context.extra)
    messages: list[dict[str, Any]] = []
    if context.system:
        text = "\n\n".join(p.text for p in context.system if isinstance(p, TextPart))
        messages.append({"role": "system", "content": text})
    for message in context.messages:
        messages.extend(_render_message(message))
    out["messages"] = messages
    tools = [_render_tool(t) for t in context.tools if not t.extra.get(LEGACY)]
    functions = [_render_function(t) for t in context.tools if t.extra.get(LEGACY)]
    if tools or explicit(context.extra, "tools"):
        out["tools"] = tools
    if functions or explicit(context.extra, "functions"):
        out["functions"] = functions
    if context.max_output_tokens is not None:
        out[context.extra.get(MAX_KEY, "max_completion_tokens")] = context.max_output_tokens
    return out


# -- messages -----------------------------------------------------------------------------------


def parse_message(value: object, path: str) -> Message:
    """One item of ``messages`` (at ``path``, such as ``messages.3``) as a :class:`Message`."""
    msg = expect_obj(value, path)
    role = expect_str(msg.get("role", MISSING), join(path, "role"))
    if role == "function":
        return _parse_function_message(msg, path)
    if role not in _ROLES:
        # A role this adapter does not know: the message kept whole, verbatim, as configuration.
        extra_of(msg, (), path)
        return Message(role="system", parts=(raw_message(msg, path),))
    consumed = {"role"}
    extra: dict[str, Any] = {}
    parts: list[Part] = []
    reasoning = opt_str(msg, "reasoning_content", path)
    if reasoning is not None:
        parts.append(ReasoningPart(text=reasoning))
        consumed.add("reasoning_content")
    name = opt_str(msg, "name", path)
    if name is not None:
        consumed.add("name")
    content = _parse_content(msg, path, consumed, extra)
    if role == "tool":
        call_id = expect_str(msg.get("tool_call_id", MISSING), join(path, "tool_call_id"))
        consumed.add("tool_call_id")
        result_extra: dict[str, Any] = {}
        if SHAPE in extra:
            result_extra[SHAPE] = extra.pop(SHAPE)
        parts.append(ToolResultPart(tool_call_id=call_id, content=content, extra=result_extra))
    else:
        parts.extend(content)
    if msg.get("tool_calls") is not None:
        consumed.add("tool_calls")
        calls = expect_list(msg["tool_calls"], join(path, "tool_calls"))
        if not calls:
            add_explicit(extra, "tool_calls")
        parts.extend(_parse_tool_call(c, join(path, "tool_calls", i)) for i, c in enumerate(calls))
    if msg.get("function_call") is not None:
        consumed.add("function_call")
        parts.append(_parse_function_call(msg["function_call"], join(path, "function_call")))
    extra.update(extra_of(msg, consumed, path))
    return Message(role=_ROLES[role], parts=tuple(parts), name=name, extra=extra)


def _parse_function_message(msg: Mapping[str, Any], path: str) -> Message:
    consumed = {"role"}
    extra: dict[str, Any] = {LEGACY: True}
    name = opt_str(msg, "name", path)
    if name is not None:
        consumed.add("name")
    content = _parse_content(msg, path, consumed, extra)
    result_extra: dict[str, Any] = {}
    if SHAPE in extra:
        result_extra[SHAPE] = extra.pop(SHAPE)
    extra.update(extra_of(msg, consumed, path))
    result = ToolResultPart(tool_call_id="", content=content, extra=result_extra)
    return Message(role="tool", parts=(result,), name=name, extra=extra)


def _parse_content(
    msg: Mapping[str, Any], path: str, consumed: set[str], extra: dict[str, Any]
) -> tuple[Part, ...]:
    content = msg.get("content")
    if content is None:
        return ()
    consumed.add("content")
    if isinstance(content, str):
        return (TextPart(text=content),)
    items = expect_list(content, join(path, "content"))
    parts = [_parse_part(item, join(path, "content", i)) for i, item in enumerate(items)]
    list_shape(parts, extra)
    return tuple(parts)


def _parse_part(value: object, path: str) -> Part:
    block = expect_obj(value, path)
    kind = expect_str(block.get("type", MISSING), join(path, "type"))
    if kind == "text":
        text = expect_str(block.get("text", MISSING), join(path, "text"))
        return TextPart(text=text, extra=extra_of(block, ("type", "text"), path))
    if kind == "refusal":
        text = expect_str(block.get("refusal", MISSING), join(path, "refusal"))
        return TextPart(
            text=text, extra={TYPE: "refusal", **extra_of(block, ("type", "refusal"), path)}
        )
    if kind == "image_url":
        return _parse_image(block, path)
    if kind == "input_audio":
        inner_path = join(path, "input_audio")
        audio = expect_obj(block.get("input_audio", MISSING), inner_path)
        data = expect_str(audio.get("data", MISSING), join(inner_path, "data"))
        fmt = expect_str(audio.get("format", MISSING), join(inner_path, "format"))
        extra = extra_of(block, ("type", "input_audio"), path)
        inner = extra_of(audio, ("data", "format"), inner_path)
        if inner:
            extra[INNER] = inner
        return MediaPart(media="audio", media_type=f"audio/{fmt}", data=data, extra=extra)
    if kind == "file":
        return _parse_file(block, path)
    return raw_part(block, path)


def _parse_image(block: Mapping[str, Any], path: str) -> MediaPart:
    extra = extra_of(block, ("type", "image_url"), path)
    inner_path = join(path, "image_url")
    value = block.get("image_url", MISSING)
    if isinstance(value, str):
        extra[INNER] = "string"
        url = value
    else:
        image = expect_obj(value, inner_path)
        url = expect_str(image.get("url", MISSING), join(inner_path, "url"))
        inner = extra_of(image, ("url",), inner_path)
        if inner:
            extra[INNER] = inner
    split = split_data_url(url)
    if split is not None:
        return MediaPart(media="image", media_type=split[0], data=split[1], extra=extra)
    return MediaPart(media="image", url=url, extra=extra)


def _parse_file(block: Mapping[str, Any], path: str) -> MediaPart:
    extra = extra_of(block, ("type", "file"), path)
    inner_path = join(path, "file")
    file = expect_obj(block.get("file", MISSING), inner_path)
    file_data = opt_str(file, "file_data", inner_path)
    inner = extra_of(file, ("file_data",) if file_data is not None else (), inner_path)
    if inner:
        extra[INNER] = inner
    if file_data is None:
        return MediaPart(media="file", extra=extra)
    split = split_data_url(file_data)
    if split is None:
        extra[PLAIN_DATA] = True
        return MediaPart(media="file", data=file_data, extra=extra)
    return MediaPart(media="file", media_type=split[0], data=split[1], extra=extra)


def _parse_tool_call(value: object, path: str) -> ToolCallPart:
    call = expect_obj(value, path)
    call_id = expect_str(call.get("id", MISSING), join(path, "id"))
    kind = call.get("type", "function")
    if kind != "function":
        return ToolCallPart(id=call_id, name=str(kind), arguments="", extra={RAW: call})
    fn_path = join(path, "function")
    fn = expect_obj(call.get("function", MISSING), fn_path)
    name = expect_str(fn.get("name", MISSING), join(fn_path, "name"))
    arguments = expect_str(fn.get("arguments", MISSING), join(fn_path, "arguments"))
    extra = extra_of(call, ("id", "function", "type"), path)
    mark_absent(extra, call, ("type",))
    inner = extra_of(fn, ("name", "arguments"), fn_path)
    if inner:
        extra[INNER] = inner
    return ToolCallPart(id=call_id, name=name, arguments=arguments, extra=extra)


def _parse_function_call(value: object, path: str) -> ToolCallPart:
    call = expect_obj(value, path)
    name = expect_str(call.get("name", MISSING), join(path, "name"))
    arguments = expect_str(call.get("arguments", MISSING), join(path, "arguments"))
    extra = {LEGACY: True, **extra_of(call, ("name", "arguments"), path)}
    return ToolCallPart(id="", name=name, arguments=arguments, extra=extra)


def _render_message(message: Message) -> list[dict[str, Any]]:
    if len(message.parts) == 1 and message.parts[0].extra.get(ITEM):
        raw = raw_of(message.parts[0])
        if raw is not None:
            return [dict(raw)]
    if message.role == "tool":
        return _render_tool_message(message)
    out: list[dict[str, Any]] = []
    # Tool results outside a tool message (another format's user message) become tool messages.
    for result in message.tool_results:
        out.append({"role": "tool", "tool_call_id": result.tool_call_id, **_content(result)})
    msg = public(message.extra)
    msg["role"] = message.role
    if message.name is not None:
        msg["name"] = message.name
    body = tuple(p for p in message.parts if isinstance(p, TextPart | MediaPart))
    reasoning = [p.text for p in message.parts if isinstance(p, ReasoningPart) and not p.redacted]
    calls = message.tool_calls
    if reasoning:
        msg["reasoning_content"] = "\n".join(reasoning)
    if body or message.extra.get(SHAPE) == "list":
        msg["content"] = _render_content(body, message.extra)
    tool_calls = [_render_tool_call(c) for c in calls if not c.extra.get(LEGACY)]
    if tool_calls or explicit(message.extra, "tool_calls"):
        msg["tool_calls"] = tool_calls
    for call in calls:
        if call.extra.get(LEGACY):
            msg["function_call"] = {
                **public(call.extra),
                "name": call.name,
                "arguments": call.arguments,
            }
    if not message.tool_results or set(msg) - {"role"}:
        out.append(msg)
    return out


def _render_tool_message(message: Message) -> list[dict[str, Any]]:
    legacy = bool(message.extra.get(LEGACY))
    results = message.tool_results
    loose = tuple(p for p in message.parts if isinstance(p, TextPart | MediaPart))
    if not results:
        results = (ToolResultPart(tool_call_id="", content=loose),)
    elif loose:
        first = results[0]
        merged = ToolResultPart(first.tool_call_id, first.content + loose, extra=first.extra)
        results = (merged, *results[1:])
    out = []
    for result in results:
        msg = public(message.extra)
        msg["role"] = "function" if legacy else "tool"
        if message.name is not None:
            msg["name"] = message.name
        if not legacy:
            msg["tool_call_id"] = result.tool_call_id
        msg.update(_content(result))
        out.append(msg)
    return out


def _content(result: ToolResultPart) -> dict[str, Any]:
    body = tuple(p for p in result.content if isinstance(p, TextPart | MediaPart))
    if body or result.extra.get(SHAPE) == "list":
        return {"content": _render_content(body, result.extra)}
    return {}


def _render_content(parts: tuple[Part, ...], extra: Mapping[str, Any]) -> str | list[Any]:
    if content_is_string(parts, extra):
        return parts[0].text  # type: ignore[union-attr]
    return [_render_part(p) for p in parts]


def _render_part(part: Part) -> dict[str, Any]:
    raw = raw_of(part)
    if raw is not None:
        return dict(raw)
    out = public(part.extra)
    if isinstance(part, TextPart):
        if part.extra.get(TYPE) == "refusal":
            out.update(type="refusal", refusal=part.text)
        else:
            out.update(type="text", text=part.text)
        return out
    if not isinstance(part, MediaPart):
        return {"type": "text", "text": ""}
    inner = part.extra.get(INNER)
    if part.media == "image":
        url = data_url(part) if part.data is not None else (part.url or "")
        if inner == "string":
            out.update(type="image_url", image_url=url)
        else:
            out.update(type="image_url", image_url={**(inner or {}), "url": url})
        return out
    if part.media == "audio":
        fmt = (part.media_type or "audio/wav").removeprefix("audio/")
        audio = {**(inner or {}), "data": part.data or "", "format": fmt}
        out.update(type="input_audio", input_audio=audio)
        return out
    file: dict[str, Any] = dict(inner or {})
    if part.data is not None:
        file["file_data"] = part.data if part.extra.get(PLAIN_DATA) else data_url(part)
    out.update(type="file", file=file)
    return out


def _render_tool_call(call: ToolCallPart) -> dict[str, Any]:
    raw = call.extra.get(RAW)
    if isinstance(raw, Mapping):
        return dict(raw)
    out = public(call.extra)
    out.update(
        id=call.id,
        type="function",
        function={**call.extra.get(INNER, {}), "name": call.name, "arguments": call.arguments},
    )
    return drop_absent(out, call.extra)


# -- tools --------------------------------------------------------------------------------------


def _parse_tool(value: object, path: str) -> ToolDefinition:
    tool = expect_obj(value, path)
    kind = tool.get("type", "function")
    if kind != "function":
        name = tool.get("name")
        return ToolDefinition(name=name if isinstance(name, str) else str(kind), extra={RAW: tool})
    extra = extra_of(tool, ("type", "function"), path)
    mark_absent(extra, tool, ("type",))
    fn = _parse_function(tool.get("function", MISSING), join(path, "function"))
    inner = {k: v for k, v in fn.extra.items() if k != LEGACY}
    if inner:
        extra[INNER] = inner
    return ToolDefinition(
        name=fn.name, description=fn.description, parameters=fn.parameters, extra=extra
    )


def _parse_function(value: object, path: str) -> ToolDefinition:
    fn = expect_obj(value, path)
    name = expect_str(fn.get("name", MISSING), join(path, "name"))
    consumed = ["name"]
    description = opt_str(fn, "description", path)
    if description is not None:
        consumed.append("description")
    parameters: Mapping[str, Any] = {}
    if fn.get("parameters") is not None:
        parameters = expect_obj(fn["parameters"], join(path, "parameters"))
        consumed.append("parameters")
    extra: dict[str, Any] = {LEGACY: True, **extra_of(fn, consumed, path)}
    mark_absent(extra, fn, ("description", "parameters"))
    return ToolDefinition(
        name=name, description=description or "", parameters=parameters, extra=extra
    )


def _render_function(tool: ToolDefinition) -> dict[str, Any]:
    out = public(tool.extra)
    out["name"] = tool.name
    if tool.description or "description" not in out:
        out["description"] = tool.description
    if tool.parameters or "parameters" not in out:
        out["parameters"] = dict(tool.parameters)
    return drop_absent(out, tool.extra)


def _render_tool(tool: ToolDefinition) -> dict[str, Any]:
    raw = tool.extra.get(RAW)
    if isinstance(raw, Mapping):
        return dict(raw)
    inner = tool.extra.get(INNER, {})
    fn = ToolDefinition(tool.name, tool.description, tool.parameters, extra=inner)
    out = public(tool.extra)
    out.update(type="function", function=_render_function(fn))
    return drop_absent(out, tool.extra)
