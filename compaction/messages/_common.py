"""What the format adapters share: typed field access that raises :class:`FormatError` with the
field's path, the ``extra`` markers that keep rendering exact, data URLs and tool-call arguments.

Markers are ``extra`` keys that start with ``ctxweb:``; they record how the request was shaped
(a string where a list was possible, a key that was absent) and are never rendered as request keys.
Any other ``extra`` key is a request key kept verbatim. A request may not use the ``ctxweb:``
prefix itself.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any, Final

from compaction.errors import FormatError
from compaction.messages.model import MediaPart, Part, TextPart

MARK: Final = "ctxweb:"
SHAPE: Final = "ctxweb:shape"  # "list": a content that was a list where a string would do
ABSENT: Final = "ctxweb:absent"  # keys render would write by default but the request lacked
EXPLICIT: Final = "ctxweb:explicit"  # keys present with a value render would omit (``[]``, false)
RAW: Final = "ctxweb:raw"  # an item or block of a type the model has no class for, verbatim
ITEM: Final = "ctxweb:item"  # a raw Responses input item (not a content part)
INNER: Final = "ctxweb:inner"  # unknown keys of a nested object (``function``, ``image_url``)
SOURCE: Final = "ctxweb:source"  # Anthropic ``source`` keys that have no field
TYPE: Final = "ctxweb:type"  # a part's ``type`` spelling where it differs from the default
LEGACY: Final = "ctxweb:legacy"  # OpenAI Chat ``functions`` / ``function_call`` / role function
PLAIN_DATA: Final = "ctxweb:plain_data"  # file data that was not a data URL
SUMMARY: Final = "ctxweb:summary"  # Responses reasoning ``summary`` entries as sent
MAX_KEY: Final = "ctxweb:max_tokens_key"  # which OpenAI Chat key held the output reserve
INPUT: Final = "ctxweb:input"  # Responses ``input`` sent as a plain string
INLINE: Final = "ctxweb:inline"  # a system message sent inside Anthropic's ``messages``
ARGS: Final = "ctxweb:args"  # the key of a Responses call item that held its arguments
ARGS_OBJECT: Final = "ctxweb:args_object"  # those arguments were an object, not JSON text
RAW_VALUE: Final = "ctxweb:raw_value"  # a tool output that is not text or content parts, verbatim

MAX_DEPTH: Final = 256
_NAMES: Final = {
    dict: "object",
    list: "array",
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    type(None): "null",
}
_DATA_URL: Final = re.compile(r"data:([^;,]*);base64,(.*)\Z", re.DOTALL)


class Missing:
    """The type of :data:`MISSING`: a key absent from a request."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final = Missing()


def join(path: str, *keys: str | int) -> str:
    """``join("messages", 3, "content")`` is ``"messages.3.content"``."""
    tail = ".".join(str(k) for k in keys)
    return f"{path}.{tail}" if path else tail


def type_name(value: object) -> str:
    """The JSON name of a value's type, for error messages."""
    if isinstance(value, Mapping):
        return "object"
    return _NAMES.get(type(value), type(value).__name__)


def expect_obj(value: object, path: str) -> Mapping[str, Any]:
    """``value`` as an object, or a :class:`FormatError` at ``path``."""
    if isinstance(value, Missing):
        raise FormatError(path, "required")
    if not isinstance(value, Mapping):
        raise FormatError(path, f"expected an object, got {type_name(value)}")
    for key in value:
        if not isinstance(key, str):
            raise FormatError(path, f"expected string keys, got {type_name(key)}")
    return value


def expect_list(value: object, path: str) -> list[Any]:
    """``value`` as an array, or a :class:`FormatError` at ``path``."""
    if isinstance(value, Missing):
        raise FormatError(path, "required")
    if not isinstance(value, list):
        raise FormatError(path, f"expected an array, got {type_name(value)}")
    return value


def expect_str(value: object, path: str) -> str:
    """``value`` as a string, or a :class:`FormatError` at ``path``."""
    if isinstance(value, Missing):
        raise FormatError(path, "required")
    if not isinstance(value, str):
        raise FormatError(path, f"expected a string, got {type_name(value)}")
    return value


def opt_str(obj: Mapping[str, Any], key: str, path: str) -> str | None:
    """A string field that may be absent or null (then it stays in ``extra`` verbatim)."""
    value = obj.get(key)
    if value is None:
        return None
    return expect_str(value, join(path, key))


def opt_int(obj: Mapping[str, Any], key: str, path: str) -> int | None:
    """An integer field that may be absent or null (then it stays in ``extra`` verbatim)."""
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise FormatError(join(path, key), f"expected an integer, got {type_name(value)}")
    return value


def extra_of(obj: Mapping[str, Any], consumed: Iterable[str], path: str) -> dict[str, Any]:
    """The keys of ``obj`` not in ``consumed``, verbatim; the ``ctxweb:`` prefix is refused."""
    taken = set(consumed)
    out: dict[str, Any] = {}
    for key, value in obj.items():
        if key in taken:
            continue
        if key.startswith(MARK):
            raise FormatError(join(path, key), f"keys starting with {MARK!r} are reserved")
        out[key] = value
    return out


def public(extra: Mapping[str, Any]) -> dict[str, Any]:
    """The request keys of an ``extra`` mapping (markers left out), as a new dict."""
    return {k: v for k, v in extra.items() if not k.startswith(MARK)}


