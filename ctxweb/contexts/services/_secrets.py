"""The one place new content is scanned for secrets (:mod:`compaction.secrets`), called where a
new message row is made: a message already stored is never scanned again.

With the project's ``mask_secrets`` on, the message is masked before it is counted and stored, so
its counts are those of what is stored; its hash stays the hash of what was sent, so the next turn
that sends it again finds the row.
"""

from __future__ import annotations

from typing import Any

from compaction.messages import Message as LibMessage
from compaction.secrets import mask_message, scan_message


def message_scanned(message: LibMessage, *, mask: bool) -> tuple[LibMessage, list[dict[str, Any]]]:
    """``message`` as it is to be stored (masked if ``mask`` and it holds secrets) and what was
    found in it, at the offsets of the stored text (the masks' when masked)."""
    found = scan_message(message)
    if not found:
        return message, []
    if mask:
        message, found = mask_message(message, found)
    return message, [f.as_dict() for f in found]
