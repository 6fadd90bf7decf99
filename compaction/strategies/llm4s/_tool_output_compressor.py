"""LLM4S's ``ToolOutputCompressor`` (``docs/seed-strategies.md`` §3.3): externalize or compact one
tool output.

An output over :data:`EXTERNALIZE_BYTES` (UTF-8) becomes an ``[EXTERNALIZED: content_<sha256> |
TYPE | summary]`` pointer; one over :data:`INLINE_BYTES` is compressed inline by its content type
(:func:`detect_content_type`: JSON/YAML, log, error, binary, text).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from typing import Any

from compaction.strategies.llm4s._jvm_strings import _jlen, _jsplit, _jtrim

EXTERNALIZE_BYTES = 8192
INLINE_BYTES = 2048


def detect_content_type(content: str) -> str:
    """LLM4S's ``detectContentType`` on the trimmed text: json, yaml, error, log, binary or text.

    Example:
        >>> detect_content_type('  {"a": 1} '), detect_content_type("a --- b")
        ('json', 'yaml')
    """
    c = _jtrim(content)
    if (c.startswith("{") and c.endswith("}")) or (c.startswith("[") and c.endswith("]")):
        return "json"
    if "---" in c and (":" in c or "-" in c):
        return "yaml"
    if "ERROR:" in c or "Exception" in c or "Traceback" in c:
        return "error"
    if "INFO " in c or "DEBUG " in c or "WARN " in c:
        return "log"
    if c.startswith("data:") or "base64" in c:
        return "binary"
    return "text"


class _NotJson(ValueError):
    pass


def _reject_constant(name: str) -> Any:
    raise _NotJson(name)


def _parse_json(content: str) -> Any:
    """ujson's ``read``: strict JSON (no NaN or Infinity); raises :class:`ValueError`, also for
    nesting too deep to decode."""
    try:
        return json.loads(content, parse_constant=_reject_constant)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


def _json_fields(value: Any) -> int:
    if isinstance(value, dict | list):
        return len(value)
    return 1


def content_summary(content: str, content_type: str) -> str:
    """LLM4S's ``generateContentSummary`` (sizes are the content's length in chars).

    Example:
        >>> content_summary("x" * 10, "text")
        'Text content, 10 bytes'
    """
    size = _jlen(content)
    if content_type == "json":
        try:
            value = _parse_json(content)
        except ValueError:
            return f"JSON-like content, {size} bytes"
        return f"JSON object with {_json_fields(value)} fields, {size} bytes"
    if content_type == "log":
        return f"Log output with {content.count(chr(10)) + 1} lines, {size} bytes"
    if content_type == "error":
        first = content.split("\n")[0] if content else "Error"
        return f"Error: {first[:100]}, {size} bytes"
    return f"{content_type[:1].upper()}{content_type[1:]} content, {size} bytes"


def _compress_json(value: Any) -> Any:
    if isinstance(value, dict):
        kept = {k: v for k, v in value.items() if not (v is None or v == "" or v == [])}
        return {k: _compress_json(v) for k, v in kept.items()}
    if isinstance(value, list):
        if len(value) > 20:
            head = [_compress_json(v) for v in value[:10]]
            tail = [_compress_json(v) for v in value[-10:]]
            return [*head, f"...[+{len(value) - 20} items]...", *tail]
        return [_compress_json(v) for v in value]
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**63:
        return int(value)  # ujson writes a whole Double without ".0"
    return value


def _compress_structured(content: str) -> str:
    try:
        value = _parse_json(content)
    except ValueError:
        return _compress_text(content)
    return json.dumps(_compress_json(value), separators=(",", ":"), ensure_ascii=False)


_REPEAT = re.compile(r"×(\d+)")


def _collapse_repeats(lines: Sequence[str]) -> list[str]:
    last: str | None = None
    out: list[str] = []
    for line in lines:
        if last is not None and last == line:
            if out and "×" in out[-1]:
                found = _REPEAT.search(out[-1])
                n = (int(found.group(1)) if found else 1) + 1
                out[-1] = f"{line} ×{n}"
            else:
                out[-1] = f"{line} ×2"
        else:
            out.append(line)
        last = line
    return out


def _compress_log(content: str) -> str:
    lines = _jsplit("\n", content)
    n = len(lines)
    if n <= 120:
        return content
    kept = [*lines[:80], f"... [collapsed {n - 120} repeated/verbose log lines] ...", *lines[-40:]]
    return "\n".join(_collapse_repeats(kept))


def _compress_error(content: str) -> str:
    lines = _jsplit("\n", content)
    header = "\n".join(lines[:3])
    stack = [
        line
        for line in lines[3:]
        if _jtrim(line).startswith("at ") or ".java:" in line or ".scala:" in line
    ]
    if len(stack) <= 10:
        return content
    frames = "\n".join(stack[:10])
    return f"{header}\n{frames}\n... [+{len(stack) - 10} additional stack frames] ..."


def _compress_text(content: str) -> str:
    if _jlen(content) <= 1000:
        return content
    words = _jsplit(r"[ \t\n\x0b\f\r]+", content)
    tail = words[-20:] if words else []
    return " ".join(words[:50]) + f" ... [+{len(words) - 50} words] ... " + " ".join(tail)


def _compress_inline(content: str, content_type: str, tool_call_id: str) -> str:
    if content_type in ("json", "yaml"):
        return _compress_structured(content)
    if content_type == "log":
        return _compress_log(content)
    if content_type == "error":
        return _compress_error(content)
    if content_type == "binary":
        return f"[BINARY CONTENT - {_jlen(content)} bytes - externalized: {tool_call_id}]"
    return _compress_text(content)


def compress_tool_output(
    content: str,
    tool_call_id: str = "",
    *,
    externalize_bytes: int = EXTERNALIZE_BYTES,
    inline_bytes: int = INLINE_BYTES,
) -> tuple[str, str | None]:
    """One tool output through LLM4S's ``ToolOutputCompressor``: ``(new content, action)``.

    ``action`` is ``"externalize"`` (the content is then the pointer, keyed by
    ``content_<sha256 of the UTF-8 content>``), ``"inline"`` or ``None`` (unchanged).

    Example:
        >>> compress_tool_output('{"name": "test", "value": 42}')
        ('{"name": "test", "value": 42}', None)
        >>> compress_tool_output("x" * 10000)[0][:23]
        '[EXTERNALIZED: content_'
    """
    size = len(content.encode("utf-8", "surrogatepass"))
    content_type = detect_content_type(content)
    if size > externalize_bytes:
        key = "content_" + hashlib.sha256(content.encode("utf-8", "surrogatepass")).hexdigest()
        summary = content_summary(content, content_type)
        return f"[EXTERNALIZED: {key} | {content_type.upper()} | {summary}]", "externalize"
    if size > inline_bytes:
        return _compress_inline(content, content_type, tool_call_id), "inline"
    return content, None
