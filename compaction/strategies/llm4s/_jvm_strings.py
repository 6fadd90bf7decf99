"""The JVM string operations LLM4S's compressors rely on: Java's ``trim``, ``length`` and ``split``.

LLM4S runs on the JVM, so where it trims, measures or splits a string, Python's own operations
would give different results (other whitespace, code points instead of UTF-16 units, trailing
empty strings kept); these reproduce Java's.
"""

from __future__ import annotations

import re

_JAVA_WS = "".join(chr(i) for i in range(33))


def _jtrim(text: str) -> str:
    """Java's ``String.trim``: strips characters up to U+0020 only."""
    return text.strip(_JAVA_WS)


def _jlen(text: str) -> int:
    """Java's ``String.length``: UTF-16 code units."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _jsplit(pattern: str, text: str) -> list[str]:
    """Java's ``String.split(regex)``: trailing empty strings removed; no match gives ``[text]``."""
    if re.search(pattern, text) is None:
        return [text]
    parts = re.split(pattern, text)
    while parts and parts[-1] == "":
        parts.pop()
    return parts
