"""What one OTLP export may hold, checked before anything is built from it.

A protobuf export is walked on the wire first (:func:`plan_protobuf`): tags and lengths only, no
object per span, so a 31 KB gzip body of 16 million empty spans costs what its first spans cost,
not 6 GB and two minutes. The walk keeps the byte ranges of the spans to read, rejects a span that
holds too many attributes or events, or values nested too deeply (named by its span id), and
stops reading past the export's bounds on spans and values: the spans after that are only
counted, and rejected in ``partial_success``. Counting is a pass per span, so it is bounded too:
an export holding more than :data:`COUNTED` times the span bound is refused whole (413).

An OTLP JSON export is bounded before it is decoded (:func:`check_json_size`): its objects and
arrays are counted (with strings set aside, so braces in a prompt do not count), and an export
with more than :data:`JSON_CONTAINERS` per value allowed is refused whole. Once decoded, the same
per-span and per-export bounds apply (:class:`Budget`).

The defaults (``ctxweb/settings/base.py``, "Receivers' bounds"; docs/deploy.md, "Limits") sit
above what real exporters send: the OpenTelemetry SDK exports 512 spans at a time and the
collector's batch processor 8,192; the SDK keeps 128 attributes and 128 events per span, but a
GenAI span with legacy indexed attributes (``gen_ai.prompt.N.*``, ``llm.input_messages.N.*``)
carries a few per message of its conversation, thousands for a long one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from django.conf import settings

#: An export is counted up to this many times its span bound (spans, scopes and resources seen
#: after reading stopped); past that it is refused whole: counting costs a pass per span, and no
#: exporter sends that much more than the bound.
COUNTED = 16
#: JSON objects and arrays allowed per value of the values bound: an attribute is two objects
#: (its ``KeyValue`` and its ``AnyValue``), an array entry up to three.
JSON_CONTAINERS = 4


class BadWire(ValueError):
    """The body is not protobuf (truncated, or a wire type OTLP never uses)."""


class TooMany(ValueError):
    """The export holds too much even to count (413; the message names the bound)."""


@dataclass(frozen=True)
class Bounds:
    """The receivers' bounds on one export (docs/deploy.md, "Limits")."""

    spans: int
    values: int
    attributes: int
    events: int
    depth: int

    @classmethod
    def from_settings(cls) -> Bounds:
        return cls(
            spans=settings.CTXWEB_OTLP_MAX_SPANS,
            values=settings.CTXWEB_OTLP_MAX_VALUES,
            attributes=settings.CTXWEB_OTLP_MAX_SPAN_ATTRIBUTES,
            events=settings.CTXWEB_OTLP_MAX_SPAN_EVENTS,
            depth=settings.CTXWEB_OTLP_MAX_DEPTH,
        )

    def too_many_attributes(self) -> str:
        return f"more than {self.attributes} attributes (CTXWEB_OTLP_MAX_SPAN_ATTRIBUTES)"

    def too_many_events(self) -> str:
        return f"more than {self.events} events (CTXWEB_OTLP_MAX_SPAN_EVENTS)"

    def too_deep(self) -> str:
        return f"values nested deeper than {self.depth} levels (CTXWEB_OTLP_MAX_DEPTH)"

    def past_spans(self, count: int) -> str:
        return (
            f"{count} spans were not read: at most {self.spans} spans, and as many resources and"
            " scopes, per export (CTXWEB_OTLP_MAX_SPANS)"
        )

    def past_values(self, count: int) -> str:
        return (
            f"{count} spans were not read: the export holds more than {self.values} attributes,"
            " events and values (CTXWEB_OTLP_MAX_VALUES)"
        )

    def uncountable(self) -> str:
        return (
            f"The export holds more than {COUNTED * self.spans} spans, scopes and resources past"
            f" what is read: send at most {self.spans} spans (CTXWEB_OTLP_MAX_SPANS) and"
            f" {self.values} values (CTXWEB_OTLP_MAX_VALUES) per export."
        )


