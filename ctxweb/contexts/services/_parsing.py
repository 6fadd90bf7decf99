"""Request parsing: this process's memo of each session's latest parsed request body (a
bounded LRU), so a turn parses only the messages it does not share with the previous one.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from compaction.messages import Context
from compaction.messages.incremental import ParseMemo, parse_incremental
from ctxweb.accounts.models import Project

#: Sessions' latest request bodies as this process parsed them (a bounded LRU), by project id and
#: external id: a turn parses only the messages its body does not share with the previous one.
_PARSED: OrderedDict[tuple[int, str], ParseMemo] = OrderedDict()
_PARSED_MAX = 256
#: The messages the memos may hold in all (each holds its messages' parsed and raw forms).
_PARSED_MAX_MESSAGES = 200_000
_PARSED_LOCK = threading.Lock()


def turn_request_parse(
    *, project: Project, external_id: str, format: str, request: Mapping[str, Any]
) -> Context:
    """Parse the request body of a turn of session ``external_id``, exactly as
    :func:`compaction.messages.parse` does, reusing this process's parse of the session's
    previous body for the messages this one repeats.

    Safe whatever the memo holds (another process's turns, a retry, a failed request, another
    format): messages are compared with the previous body's, never assumed. The reused messages
    are the very objects of the previous parse, so :func:`turn_ingest` recognizes them at once.

    Raises:
        FormatError: as ``parse`` (the memo is left as it was).
    """
    key = (project.pk, external_id)
    with _PARSED_LOCK:
        previous = _PARSED.get(key)
    context, memo = parse_incremental(format, request, previous)
    with _PARSED_LOCK:
        _PARSED[key] = memo
        _PARSED.move_to_end(key)
        held = sum(len(m.raw) for m in _PARSED.values())
        while len(_PARSED) > 1 and (len(_PARSED) > _PARSED_MAX or held > _PARSED_MAX_MESSAGES):
            _, dropped = _PARSED.popitem(last=False)
            held -= len(dropped.raw)
    return context
