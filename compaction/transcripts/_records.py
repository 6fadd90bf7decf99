"""Decoding transcript bytes into JSON records, with errors that name the line or field."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from compaction.errors import FormatError

__all__ = [
    "as_dict",
    "as_list",
    "decode_json",
    "decode_text",
    "iter_jsonl",
    "obj",
    "opt_str",
]


def decode_text(data: bytes | str) -> str:
    """The transcript as text: UTF-8 (a byte-order mark is dropped); NUL bytes are refused."""
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise FormatError("file", f"not UTF-8 text (byte {exc.start})") from None
    else:
        text = data
    if "\x00" in text:
        raise FormatError("file", "contains NUL bytes")
    return text


def iter_jsonl(data: bytes | str) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line number, record)`` for each non-blank line, numbered from 1.

    Raises :class:`FormatError` ``line N: not JSON`` or ``line N: not a JSON object``.
    """
    decoder = json.JSONDecoder(parse_constant=_refuse_constant)
    for number, line in enumerate(decode_text(data).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = decoder.decode(line)
        except FormatError as exc:
            raise FormatError(f"line {number}", exc.reason) from None
        except (ValueError, RecursionError):
            raise FormatError(f"line {number}", "not JSON") from None
        if not isinstance(record, dict):
            raise FormatError(f"line {number}", "not a JSON object")
        yield number, record


def decode_json(data: bytes | str) -> Any:
    """One JSON document; :class:`FormatError` names the line and column of a syntax error."""
    try:
        return json.loads(decode_text(data), parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        raise FormatError(
            f"line {exc.lineno}", f"not JSON ({exc.msg}, column {exc.colno})"
        ) from None
    except RecursionError:
        raise FormatError("document", "JSON nested too deeply") from None


def _refuse_constant(name: str) -> Any:
    """``NaN`` and the infinities are not JSON: no database or client takes them back."""
    raise FormatError("document", f"{name} is not a JSON number")


def as_dict(value: Any, path: str) -> dict[str, Any]:
    """``value`` if it is a JSON object, else :class:`FormatError` at ``path``."""
    if not isinstance(value, dict):
        raise FormatError(path, f"expected an object, got {_kind(value)}")
    return value


def as_list(value: Any, path: str) -> list[Any]:
    """``value`` if it is a JSON array, else :class:`FormatError` at ``path``."""
    if not isinstance(value, list):
        raise FormatError(path, f"expected an array, got {_kind(value)}")
    return value


def obj(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one (for optional nested objects)."""
    return value if isinstance(value, dict) else {}


def opt_str(mapping: Mapping[str, Any], key: str) -> str | None:
    """``mapping[key]`` when it is a non-empty string, else ``None``."""
    value = mapping.get(key)
    return value if isinstance(value, str) and value else None


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}.get(
        type(value), "a number"
    )