class Exhausted(Exception):
    """The export's values bound is passed: the span being read and those after it are not
    read."""


@dataclass
class Budget:
    """Values read so far in one export, against :attr:`Bounds.values`."""

    bounds: Bounds
    used: int = 0

    def take(self, count: int = 1) -> None:
        self.used += count
        if self.used > self.bounds.values:
            raise Exhausted


@dataclass
class Unread:
    """Spans rejected without being read, and why."""

    count: int = 0
    reason: str = ""


@dataclass
class Plan:
    """What to read of a protobuf export: for each span kept, the byte ranges of its resource,
    its scope and itself (a message sent in several parts is merged, as protobuf merges it)."""

    resources: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    scopes: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    #: (resource index, scope index, start, end) of each span to read
    spans: list[tuple[int, int, int, int]] = field(default_factory=list)
    rejected: list[tuple[str, str]] = field(default_factory=list)
    unread: Unread = field(default_factory=Unread)


# --- the protobuf wire format --------------------------------------------------------------------

#: Wire types: a varint, 8 bytes, a length-delimited field, 4 bytes.
VARINT, FIXED64, LEN, FIXED32 = 0, 1, 2, 5


def _varint(data: bytes | bytearray, i: int, end: int) -> tuple[int, int]:
    result = shift = 0
    while i < end:
        byte = data[i]
        i += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, i
        shift += 7
        if shift > 63:
            raise BadWire("a varint longer than 10 bytes")
    raise BadWire("the message is cut short")


class _FieldIter:
    """The fields of the message in ``data[i:end]``: (number, wire type, start, end) of each
    value; for a length-delimited field, the range of its payload."""

    __slots__ = ("data", "end", "i")

    def __init__(self, data: bytes | bytearray, i: int, end: int) -> None:
        self.data, self.i, self.end = data, i, end

    def __iter__(self) -> _FieldIter:
        return self

    def __next__(self) -> tuple[int, int, int, int]:
        data, i, end = self.data, self.i, self.end
        if i >= end:
            raise StopIteration
        key = data[i]
        if key < 0x80:
            i += 1
        else:
            key, i = _varint(data, i, end)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise BadWire("a field numbered 0")
        if wire == LEN:
            if i < end and data[i] < 0x80:
                length = data[i]
                i += 1
            else:
                length, i = _varint(data, i, end)
            stop = i + length
        elif wire == VARINT:
            start = i
            _, stop = _varint(data, i, end)
            self.i = stop
            return number, wire, start, stop
        elif wire == FIXED64:
            stop = i + 8
        elif wire == FIXED32:
            stop = i + 4
        else:
            raise BadWire(f"wire type {wire} (groups are not OTLP)")
        if stop > end:
            raise BadWire("the message is cut short")
        self.i = stop
        return number, wire, i, stop


