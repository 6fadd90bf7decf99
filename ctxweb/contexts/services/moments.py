"""When a model call happened by its source's clock (:func:`occurred_at_parse`): the timestamps
transcripts, OTLP spans and Langfuse generations carry, read leniently.

A timestamp is a hint, never a reason to refuse a turn: what cannot be read, or reads as a moment
before :data:`EARLIEST` or more than :data:`AHEAD` in the future (a clock or a unit gone wrong),
is ignored and the turn keeps its recording time.
"""

from __future__ import annotations

import datetime
import math
import re

#: The earliest moment a call is believed to have happened at.
EARLIEST = datetime.datetime(2000, 1, 1, tzinfo=datetime.UTC)
#: How far ahead of this machine's clock a source's clock may run.
AHEAD = datetime.timedelta(days=1)
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
#: The longest text read as a timestamp (an ISO 8601 moment with nanoseconds and an offset fits).
_TEXT_MAX = 64
#: Epoch numbers by magnitude: seconds, milliseconds, microseconds, nanoseconds (the first whose
#: bound the number is under; seconds reach 1e11 in the year 5138).
_EPOCH_UNITS = ((1e11, 1.0), (1e14, 1e3), (1e17, 1e6), (1e20, 1e9))
_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")
#: More than microseconds in a fraction: Python's ``fromisoformat`` reads at most six digits.
_LONG_FRACTION = re.compile(r"(\.\d{6})\d+")


def _from_epoch(number: int | float) -> datetime.datetime | None:
    if not math.isfinite(number) or number <= 0:
        return None
    for bound, per_second in _EPOCH_UNITS:
        if number < bound:
            try:
                if isinstance(number, int):  # exact: a float holds nanoseconds to 256 only
                    micros = number * 1_000_000 // int(per_second)
                    return _EPOCH + datetime.timedelta(microseconds=micros)
                return datetime.datetime.fromtimestamp(number / per_second, tz=datetime.UTC)
            except (OverflowError, OSError, ValueError):
                return None
    return None


def _from_text(text: str) -> datetime.datetime | None:
    if len(text) > _TEXT_MAX:  # before anything reads it: a stranger may send megabytes
        return None
    text = text.strip()
    if not text:
        return None
    if _NUMBER.fullmatch(text):
        return _from_epoch(int(text) if text.isdigit() else float(text))
    if text[-1] in "zZ":
        text = text[:-1] + "+00:00"
    text = _LONG_FRACTION.sub(r"\1", text, count=1)
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None:  # naive: UTC, as every source here writes it
        return moment.replace(tzinfo=datetime.UTC)
    return moment.astimezone(datetime.UTC)


def occurred_at_parse(
    value: object, *, now: datetime.datetime | None = None
) -> datetime.datetime | None:
    """``value`` as an aware UTC datetime, or None when it is absent, unreadable or absurd.

    Reads a datetime (naive: UTC), ISO 8601 text (``Z`` or an offset; naive: UTC; any number of
    fractional digits) and epoch numbers or numeric text in seconds, milliseconds,
    microseconds or nanoseconds (told apart by magnitude). A moment before :data:`EARLIEST` or
    later than ``now`` (this machine's clock) plus :data:`AHEAD` is None.

    Example:
        >>> occurred_at_parse("2025-09-30T08:15:02.123Z").isoformat()
        '2025-09-30T08:15:02.123000+00:00'
        >>> occurred_at_parse(1_759_220_102_000_000_000).isoformat()
        '2025-09-30T08:15:02+00:00'
        >>> occurred_at_parse("1970-01-01T00:00:00Z") is None
        True
    """
    moment: datetime.datetime | None
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, datetime.datetime):
        moment = value if value.tzinfo is not None else value.replace(tzinfo=datetime.UTC)
        moment = moment.astimezone(datetime.UTC)
    elif isinstance(value, int | float):
        moment = _from_epoch(value)
    elif isinstance(value, str):
        moment = _from_text(value)
    else:
        return None
    if moment is None or moment < EARLIEST:
        return None
    latest = (now or datetime.datetime.now(datetime.UTC)) + AHEAD
    if moment > latest:
        return None
    return moment
