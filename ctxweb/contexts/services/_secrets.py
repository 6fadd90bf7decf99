"""The one place new content is scanned for secrets (:mod:`compaction.secrets`), called where a
new message or tool set row is made (a row already stored is never scanned again) and for each
turn's request options and response.

With the project's ``mask_secrets`` on, the content is masked before it is counted and stored, so
its counts are those of what is stored; a row's hash stays the hash of what was sent, so the next
turn that sends it again finds the row.
"""

from __future__ import annotations

from typing import Any

from compaction.messages import Message as LibMessage
from compaction.secrets import (
    findings_in,
    mask_message,
    mask_text,
    mask_value,
    scan_message,
    scan_value,
)


def message_scanned(message: LibMessage, *, mask: bool) -> tuple[LibMessage, list[dict[str, Any]]]:
    """``message`` as it is to be stored (masked if ``mask`` and it holds secrets) and what was
    found in it, at the offsets of the stored text (the masks' when masked)."""
    found = scan_message(message)
    if not found:
        return message, []
    if mask:
        message, found = mask_message(message, found)
    return message, [f.as_dict() for f in found]


def value_scanned(value: Any, *, field: str, mask: bool) -> tuple[Any, list[dict[str, Any]]]:
    """A JSON ``value`` (a request's options, tool definitions, a response) as it is to be
    stored (masked if ``mask`` and it holds secrets) and what was found in it, each finding's
    ``field`` its path under ``field`` (``request.metadata.note``, ``tools.0.description``)."""
    if mask:
        value, found = mask_value(value, field)
    else:
        found = scan_value(value, field)
    return value, [f.as_dict() for f in found]


def body_masked(body: bytes) -> bytes:
    """A raw body (a call ctxweb could not read) with every secret in its text masked: read as
    UTF-8, any byte that is not kept as it is, so only the secrets change (a mask holds no quote
    or backslash: JSON and event streams stay what they were)."""
    text = body.decode("utf-8", "surrogateescape")
    found = findings_in(text)
    if not found:
        return body
    return mask_text(text, found).encode("utf-8", "surrogateescape")