def mark_absent(extra: dict[str, Any], obj: Mapping[str, Any], keys: Iterable[str]) -> None:
    """Record which of ``keys`` (written by default on render) ``obj`` lacks."""
    absent = [k for k in keys if k not in obj]
    if absent:
        extra[ABSENT] = absent


def drop_absent(out: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """Remove from ``out`` the default keys the request lacked; returns ``out``."""
    for key in extra.get(ABSENT, ()):
        out.pop(key, None)
    return out


def explicit(extra: Mapping[str, Any], key: str) -> bool:
    """Whether ``key`` was present with a value that render would otherwise leave out."""
    return key in extra.get(EXPLICIT, ())


def add_explicit(extra: dict[str, Any], key: str) -> None:
    """Record that ``key`` was present with a value render would otherwise leave out."""
    extra[EXPLICIT] = [*extra.get(EXPLICIT, ()), key]


def check_depth(value: object, path: str = "", limit: int = MAX_DEPTH) -> None:
    """Refuse objects and arrays nested deeper than ``limit`` (iteratively: never recurses)."""
    stack: list[tuple[object, int, str]] = [(value, 0, path)]
    while stack:
        node, depth, where = stack.pop()
        if depth > limit:
            raise FormatError(where, f"nested deeper than {limit} levels")
        if isinstance(node, Mapping):
            for key, child in node.items():
                if isinstance(child, Mapping | list):
                    stack.append((child, depth + 1, join(where, str(key))))
        elif isinstance(node, list):
            for index, child in enumerate(node):
                if isinstance(child, Mapping | list):
                    stack.append((child, depth + 1, join(where, index)))


def dumps(value: object, path: str) -> str:
    """Compact JSON text of a request value (tool-call input, an unknown block)."""
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError) as exc:
        raise FormatError(path, f"not JSON-serializable: {exc}") from None


def loads_object(text: str) -> dict[str, Any]:
    """Tool-call arguments as an object; text that is not a JSON object is kept under a key."""
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return {"_raw_arguments": text}
    if isinstance(value, dict):
        return value
    return {"_raw_arguments": text}


def raw_part(block: Mapping[str, Any], path: str, **markers: Any) -> TextPart:
    """A block of a type the model has no class for: its JSON as text, the block verbatim."""
    return TextPart(text=dumps(block, path), extra={RAW: block, **markers})


def text_is(text: str, value: object) -> bool:
    """Whether ``text`` is the JSON of ``value``: the text a raw part was made with, which no
    strategy rewrote. Compared as values, not as text: a database that stores JSON as such
    (PostgreSQL's jsonb) gives the kept value back with its keys in another order."""
    try:
        if json.dumps(value, ensure_ascii=False, separators=(",", ":")) == text:
            return True
        return bool(json.loads(text) == value)
    except (TypeError, ValueError, RecursionError):
        return False


def raw_value_part(value: object, path: str) -> TextPart:
    """A value of no known shape (a server tool's result list, a shell call's output records):
    its JSON as text, the value verbatim."""
    return TextPart(text=dumps(value, path), extra={RAW_VALUE: value})


def raw_value_of(part: Part) -> tuple[bool, Any]:
    """``(True, value)`` for a :func:`raw_value_part` whose text no strategy rewrote, else
    ``(False, None)``."""
    if not isinstance(part, TextPart) or RAW_VALUE not in part.extra:
        return False, None
    value = part.extra[RAW_VALUE]
    unchanged = text_is(part.text, value)
    return unchanged, value if unchanged else None


def raw_message(message: Mapping[str, Any], path: str) -> TextPart:
    """A whole message of a role the model has no name for, kept verbatim (rendered as sent)."""
    return raw_part(message, path, **{ITEM: True})


def raw_of(part: Part) -> Mapping[str, Any] | None:
    """The verbatim block behind a raw part, unless a strategy has rewritten its text."""
    if not isinstance(part, TextPart):
        return None
    raw = part.extra.get(RAW)
    if not isinstance(raw, Mapping):
        return None
    return raw if text_is(part.text, raw) else None


def split_data_url(url: str) -> tuple[str, str] | None:
    """``(media_type, base64 data)`` of a ``data:<type>;base64,<data>`` URL, else ``None``."""
    match = _DATA_URL.match(url)
    if match is None:
        return None
    return match.group(1), match.group(2)


def data_url(part: MediaPart) -> str:
    """The data URL of an inline media part (``application/octet-stream`` when untyped)."""
    media_type = part.media_type if part.media_type is not None else "application/octet-stream"
    return f"data:{media_type};base64,{part.data or ''}"


def is_plain_text(part: Part) -> bool:
    """A text part with no request keys of its own: it may render as a bare string."""
    if not isinstance(part, TextPart):
        return False
    return all(k.startswith(MARK) and k not in (RAW, TYPE) for k in part.extra)


def content_is_string(parts: tuple[Part, ...], extra: Mapping[str, Any]) -> bool:
    """Whether content renders as a string: one plain text part, unless it was sent as a list."""
    return extra.get(SHAPE) != "list" and len(parts) == 1 and is_plain_text(parts[0])


def list_shape(parts: list[Part], extra: dict[str, Any]) -> None:
    """Mark content sent as a list where the default render would write a string or omit it."""
    if not parts or (len(parts) == 1 and is_plain_text(parts[0])):
        extra[SHAPE] = "list"
