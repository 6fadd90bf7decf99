"""Model calls recorded as OpenTelemetry spans, rebuilt as the requests that were sent.

Instrumented agents describe each model call as a span. Four dialects are seen in the wild
(``docs/ingest-formats.md`` §3.2-3.4), read in this order of precedence:

- **Langfuse** (``langfuse.observation.input`` / ``.output`` as JSON, ``.model.name``,
  ``.usage_details``), as the Langfuse SDK sends them;
- **OpenTelemetry GenAI, current** (``gen_ai.input.messages`` / ``gen_ai.output.messages`` made of
  parts, ``gen_ai.system_instructions``, ``gen_ai.tool.definitions``, ``gen_ai.usage.*``);
- **OpenInference** (the raw request in ``input.value`` when its mime type is JSON, else
  ``llm.input_messages.N.message.*`` and ``llm.tools.N.tool.json_schema``, ``llm.token_count.*``);
- **OpenTelemetry GenAI, older** (``gen_ai.prompt.N.*`` / ``gen_ai.completion.N.*``, and the
  per-message span events ``gen_ai.{system,user,assistant,tool}.message`` and ``gen_ai.choice``).

Each becomes the request of one of the message formats (``openai-chat`` unless the span carries
an Anthropic or Responses request verbatim), so regions, counting and strategies work unchanged:
tool calls keep their ids, so they pair with their results. Usage is normalized as
:func:`compaction.usage.normalize_usage` does (input tokens include cache reads and writes).

Pure functions over plain values: a :class:`Span` is built by whoever decoded the export
(protobuf or OTLP JSON).

Example:
    >>> hi = {"role": "user", "parts": [{"type": "text", "content": "hi"}]}
    >>> span = Span("t1", "s1", "chat gpt-4o", 1, {
    ...     "gen_ai.request.model": "gpt-4o", "gen_ai.input.messages": [hi],
    ...     "gen_ai.usage.input_tokens": 3, "gen_ai.usage.output_tokens": 1})
    >>> call = captured_call(span)
    >>> call.dialect, call.format, call.request["messages"], call.usage["input_tokens"]
    ('gen_ai', 'openai-chat', [{'role': 'user', 'content': 'hi'}], 3)
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from compaction.errors import FormatError
from compaction.usage import token_count

__all__ = [
    "CapturedCall",
    "Span",
    "SpanEvent",
    "captured_call",
    "gen_ai_attributes",
    "langfuse_call",
    "langfuse_usage",
    "session_key",
]

#: Attributes naming a conversation, span first, then resource (``docs/ingest-formats.md`` §3.2).
SESSION_ATTRIBUTES = ("session.id", "gen_ai.conversation.id", "langfuse.session.id")


@dataclass(frozen=True)
class SpanEvent:
    name: str
    attributes: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Span:
    """A span as decoded from an export: hex ids, start time in Unix nanoseconds, attributes as
    plain values (strings, numbers, booleans, lists, dicts)."""

    trace_id: str
    span_id: str
    name: str
    start: int
    attributes: Mapping[str, Any] = field(default_factory=dict)
    events: tuple[SpanEvent, ...] = ()
    resource: Mapping[str, Any] = field(default_factory=dict)
    scope: str = ""


@dataclass(frozen=True)
class CapturedCall:
    """One model call rebuilt from a span: the request in ``format``, what the model answered
    (messages of the same format), normalized usage, and what the span did not record."""

    dialect: str
    format: str
    request: dict[str, Any]
    response: list[dict[str, Any]]
    usage: dict[str, int] | None
    model: str | None
    unknown: tuple[str, ...]


def session_key(span: Span) -> str:
    """The conversation a span belongs to: ``session.id``, ``gen_ai.conversation.id`` or
    ``langfuse.session.id`` (span, then resource), else its trace id."""
    for attributes in (span.attributes, span.resource):
        for name in SESSION_ATTRIBUTES:
            value = attributes.get(name)
            if isinstance(value, str) and value.strip():
                return value.strip()
    return span.trace_id


def captured_call(span: Span) -> CapturedCall | None:
    """The model call ``span`` records, or None when it records none (a tool, an agent, an HTTP
    call: accepted and ignored).

    Raises:
        FormatError: an LLM span whose content cannot be read (malformed JSON, a message with
            no role); ``path`` names the attribute.
    """
    a = span.attributes
    if "langfuse.observation.input" in a and _is_generation(a):
        return _langfuse(span)
    if _raw_request(a) is not None:  # the request as sent beats any restatement of it
        return _openinference(span)
    if "gen_ai.input.messages" in a:
        return _gen_ai(span)
    if a.get("openinference.span.kind") == "LLM" or "llm.input_messages.0.message.role" in a:
        return _openinference(span)
    if "gen_ai.prompt.0.role" in a or "gen_ai.prompt.0.content" in a or _message_events(span):
        return _gen_ai_legacy(span)
    return None


# --- shared helpers ------------------------------------------------------------------------------


class _NotFinite(ValueError):
    """JSON text holding ``NaN`` or an infinite number, which :mod:`json` reads and no database
    stores (PostgreSQL's ``jsonb`` and SQLite's ``JSON_VALID`` refuse it) nor client reads back."""


def _no_constant(name: str) -> Any:
    raise _NotFinite(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _NotFinite(f"{text} is out of range for a JSON number")
    return value


def _loads(text: str) -> Any:
    """:func:`json.loads`, refusing what JSON has no number for (``NaN``, ``Infinity``, ``1e999``)
    with :class:`_NotFinite`."""
    return json.loads(text, parse_constant=_no_constant, parse_float=_finite)


def _json(value: Any, path: str) -> Any:
    """An attribute that holds JSON: a string is decoded, structured values pass through."""
    if not isinstance(value, str):
        return value
    try:
        return _loads(value)
    except (ValueError, RecursionError) as error:
        raise FormatError(path, f"is not JSON ({error})") from None


def _object(value: Any) -> Mapping[str, Any]:
    """``value`` when it is an object, else an empty one: a flattened attribute can be a leaf
    where a convention nests (``tool_calls.0.function`` given as text)."""
    return value if isinstance(value, Mapping) else {}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _count(a: Mapping[str, Any], name: str | None, prefix: str = "") -> int:
    """The token count in attribute (or key) ``name`` of ``a``, 0 when absent: a whole number
    within :data:`compaction.usage.MAX_TOKENS`, as a number or as ASCII digits
    (:func:`compaction.usage.token_count`); an error names ``prefix`` and ``name``."""
    if name is None:
        return 0
    return token_count(a.get(name), f"{prefix}{name}", text=True)


def _usage(
    a: Mapping[str, Any],
    input_tokens: str,
    output_tokens: str,
    read: str | None = None,
    write: str | None = None,
    *,
    prefix: str = "",
) -> dict[str, int]:
    """Usage from the counts ``a`` holds under the names given (cache reads and writes are
    optional), each checked as :func:`_count` does."""
    return {
        "input_tokens": _count(a, input_tokens, prefix),
        "output_tokens": _count(a, output_tokens, prefix),
        "cache_read_tokens": _count(a, read, prefix),
        "cache_write_tokens": _count(a, write, prefix),
    }


def _model(a: Mapping[str, Any]) -> str | None:
    for name in (
        "langfuse.observation.model.name",
        "gen_ai.request.model",
        "gen_ai.response.model",
        "llm.model_name",
        "model",
    ):
        value = a.get(name)
        if isinstance(value, str) and value:
            return value
    return None


def _chat_request(
    a: Mapping[str, Any], messages: list[dict[str, Any]], tools: list[dict[str, Any]]
) -> dict[str, Any]:
    request: dict[str, Any] = {"model": _model(a) or "unknown", "messages": messages}
    if tools:
        request["tools"] = tools
    max_tokens = _count(a, "gen_ai.request.max_tokens")
    if max_tokens:
        request["max_tokens"] = max_tokens
    return request


def _call(
    dialect: str,
    a: Mapping[str, Any],
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    response: list[dict[str, Any]],
    usage: dict[str, int] | None,
) -> CapturedCall:
    return CapturedCall(
        dialect=dialect,
        format="openai-chat",
        request=_chat_request(a, messages, tools),
        response=response,
        usage=usage,
        model=_model(a),
        unknown=() if tools else ("tools",),
    )


def _function_tool(name: Any, description: Any = None, parameters: Any = None) -> dict[str, Any]:
    function: dict[str, Any] = {"name": str(name)}
    if description:
        function["description"] = str(description)
    if isinstance(parameters, Mapping):
        function["parameters"] = dict(parameters)
    return {"type": "function", "function": function}


def _tool_call(call_id: Any, name: Any, arguments: Any) -> dict[str, Any]:
    return {
        "id": str(call_id or ""),
        "type": "function",
        "function": {
            "name": str(name or ""),
            "arguments": _text(arguments if arguments is not None else {}),
        },
    }


# --- OpenTelemetry GenAI, current: messages of parts ---------------------------------------------


def _part_content(part: Mapping[str, Any]) -> dict[str, Any] | None:
    """A text or media part as an OpenAI Chat content part (None for parts without one)."""
    kind = part.get("type")
    if kind == "text":
        return {"type": "text", "text": _text(part.get("content", ""))}
    if kind in ("blob", "uri") and part.get("modality") == "image":
        if kind == "uri":
            url = str(part.get("uri", ""))
        else:
            url = f"data:{part.get('mime_type') or 'image/png'};base64,{part.get('content', '')}"
        return {"type": "image_url", "image_url": {"url": url}}
    if kind in ("blob", "uri", "file"):
        what = part.get("uri") or part.get("file_id") or part.get("mime_type") or "content"
        return {"type": "text", "text": f"[{part.get('modality', 'file')}: {what}]"}
    return None


def _content(parts: list[dict[str, Any]]) -> Any:
    if len(parts) == 1 and parts[0]["type"] == "text":
        return parts[0]["text"]
    return parts or None


def _parts_messages(raw: Any, path: str) -> list[dict[str, Any]]:
    """OTel GenAI messages (``{role, parts, name?}``) as OpenAI Chat messages."""
    messages: list[dict[str, Any]] = []
    if not isinstance(raw, list):
        raise FormatError(path, "expected a list of messages")
    for i, message in enumerate(raw):
        if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
            raise FormatError(f"{path}.{i}.role", "a message needs a role")
        role = message["role"]
        parts = message.get("parts") or []
        if not isinstance(parts, list):
            raise FormatError(f"{path}.{i}.parts", "expected a list of parts")
        parts = [p for p in parts if isinstance(p, Mapping)]
        if role == "tool" or any(p.get("type") == "tool_call_response" for p in parts):
            for part in parts:
                if part.get("type") == "tool_call_response":
                    result = part.get("response", part.get("result", ""))
                    messages.append(
                        {
                            "role": "tool",
                            "tool_call_id": str(part.get("id") or ""),
                            "content": _text(result),
                        }
                    )
            continue
        content = [c for c in (_part_content(p) for p in parts) if c is not None]
        out: dict[str, Any] = {"role": role, "content": _content(content)}
        calls = [
            _tool_call(p.get("id"), p.get("name"), p.get("arguments"))
            for p in parts
            if p.get("type") == "tool_call"
        ]
        if role == "assistant" and calls:
            out["tool_calls"] = calls
        elif out["content"] is None:
            out["content"] = ""
        if isinstance(message.get("name"), str) and role in ("user", "system"):
            out["name"] = message["name"]
        messages.append(out)
    return messages


def _system_instructions(raw: Any) -> str | None:
    """``gen_ai.system_instructions`` in either shape (parts, or messages of parts)."""
    if not isinstance(raw, list):
        return _text(raw) if raw else None
    texts: list[str] = []
    for item in raw:
        if isinstance(item, Mapping) and isinstance(item.get("parts"), list):
            texts += [_text(p.get("content", "")) for p in item["parts"] if isinstance(p, Mapping)]
        elif isinstance(item, Mapping) and item.get("type") == "text":
            texts.append(_text(item.get("content", "")))
    return "\n".join(texts) or None


def _gen_ai_tools(raw: Any) -> list[dict[str, Any]]:
    tools = []
    for item in raw if isinstance(raw, list) else []:
        if isinstance(item, Mapping) and isinstance(item.get("function"), Mapping):
            tools.append({"type": "function", "function": dict(item["function"])})
        elif isinstance(item, Mapping) and item.get("name"):
            tools.append(
                _function_tool(item["name"], item.get("description"), item.get("parameters"))
            )
    return tools


def _gen_ai_usage(a: Mapping[str, Any]) -> dict[str, int] | None:
    if "gen_ai.usage.input_tokens" in a or "gen_ai.usage.output_tokens" in a:
        return _usage(
            a,
            "gen_ai.usage.input_tokens",
            "gen_ai.usage.output_tokens",
            "gen_ai.usage.cache_read.input_tokens",
            "gen_ai.usage.cache_creation.input_tokens",
        )
    if "gen_ai.usage.prompt_tokens" in a:
        return _usage(a, "gen_ai.usage.prompt_tokens", "gen_ai.usage.completion_tokens")
    return None


def _gen_ai(span: Span) -> CapturedCall:
    a = span.attributes
    messages = _parts_messages(
        _json(a["gen_ai.input.messages"], "gen_ai.input.messages"), "gen_ai.input.messages"
    )
    system = _system_instructions(
        _json(a.get("gen_ai.system_instructions"), "gen_ai.system_instructions")
    )
    if system and not any(m["role"] == "system" for m in messages):
        messages.insert(0, {"role": "system", "content": system})
    tools = _gen_ai_tools(_json(a.get("gen_ai.tool.definitions"), "gen_ai.tool.definitions"))
    output = a.get("gen_ai.output.messages")
    response = (
        _parts_messages(_json(output, "gen_ai.output.messages"), "gen_ai.output.messages")
        if output
        else []
    )
    return _call("gen_ai", a, messages, tools, response, _gen_ai_usage(a))


# --- OpenTelemetry GenAI, older: flattened prompts and per-message events -----------------------


def _flattened(a: Mapping[str, Any], prefix: str) -> list[dict[str, Any]]:
    """``{prefix}.{i}.{key...}`` attributes as a list of nested dicts, in index order. An index
    is ASCII digits (``\\d`` would take ``²``, which :func:`int` refuses), of any length: ordered
    without :func:`int` (which refuses thousands of digits) by :func:`_index_order`."""
    found: dict[str, dict[str, Any]] = {}
    pattern = re.compile(re.escape(prefix) + r"\.([0-9]+)\.(.+)")
    for name, value in a.items():
        match = pattern.fullmatch(name)
        if match is None:
            continue
        node = found.setdefault(match.group(1).lstrip("0") or "0", {})
        *parents, leaf = match.group(2).split(".")
        for key in parents:
            child = node.get(key)
            if not isinstance(child, dict):
                child = node[key] = {}
            node = child
        node[leaf] = value
    return [found[i] for i in sorted(found, key=_index_order)]


def _index_order(index: str) -> tuple[int, str]:
    """The numeric order of indices written in ASCII digits, however many."""
    digits = index.lstrip("0") or "0"
    return len(digits), digits


def _indexed(node: Any) -> list[Any]:
    """A dict keyed by indices (``{"0": ..., "1": ...}``, ASCII digits) as a list, in index
    order; other keys (``"²"``, ``"x"``) are no index."""
    if not isinstance(node, Mapping):
        return []
    indices = [k for k in node if isinstance(k, str) and k.isascii() and k.isdigit()]
    return [node[k] for k in sorted(indices, key=_index_order)]


def _legacy_message(item: Mapping[str, Any], path: str) -> dict[str, Any]:
    role = item.get("role")
    if not isinstance(role, str):
        raise FormatError(f"{path}.role", "a message needs a role")
    message: dict[str, Any] = {"role": role, "content": item.get("content")}
    calls = [
        _tool_call(c.get("id"), c.get("name"), c.get("arguments"))
        for c in _indexed(item.get("tool_calls"))
        if isinstance(c, Mapping)
    ]
    if calls:
        message["tool_calls"] = calls
    elif message["content"] is None:
        message["content"] = ""
    if role == "tool":
        message["tool_call_id"] = str(item.get("tool_call_id") or item.get("id") or "")
        message["content"] = _text(message["content"] or "")
    elif message["content"] is not None and not isinstance(message["content"], str):
        message["content"] = _text(message["content"])
    return message


EVENT_ROLES = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}


def _message_events(span: Span) -> list[SpanEvent]:
    return [e for e in span.events if e.name in EVENT_ROLES or e.name == "gen_ai.choice"]


def _event_message(event: SpanEvent, path: str) -> dict[str, Any]:
    body: Mapping[str, Any] = event.attributes
    if "gen_ai.event.content" in body:
        decoded = _json(body["gen_ai.event.content"], f"{path}.gen_ai.event.content")
        body = decoded if isinstance(decoded, Mapping) else {"content": decoded}
    if event.name == "gen_ai.choice":
        message = _json(body.get("message"), f"{path}.message")
        body = message if isinstance(message, Mapping) else body
    role = EVENT_ROLES.get(event.name) or str(body.get("role") or "assistant")
    item: dict[str, Any] = {"role": role, "content": body.get("content")}
    calls = _json(body.get("tool_calls"), f"{path}.tool_calls")
    if isinstance(calls, list):
        item["tool_calls"] = {
            str(i): {
                "id": c.get("id"),
                "name": _object(c.get("function")).get("name", c.get("name")),
                "arguments": _object(c.get("function")).get("arguments", c.get("arguments")),
            }
            for i, c in enumerate(calls)
            if isinstance(c, Mapping)
        }
    if role == "tool":
        item["tool_call_id"] = body.get("id") or body.get("tool_call_id")
    return _legacy_message(item, path)


def _gen_ai_legacy(span: Span) -> CapturedCall:
    a = span.attributes
    prompts = _flattened(a, "gen_ai.prompt")
    if prompts:
        messages = [_legacy_message(p, f"gen_ai.prompt.{i}") for i, p in enumerate(prompts)]
        response = [
            _legacy_message(c, f"gen_ai.completion.{i}")
            for i, c in enumerate(_flattened(a, "gen_ai.completion"))
        ]
    else:
        events = _message_events(span)
        messages = [
            _event_message(e, f"events.{i}")
            for i, e in enumerate(events)
            if e.name != "gen_ai.choice"
        ]
        response = [
            _event_message(e, f"events.{i}")
            for i, e in enumerate(events)
            if e.name == "gen_ai.choice"
        ]
    tools = [
        _function_tool(
            f.get("name"), f.get("description"), _json(f.get("parameters"), "llm.request.functions")
        )
        for f in _flattened(a, "llm.request.functions")
        if f.get("name")
    ]
    return _call("gen_ai.legacy", a, messages, tools, response, _gen_ai_usage(a))


# --- OpenInference -------------------------------------------------------------------------------


def _request_format(request: Mapping[str, Any], provider: str) -> str:
    if "input" in request and "messages" not in request:
        return "openai-responses"
    if provider == "anthropic" or "system" in request or "anthropic_version" in request:
        return "anthropic-messages"
    return "openai-chat"


def _oi_message(item: Mapping[str, Any], path: str) -> dict[str, Any]:
    message = item.get("message") if isinstance(item.get("message"), Mapping) else item
    assert isinstance(message, Mapping)
    flat: dict[str, Any] = {"role": message.get("role")}
    content = message.get("content")
    contents = [
        c.get("message_content", c)
        for c in _indexed(message.get("contents"))
        if isinstance(c, Mapping)
    ]
    if content is None and contents:
        texts = [str(c.get("text", "")) for c in contents if c.get("type") == "text"]
        content = "\n".join(texts)
    flat["content"] = content
    flat["tool_calls"] = {
        str(i): {
            "id": _object(c.get("tool_call")).get("id"),
            "name": _object(_object(c.get("tool_call")).get("function")).get("name"),
            "arguments": _object(_object(c.get("tool_call")).get("function")).get("arguments"),
        }
        for i, c in enumerate(_indexed(message.get("tool_calls")))
        if isinstance(c, Mapping)
    }
    flat["tool_call_id"] = message.get("tool_call_id")
    return _legacy_message(flat, path)


def _raw_request(a: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The request as sent, when a span carries it (``input.value`` of JSON mime type)."""
    raw = a.get("input.value")
    if a.get("input.mime_type") != "application/json" or not isinstance(raw, str):
        return None
    try:
        request = _loads(raw)
    except _NotFinite as error:  # a request, but not one any database stores
        raise FormatError("input.value", f"is not JSON ({error})") from None
    except (ValueError, RecursionError):
        return None
    if isinstance(request, Mapping) and ("messages" in request or "input" in request):
        return request
    return None


