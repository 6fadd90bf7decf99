"""Whole numbers read from text a client sent (ids, page and turn numbers): ASCII digits only,
within what the database's columns hold.

``str.isdigit`` accepts ``"²"`` and other Unicode digits, which ``int()`` then refuses, and
``int()`` takes any length, which SQLite and PostgreSQL then refuse: both were 500s.
"""

from __future__ import annotations

from compaction.usage import MAX_TOKENS

#: The largest row id (a signed 64-bit integer, the width of every primary key).
MAX_ID = 2**63 - 1
#: The largest count a token column holds (``PositiveIntegerField``: a signed 32-bit integer),
#: the one bound every usage path checks (:data:`compaction.usage.MAX_TOKENS`).
MAX_COUNT = MAX_TOKENS


def parse_whole(text: object, *, maximum: int = MAX_ID) -> int | None:
    """``text`` as a whole number from 0 to ``maximum``, or None when it is anything else.

    Example:
        >>> parse_whole("42"), parse_whole("²"), parse_whole("-1"), parse_whole(str(2**64))
        (42, None, None, None)
    """
    if not isinstance(text, str):
        return None
    digits = text.strip()
    if not digits or not digits.isascii() or not digits.isdigit() or len(digits) > 19:
        return None
    value = int(digits)
    return value if value <= maximum else None