class _SpanWalk:
    """Checks one span (or resource, or scope) against the per-span bounds, taking each value
    from the export's budget."""

    def __init__(self, data: bytes | bytearray, budget: Budget) -> None:
        self.data = data
        self.budget = budget
        self.bounds = budget.bounds

    def any_value(self, start: int, end: int, depth: int) -> str | None:
        for number, wire, a, b in _FieldIter(self.data, start, end):
            if wire != LEN or number not in (5, 6):  # arrayValue, kvlistValue
                continue
            if depth >= self.bounds.depth:
                return self.bounds.too_deep()
            for inner, inner_wire, c, d in _FieldIter(self.data, a, b):
                if inner != 1 or inner_wire != LEN:
                    continue
                self.budget.take()
                problem = (
                    self.any_value(c, d, depth + 1)
                    if number == 5
                    else self.key_value(c, d, depth + 1)
                )
                if problem is not None:
                    return problem
        return None

    def key_value(self, start: int, end: int, depth: int) -> str | None:
        for number, wire, a, b in _FieldIter(self.data, start, end):
            if number == 2 and wire == LEN:
                problem = self.any_value(a, b, depth)
                if problem is not None:
                    return problem
        return None

    def attributes(self, start: int, end: int, number_of_attributes: int) -> str | None:
        """The attributes (field ``number_of_attributes``) of a resource, scope, event or link."""
        count = 0
        for number, wire, a, b in _FieldIter(self.data, start, end):
            if number == number_of_attributes and wire == LEN:
                count += 1
                if count > self.bounds.attributes:
                    return self.bounds.too_many_attributes()
                self.budget.take()
                problem = self.key_value(a, b, 0)
                if problem is not None:
                    return problem
        return None

    def span(self, start: int, end: int) -> tuple[str, str | None]:
        """(the span's id in hex, or "" if it has none; why it is rejected, or None)."""
        span_id = ""
        attributes = events = 0
        for number, wire, a, b in _FieldIter(self.data, start, end):
            if wire != LEN:
                continue
            if number == 2:
                span_id = self.data[a:b].hex()
                continue
            if number == 9:
                attributes += 1
                if attributes > self.bounds.attributes:
                    return span_id, self.bounds.too_many_attributes()
                self.budget.take()
                problem = self.key_value(a, b, 0)
            elif number == 11:
                events += 1
                if events > self.bounds.events:
                    return span_id, self.bounds.too_many_events()
                self.budget.take()
                problem = self.attributes(a, b, 3)
            elif number == 13:  # a link: its attributes are field 5
                self.budget.take()
                problem = self.attributes(a, b, 5)
            else:
                continue
            if problem is not None:
                return span_id, problem
        return span_id, None


def plan_protobuf(data: bytes | bytearray, bounds: Bounds) -> Plan:
    """Walk an ``ExportTraceServiceRequest`` on the wire: which spans to read, which are rejected
    and why, how many are left unread. :class:`BadWire` if it is not protobuf, :class:`TooMany`
    if it holds too much even to count."""
    return _Planner(data, bounds).run()