def _openinference(span: Span) -> CapturedCall:
    a = span.attributes
    usage = None
    if "llm.token_count.prompt" in a or "llm.token_count.completion" in a:
        usage = _usage(
            a,
            "llm.token_count.prompt",
            "llm.token_count.completion",
            "llm.token_count.prompt_details.cache_read",
            "llm.token_count.prompt_details.cache_write",
        )
    provider = str(
        a.get("llm.provider") or a.get("llm.system") or a.get("gen_ai.provider.name") or ""
    )
    request = _raw_request(a)
    if request is not None:
        request = {k: v for k, v in request.items() if k not in ("stream", "stream_options")}
        format = str(a.get("ctxweb.format") or "") or _request_format(request, provider)
        response = [
            _oi_message(m, f"llm.output_messages.{i}")
            for i, m in enumerate(_flattened(a, "llm.output_messages"))
        ]
        has_tools = bool(request.get("tools"))
        return CapturedCall(
            dialect="raw" if "openinference.span.kind" not in a else "openinference",
            format=format,
            request=dict(request),
            response=response if format == "openai-chat" else [],
            usage=usage or _gen_ai_usage(a),
            model=_model(a) or (str(request.get("model")) if request.get("model") else None),
            unknown=() if has_tools else ("tools",),
        )
    messages = [
        _oi_message(m, f"llm.input_messages.{i}")
        for i, m in enumerate(_flattened(a, "llm.input_messages"))
    ]
    response = [
        _oi_message(m, f"llm.output_messages.{i}")
        for i, m in enumerate(_flattened(a, "llm.output_messages"))
    ]
    tools = []
    for i, tool in enumerate(_flattened(a, "llm.tools")):
        schema = _json(
            _object(tool.get("tool")).get("json_schema"), f"llm.tools.{i}.tool.json_schema"
        )
        if isinstance(schema, Mapping) and isinstance(schema.get("function"), Mapping):
            tools.append({"type": "function", "function": dict(schema["function"])})
        elif isinstance(schema, Mapping) and schema.get("name"):
            tools.append(
                _function_tool(
                    schema["name"],
                    schema.get("description"),
                    schema.get("parameters") or schema.get("input_schema"),
                )
            )
    return _call("openinference", a, messages, tools, response, usage)


