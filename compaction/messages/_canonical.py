"""The canonical JSON form of the model: for storage, for hashing, and back.

A part, message or context becomes a plain dict of JSON values: ``kind`` names a part's class,
fields equal to their default are left out, ``extra`` is kept as is. The same value always gives
the same dict, so :func:`message_hash` (SHA-256 of the sorted, compact JSON) identifies a message
by its content: a message is stored once however many turns send it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import MISSING as NO_DEFAULT
from dataclasses import fields, replace
from typing import Any

import msgspec

from compaction.errors import FormatError
from compaction.messages._common import text_is
from compaction.messages.model import (
    FORMATS,
    ROLES,
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
    "IDENTITY_IGNORED",
    "context_from_dict",
    "context_to_dict",
    "message_from_dict",
    "message_hash",
    "message_identity",
    "message_to_dict",
    "without_cache_markers",
]

_PARTS: dict[str, type[Part]] = {
    "text": TextPart,
    "reasoning": ReasoningPart,
    "media": MediaPart,
    "tool_call": ToolCallPart,
    "tool_result": ToolResultPart,
}


def _json_default(value: object) -> object:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, set | frozenset):
        return sorted(value, key=repr)
    raise TypeError(f"{type(value).__name__} is not JSON-serializable")


_ENCODER = msgspec.json.Encoder()
_DECODER = msgspec.json.Decoder()


def _plain(value: object) -> Any:
    """A deep copy of ``value`` made only of dicts, lists and JSON scalars: what
    ``json.loads(json.dumps(value))`` gives (with sets sorted, mappings as dicts).

    msgspec makes the copy (a message's in a fifth of the time), kept only when it equals
    ``value``: where the two could differ (a tuple, a set, a key that is no string, a NaN, which
    msgspec writes as null), it does not, and :mod:`json` makes the copy."""
    try:
        copied = _DECODER.decode(_ENCODER.encode(value))
    except (TypeError, ValueError, RecursionError, msgspec.EncodeError):
        pass
    else:
        if type(copied) is type(value) and copied == value:
            return copied
    try:
        return json.loads(json.dumps(value, ensure_ascii=False, default=_json_default))
    except (TypeError, ValueError, RecursionError) as exc:
        raise FormatError("extra", f"not JSON-serializable: {exc}") from None


def _fields_to_dict(obj: Any, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in fields(obj):
        if f.name in skip or f.name == "kind":
            continue
        value = getattr(obj, f.name)
        if f.default is not NO_DEFAULT and value == f.default:
            continue
        if f.default_factory is not NO_DEFAULT and value == f.default_factory():
            continue
        out[f.name] = value
    return out


def part_to_dict(part: Part) -> dict[str, Any]:
    """A part as a canonical dict (``kind`` first, default fields left out)."""
    out: dict[str, Any] = {"kind": part.kind, **_fields_to_dict(part, skip=("content",))}
    if isinstance(part, ToolResultPart):
        out["content"] = [part_to_dict(p) for p in part.content]
    return out


def message_to_dict(message: Message) -> dict[str, Any]:
    """A message as a canonical, JSON-safe dict.

    Example:
        >>> message_to_dict(Message(role="user", parts=(TextPart("hi"),)))
        {'role': 'user', 'parts': [{'kind': 'text', 'text': 'hi'}]}
    """
    return _plain(_message_dict(message))  # type: ignore[no-any-return]


def _message_dict(message: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"role": message.role, "parts": [part_to_dict(p) for p in message.parts]}
    if message.name is not None:
        out["name"] = message.name
    if message.extra:
        out["extra"] = message.extra
    return out


def message_hash(message: Message) -> str:
    """The SHA-256 hex digest of the message's canonical JSON: equal messages, equal hashes.

    Example:
        >>> len(message_hash(Message(role="user", parts=(TextPart("hi"),))))
        64
    """
    # The same JSON text as dumping message_to_dict(message), without its copy.
    try:
        text = json.dumps(
            _message_dict(message),
            ensure_ascii=False,
            sort_keys=True,
            separators=(",", ":"),
            default=_json_default,
        )
    except (TypeError, ValueError, RecursionError) as exc:
        raise FormatError("extra", f"not JSON-serializable: {exc}") from None
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


#: Keys that say how a message was sent, not what it says: cache breakpoints (which agents move to
#: the newest message on every call), the ids and statuses a provider gives its output items
#: (which agents leave out when they send the items back), and the adapters' shape markers
#: (a string or a list of one text block). :func:`message_identity` leaves them out.
IDENTITY_IGNORED = frozenset(
    {"cache_control", "id", "status", "ctxweb:shape", "ctxweb:absent", "ctxweb:explicit"}
)


def _identity_extra(extra: Mapping[str, Any]) -> dict[str, Any]:
    return {
        key: value
        for key, value in extra.items()
        if key not in IDENTITY_IGNORED and value is not None and value != [] and value != {}
    }


def _identity_arguments(arguments: str) -> Any:
    try:
        return json.loads(arguments)
    except (ValueError, RecursionError):
        return arguments


def _identity_part(part: Part) -> dict[str, Any]:
    raw = part.extra.get("ctxweb:raw") if isinstance(part, TextPart) else None
    if isinstance(part, TextPart) and isinstance(raw, Mapping) and _raw_unchanged(part.text, raw):
        # kept verbatim: its content, whatever the order of its keys in the text
        return {"kind": "raw", "raw": _identity_extra(raw)}
    out = _fields_to_dict(part, skip=("content", "extra"))
    out["kind"] = part.kind
    extra = _identity_extra(part.extra)
    if extra:
        out["extra"] = extra
    if isinstance(part, ToolCallPart):
        out["arguments"] = _identity_arguments(part.arguments)
    if isinstance(part, ToolResultPart):
        out["content"] = [_identity_part(p) for p in part.content]
    return out


def _says_nothing(part: Part) -> bool:
    """An empty text with no keys of its own: ``"content": ""`` beside tool calls, which one
    client sends where the provider's answer had ``"content": null``."""
    return isinstance(part, TextPart) and not part.text and not _identity_extra(part.extra)


def _raw_unchanged(text: str, raw: Mapping[str, Any]) -> bool:
    return text_is(text, raw)


def message_identity(message: Message) -> str:
    """What a message says, as a SHA-256 hex digest: equal for messages that differ only in how
    they were sent (:data:`IDENTITY_IGNORED`: cache breakpoints, output item ids and statuses,
    keys with empty values, empty texts, the order of keys in a verbatim item or in tool-call
    arguments, a string or a one-block list); different whenever a text, a call or a result
    differs.

    :func:`message_hash` identifies what is stored (every byte of it, so a turn renders back as
    sent); this identifies what the model reads: joining calls into a conversation, the
    difference between two turns and managed mode's prefix match compare it.

    Example:
        >>> a = Message("user", (TextPart("hi", extra={"cache_control": {"type": "ephemeral"}}),))
        >>> message_identity(a) == message_identity(Message("user", (TextPart("hi"),)))
        True
        >>> message_identity(a) == message_identity(Message("user", (TextPart("hi!"),)))
        False
    """
    parts = [_identity_part(p) for p in message.parts if not _says_nothing(p)]
    out: dict[str, Any] = {"role": message.role, "parts": parts}
    if message.name is not None:
        out["name"] = message.name
    extra = _identity_extra(message.extra)
    if extra:
        out["extra"] = extra
    try:
        text = json.dumps(
            out, ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=_json_default
        )
    except (TypeError, ValueError, RecursionError) as exc:
        raise FormatError("extra", f"not JSON-serializable: {exc}") from None
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _unmarked_part(part: Part) -> Part:
    changed: dict[str, Any] = {}
    if "cache_control" in part.extra:
        changed["extra"] = {k: v for k, v in part.extra.items() if k != "cache_control"}
    if isinstance(part, ToolResultPart):
        content = tuple(_unmarked_part(p) for p in part.content)
        if any(a is not b for a, b in zip(content, part.content, strict=True)):
            changed["content"] = content
    return replace(part, **changed) if changed else part


def without_cache_markers(message: Message) -> Message:
    """``message`` without its ``cache_control`` breakpoints (the same object when it has none):
    what replaces the start of a managed call, so that the agent's own breakpoints on its newer
    messages are the only ones (a provider caps their number; Anthropic at four).

    Example:
        >>> marked = TextPart("hi", extra={"cache_control": {"type": "ephemeral"}})
        >>> without_cache_markers(Message("user", (marked,))).parts[0].extra
        {}
    """
    parts = tuple(_unmarked_part(p) for p in message.parts)
    extra = message.extra
    if "cache_control" in extra:
        extra = {k: v for k, v in extra.items() if k != "cache_control"}
    if extra is message.extra and all(a is b for a, b in zip(parts, message.parts, strict=True)):
        return message
    return replace(message, parts=parts, extra=extra)


def context_to_dict(context: Context) -> dict[str, Any]:
    """A context as a canonical, JSON-safe dict (messages as :func:`message_to_dict` gives them)."""
    out: dict[str, Any] = {
        "format": context.format,
        "messages": [message_to_dict(m) for m in context.messages],
    }
    if context.system:
        out["system"] = [part_to_dict(p) for p in context.system]
    if context.tools:
        out["tools"] = [_fields_to_dict(t) for t in context.tools]
    if context.max_output_tokens is not None:
        out["max_output_tokens"] = context.max_output_tokens
    if context.extra:
        out["extra"] = context.extra
    return _plain(out)  # type: ignore[no-any-return]


def part_from_dict(data: object, path: str = "part") -> Part:
    """The part a :func:`part_to_dict` dict describes."""
    obj = _obj(data, path)
    kind = obj.get("kind")
    cls = _PARTS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise FormatError(f"{path}.kind", f"unknown part kind {kind!r}")
    kwargs = {k: v for k, v in obj.items() if k != "kind"}
    if cls is ToolResultPart:
        content = kwargs.get("content", [])
        if not isinstance(content, list):
            raise FormatError(f"{path}.content", "expected an array")
        kwargs["content"] = tuple(
            part_from_dict(p, f"{path}.content.{i}") for i, p in enumerate(content)
        )
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise FormatError(path, str(exc)) from None


def message_from_dict(data: object) -> Message:
    """The message a :func:`message_to_dict` dict describes (exact round trip)."""
    obj = _obj(data, "message")
    role = obj.get("role")
    if role not in ROLES:
        raise FormatError("message.role", f"unknown role {role!r}")
    parts = obj.get("parts", [])
    if not isinstance(parts, list):
        raise FormatError("message.parts", "expected an array")
    name = obj.get("name")
    if name is not None and not isinstance(name, str):
        raise FormatError("message.name", "expected a string")
    return Message(
        role=role,
        parts=tuple(part_from_dict(p, f"message.parts.{i}") for i, p in enumerate(parts)),
        name=name,
        extra=_obj(obj.get("extra", {}), "message.extra"),
    )


def context_from_dict(data: object) -> Context:
    """The context a :func:`context_to_dict` dict describes (exact round trip)."""
    obj = _obj(data, "context")
    fmt = obj.get("format")
    if fmt not in FORMATS:
        raise FormatError("context.format", f"unknown format {fmt!r}")
    messages = obj.get("messages", [])
    system = obj.get("system", [])
    tools = obj.get("tools", [])
    for key, value in (("messages", messages), ("system", system), ("tools", tools)):
        if not isinstance(value, list):
            raise FormatError(f"context.{key}", "expected an array")
    max_output_tokens = obj.get("max_output_tokens")
    if max_output_tokens is not None and (
        isinstance(max_output_tokens, bool) or not isinstance(max_output_tokens, int)
    ):
        raise FormatError("context.max_output_tokens", "expected an integer")
    tool_defs = []
    for i, tool in enumerate(tools):
        try:
            tool_defs.append(ToolDefinition(**_obj(tool, f"context.tools.{i}")))
        except TypeError as exc:
            raise FormatError(f"context.tools.{i}", str(exc)) from None
    return Context(
        format=fmt,
        messages=tuple(message_from_dict(m) for m in messages),
        system=tuple(part_from_dict(p, f"context.system.{i}") for i, p in enumerate(system)),
        tools=tuple(tool_defs),
        max_output_tokens=max_output_tokens,
        extra=_obj(obj.get("extra", {}), "context.extra"),
    )


def _obj(data: object, path: str) -> dict[str, Any]:
    if not isinstance(data, Mapping):
        raise FormatError(path, "expected an object")
    return dict(data)