class _Planner:
    """One walk of an export: reading (spans checked and kept) until a bound of the export is
    passed, then counting (each span, scope and resource seen costs one of what may be counted)."""

    def __init__(self, data: bytes | bytearray, bounds: Bounds) -> None:
        self.data = data
        self.bounds = bounds
        self.plan = Plan()
        self.budget = Budget(bounds)
        self.walk = _SpanWalk(data, self.budget)
        self.reading = True
        self.stopped_by = ""
        self.count_left = COUNTED * bounds.spans
        self.position = 0  # the span's position in the export, for one that has no id
        self.containers = 0
        self.resources = self.scopes = 0
        #: per span kept: its id, and its resource's and scope's problem if they have one
        self.ids: list[str] = []
        self.problems: dict[tuple[str, int], str] = {}

    def stop(self, by: str) -> None:
        self.reading = False
        self.stopped_by = by

    def visit(self, container: bool = False) -> bool:
        """Account for one resource, scope or span; False once reading stopped (it is counted).
        Resources and scopes are held to the span bound too: no exporter sends more of them than
        spans, and an export of empty ones costs a pass each all the same."""
        if container and self.reading:
            self.containers += 1
            if self.containers > self.bounds.spans:
                self.stop("spans")
        if self.reading:
            try:
                self.budget.take()
                return True
            except Exhausted:
                self.stop("values")
        self.count_left -= 1
        if self.count_left < 0:
            raise TooMany(self.bounds.uncountable())
        return False

    def check(self, kind: str, index: int, start: int, end: int, attributes: int) -> None:
        """The attributes of a resource (field 1) or a scope (field 3), while reading."""
        if not self.reading:
            return
        try:
            problem = self.walk.attributes(start, end, attributes)
        except Exhausted:
            self.stop("values")
            return
        if problem is not None:
            self.problems.setdefault((kind, index), problem)

    def run(self) -> Plan:
        data, plan = self.data, self.plan
        for number, wire, a, b in _FieldIter(data, 0, len(data)):
            if number != 1 or wire != LEN:
                continue
            if not self.visit(container=True):
                self.count_resource(a, b)
                continue
            resource = self.resources
            self.resources += 1
            for r_number, r_wire, c, d in _FieldIter(data, a, b):
                if r_wire != LEN:
                    continue
                if r_number == 1:
                    plan.resources.setdefault(resource, []).append((c, d))
                    self.check("resource", resource, c, d, 1)
                elif r_number == 2:
                    if not self.visit(container=True):
                        self.count_scope(c, d)
                        continue
                    self.read_scope(resource, c, d)
        self.finish()
        return plan

    def read_scope(self, resource: int, start: int, end: int) -> None:
        data, plan, bounds = self.data, self.plan, self.bounds
        scope = self.scopes
        self.scopes += 1
        for number, wire, a, b in _FieldIter(data, start, end):
            if wire != LEN:
                continue
            if number == 1:
                plan.scopes.setdefault(scope, []).append((a, b))
                self.check("scope", scope, a, b, 3)
                continue
            if number != 2:
                continue
            self.position += 1
            if self.reading and len(plan.spans) + len(plan.rejected) >= bounds.spans:
                self.stop("spans")
            if not self.visit():
                plan.unread.count += 1
                continue
            try:
                span_id, problem = self.walk.span(a, b)
            except Exhausted:
                self.stop("values")
                plan.unread.count += 1
                continue
            span_id = span_id or f"#{self.position}"
            if problem is None:
                plan.spans.append((resource, scope, a, b))
                self.ids.append(span_id)
            else:
                plan.rejected.append((span_id, problem))

    def count_scope(self, start: int, end: int) -> None:
        for number, wire, _, _ in _FieldIter(self.data, start, end):
            if number == 2 and wire == LEN:
                self.plan.unread.count += 1
                self.count_left -= 1
                if self.count_left < 0:
                    raise TooMany(self.bounds.uncountable())

    def count_resource(self, start: int, end: int) -> None:
        for number, wire, a, b in _FieldIter(self.data, start, end):
            if number == 2 and wire == LEN:
                self.visit(container=True)
                self.count_scope(a, b)

    def finish(self) -> None:
        plan, bounds = self.plan, self.bounds
        if plan.unread.count:
            count = plan.unread.count
            by_spans = self.stopped_by == "spans"
            plan.unread.reason = bounds.past_spans(count) if by_spans else bounds.past_values(count)
        if not self.problems:
            return
        kept = []
        for (resource, scope, start, end), span_id in zip(plan.spans, self.ids, strict=True):
            problem = self.problems.get(("resource", resource))
            what = "resource"
            if problem is None:
                problem, what = self.problems.get(("scope", scope)), "scope"
            if problem is None:
                kept.append((resource, scope, start, end))
            else:
                plan.rejected.append((span_id, f"its {what}: {problem}"))
        plan.spans = kept


# --- OTLP JSON -----------------------------------------------------------------------------------

#: A JSON string, unrolled so that a long string is one run of a character class.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)


def check_json_size(data: bytes | bytearray, bounds: Bounds) -> None:
    """:class:`TooMany` if the JSON document ``data`` holds more objects and arrays than
    :data:`JSON_CONTAINERS` per value of the values bound: counted before it is decoded, since
    decoding builds every one of them."""
    allowed = JSON_CONTAINERS * bounds.values
    found = data.count(b"{") + data.count(b"[")
    if found <= allowed:  # braces inside strings count here too
        return
    # those inside strings taken back out, counted where they are (no copy of the document)
    for string in _STRING.finditer(data):
        start, end = string.span()
        found -= data.count(b"{", start, end) + data.count(b"[", start, end)
    if found > allowed:
        raise TooMany(
            f"The export holds more than {allowed} JSON objects and arrays: at most"
            f" {bounds.values} attributes, events and values per export (CTXWEB_OTLP_MAX_VALUES)."
        )