# --- Langfuse ------------------------------------------------------------------------------------


def _is_generation(a: Mapping[str, Any]) -> bool:
    kind = a.get("langfuse.observation.type")
    return kind == "generation" or (kind is None and _model(a) is not None)


def _first_key(details: Mapping[str, Any], *names: str) -> str | None:
    """The first of ``names`` that ``details`` gives a count other than 0."""
    return next((n for n in names if details.get(n) is not None and details[n] != 0), None)


def langfuse_usage(details: Any, path: str = "usage") -> dict[str, int] | None:
    """Langfuse usage (``usageDetails``, the legacy ``usage``, or an OpenAI usage object passed
    through) normalized: Langfuse's ``input`` is what was neither read from nor written to the
    cache, so those are added back. Each count is checked as :func:`compaction.usage.token_count`
    does, an error naming ``path`` and the key (``usage.input``); their sum is checked where it
    is stored (:func:`compaction.usage.normalize_usage`)."""
    if not isinstance(details, Mapping):
        return None
    read = _first_key(details, "input_cached_tokens", "cache_read_input_tokens")
    write = _first_key(details, "input_cache_creation", "cache_creation_input_tokens")
    prefix = f"{path}."
    if "prompt_tokens" in details or "promptTokens" in details:  # OpenAI-style
        prompt = "prompt_tokens" if "prompt_tokens" in details else "promptTokens"
        completion = "completion_tokens" if "completion_tokens" in details else "completionTokens"
        return _usage(details, prompt, completion, read, write, prefix=prefix)
    if "input" not in details and "output" not in details:
        return None
    usage = _usage(details, "input", "output", read, write, prefix=prefix)
    usage["input_tokens"] += usage["cache_read_tokens"] + usage["cache_write_tokens"]
    return usage


def langfuse_call(
    *,
    input: Any,
    output: Any,
    model: str | None,
    usage: Any,
    parameters: Any = None,
    provider: str = "",
    usage_path: str = "usage",
) -> CapturedCall:
    """A Langfuse generation (``input`` messages or request, ``output``, ``model``, usage
    details, model parameters) as the call it records.

    Raises:
        FormatError: ``input`` is neither a list of messages nor a request, or a count of
            ``usage`` is no token count (the error names ``usage_path`` and its key).
    """
    request: Mapping[str, Any]
    if isinstance(input, list):
        request = {"messages": input}
    elif isinstance(input, Mapping) and ("messages" in input or "input" in input):
        request = input
    else:
        raise FormatError("input", "expected a list of messages or a request")
    request = {"model": model or "unknown", **request}
    if isinstance(parameters, Mapping) and "tools" in parameters and "tools" not in request:
        request["tools"] = _json(parameters["tools"], "model.parameters.tools")
    format = _request_format(request, provider)
    response: list[dict[str, Any]] = []
    if isinstance(output, Mapping) and output.get("role"):
        response = [dict(output)]
    elif isinstance(output, list):
        response = [dict(m) for m in output if isinstance(m, Mapping) and m.get("role")]
    return CapturedCall(
        dialect="langfuse",
        format=format,
        request=dict(request),
        response=response if format == "openai-chat" else [],
        usage=langfuse_usage(usage, usage_path),
        model=model,
        unknown=() if request.get("tools") else ("tools",),
    )


def _langfuse(span: Span) -> CapturedCall:
    a = span.attributes
    details = _json(
        a.get("langfuse.observation.usage_details"), "langfuse.observation.usage_details"
    )
    try:
        call = langfuse_call(
            input=_json(a["langfuse.observation.input"], "langfuse.observation.input"),
            output=_json(a.get("langfuse.observation.output"), "langfuse.observation.output"),
            model=_model(a),
            usage=details,
            parameters=_json(
                a.get("langfuse.observation.model.parameters"),
                "langfuse.observation.model.parameters",
            ),
            provider=str(a.get("gen_ai.system") or a.get("gen_ai.provider.name") or ""),
            usage_path="usage_details",
        )
    except FormatError as error:
        if error.path.startswith("langfuse.observation."):  # an attribute, named already
            raise
        raise FormatError(f"langfuse.observation.{error.path}", error.reason) from None
    if call.usage is None:
        return replace(call, usage=_gen_ai_usage(a))
    return call


# --- out: a call as an OpenTelemetry GenAI span's attributes ------------------------------------

PROVIDERS = {
    "openai-chat": "openai",
    "openai-responses": "openai",
    "anthropic-messages": "anthropic",
}


def _arguments(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return text


def _gen_ai_part(part: Any) -> dict[str, Any]:
    kind = getattr(part, "kind", "")
    if kind == "text":
        return {"type": "text", "content": part.text}
    if kind == "reasoning":
        return {"type": "reasoning", "content": part.text}
    if kind == "tool_call":
        return {
            "type": "tool_call",
            "id": part.id,
            "name": part.name,
            "arguments": _arguments(part.arguments),
        }
    if kind == "tool_result":
        texts = [getattr(p, "text", "") for p in part.content]
        return {"type": "tool_call_response", "id": part.tool_call_id, "response": "\n".join(texts)}
    if kind == "media":
        modality = "document" if part.media == "file" else part.media
        if part.url:
            return {
                "type": "uri",
                "modality": modality,
                "mime_type": part.media_type,
                "uri": part.url,
            }
        return {
            "type": "blob",
            "modality": modality,
            "mime_type": part.media_type,
            "content": part.data or "",
        }
    return {"type": str(kind or "unknown")}


def gen_ai_attributes(
    context: Any,
    request: Mapping[str, Any],
    *,
    model: str | None,
    usage: Mapping[str, int] | None = None,
    response: Any = None,
) -> dict[str, Any]:
    """A call as OpenTelemetry GenAI span attributes (the current conventions: messages of
    parts, system instructions, tool definitions, usage), plus the request as sent in
    ``input.value`` so that reading the span back (:func:`captured_call`) is lossless; ``context``
    is the request parsed (:class:`compaction.messages.model.Context`)."""
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": PROVIDERS.get(context.format, "unknown"),
        "gen_ai.request.model": model or str(request.get("model") or "unknown"),
        "gen_ai.input.messages": json.dumps(
            [
                {"role": m.role, "parts": [_gen_ai_part(p) for p in m.parts]}
                for m in context.messages
            ],
            ensure_ascii=False,
        ),
        "input.value": json.dumps(request, ensure_ascii=False),
        "input.mime_type": "application/json",
        "ctxweb.format": context.format,
    }
    if context.system:
        attributes["gen_ai.system_instructions"] = json.dumps(
            [_gen_ai_part(p) for p in context.system], ensure_ascii=False
        )
    if context.tools:
        attributes["gen_ai.tool.definitions"] = json.dumps(
            [
                {
                    "type": "function",
                    "name": t.name,
                    "description": t.description,
                    "parameters": dict(t.parameters),
                }
                for t in context.tools
            ],
            ensure_ascii=False,
        )
    if context.max_output_tokens:
        attributes["gen_ai.request.max_tokens"] = context.max_output_tokens
    if usage:
        attributes["gen_ai.usage.input_tokens"] = usage.get("input_tokens", 0)
        attributes["gen_ai.usage.output_tokens"] = usage.get("output_tokens", 0)
        attributes["gen_ai.usage.cache_read.input_tokens"] = usage.get("cache_read_tokens", 0)
        attributes["gen_ai.usage.cache_creation.input_tokens"] = usage.get("cache_write_tokens", 0)
    if response is not None:
        attributes["output.value"] = json.dumps(response, ensure_ascii=False)
        attributes["output.mime_type"] = "application/json"
    return attributes
