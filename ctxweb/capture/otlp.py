"""OTLP/HTTP traces in and out: an ``ExportTraceServiceRequest`` (protobuf, or OTLP JSON with hex
ids) decoded into :class:`~compaction.telemetry.Span` values within the receivers' bounds
(:mod:`ctxweb.capture.bounds`), compressed bodies inflated under a cap, and the answers OTLP
clients expect (``ExportTraceServiceResponse`` with ``partial_success``, or a
``google.rpc.Status`` for an error) in the request's encoding.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.message import DecodeError
from google.rpc import status_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.resource.v1 import resource_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

from ctxweb import bodies
from ctxweb.bodies import TooLarge as TooLarge  # what a view catches
from ctxweb.capture.bounds import (
    Bounds,
    Budget,
    Exhausted,
    Unread,
    check_json_size,
    plan_protobuf,
)
from ctxweb.capture.bounds import TooMany as TooMany  # what a view catches
from ctxweb.contexts.services.capture import Span, SpanEvent

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
#: google.rpc codes used in error answers.
INVALID_ARGUMENT = 3
UNAUTHENTICATED = 16
PERMISSION_DENIED = 7
RESOURCE_EXHAUSTED = 8


class BadExport(ValueError):
    """The body is not an export this receiver can read (the message says why)."""


@dataclass
class Decoded:
    """An export read within its bounds: the spans read, those rejected by a per-span bound
    (span id, why), and those past the export's bounds, counted but not read."""

    spans: list[Span] = field(default_factory=list)
    rejected: list[tuple[str, str]] = field(default_factory=list)
    unread: Unread = field(default_factory=Unread)


def inflate(body: bytes, encoding: str, limit: int) -> bytes | bytearray:
    """``body`` as sent, decompressed for ``Content-Encoding: gzip``, ``deflate`` or ``zstd`` up
    to ``limit`` bytes (:func:`ctxweb.bodies.inflated`: the buffer it inflated into, never a copy
    of it): :class:`TooLarge` past it (never a decompression bomb), :class:`BadExport` if it is
    not what its encoding says."""
    try:
        return bodies.inflated(body, encoding, limit)
    except bodies.BadBody as error:
        raise BadExport(str(error)) from None


#: The smallest and largest ``intValue``: OTLP's is a signed 64-bit integer.
INT64 = (-(2**63), 2**63 - 1)
#: How a double that JSON has no number for is kept: as its name, which no database refuses and
#: no count accepts (a NaN token count is refused naming its attribute, not stored).
_NOT_FINITE = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


def _double(value: float) -> float | str:
    return value if math.isfinite(value) else _NOT_FINITE[repr(value)]


# --- protobuf ------------------------------------------------------------------------------------


def _any_value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "double_value":
        return _double(value.double_value)
    if kind == "array_value":
        return [_any_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _any_value(kv.value) for kv in value.kvlist_value.values}
    if kind == "bytes_value":
        return base64.b64encode(value.bytes_value).decode()
    return getattr(value, kind)


def _attributes(items: Any) -> dict[str, Any]:
    return {kv.key: _any_value(kv.value) for kv in items}


def _parsed(message: Any, parts: list[tuple[int, int]], data: bytes | bytearray) -> Any:
    for start, end in parts:  # a message sent in several parts is their merge
        message.MergeFromString(data[start:end])
    return message


def spans_from_protobuf(data: bytes | bytearray, bounds: Bounds) -> Decoded:
    """The spans of a protobuf export, walked on the wire first (:func:`plan_protobuf`) so that
    only the spans within the bounds are ever built."""
    try:
        plan = plan_protobuf(data, bounds)
        resources: dict[int, dict[str, Any]] = {}
        scopes: dict[int, str] = {}
        decoded = Decoded(rejected=plan.rejected, unread=plan.unread)
        for resource, scope, start, end in plan.spans:
            if resource not in resources:
                parts = plan.resources.get(resource, [])
                resources[resource] = _attributes(
                    _parsed(resource_pb2.Resource(), parts, data).attributes
                )
            if scope not in scopes:
                parts = plan.scopes.get(scope, [])
                scopes[scope] = _parsed(common_pb2.InstrumentationScope(), parts, data).name
            span = trace_pb2.Span.FromString(data[start:end])
            decoded.spans.append(
                Span(
                    trace_id=span.trace_id.hex(),
                    span_id=span.span_id.hex(),
                    name=span.name,
                    start=span.start_time_unix_nano,
                    attributes=_attributes(span.attributes),
                    events=tuple(SpanEvent(e.name, _attributes(e.attributes)) for e in span.events),
                    resource=resources[resource],
                    scope=scopes[scope],
                )
            )
    except (DecodeError, RecursionError, ValueError) as error:
        if isinstance(error, TooMany):
            raise
        raise BadExport(f"not an ExportTraceServiceRequest ({error})") from None
    return decoded


# --- OTLP JSON -----------------------------------------------------------------------------------


def _field(node: Mapping[str, Any], camel: str) -> Any:
    """A field by its lowerCamelCase name or its protobuf snake_case one (both are valid JSON)."""
    if camel in node:
        return node[camel]
    snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in camel)
    return node.get(snake)


def _json_value(value: Any, path: str) -> Any:
    if not isinstance(value, Mapping):
        raise BadExport(f"{path}: expected an AnyValue object")
    for key in ("stringValue", "boolValue"):
        found = _field(value, key)
        if found is not None:
            if not isinstance(found, (str, bool, int, float)):
                raise BadExport(f"{path}.{key}: expected a scalar")
            return str(found) if key == "stringValue" else bool(found)
    found = _field(value, "doubleValue")
    if found is not None:
        try:
            return _double(float(found))
        except (TypeError, ValueError):
            raise BadExport(f"{path}.doubleValue: expected a number") from None
    found = _field(value, "intValue")
    if found is not None:
        try:
            number = int(found)  # a string of digits (OTLP JSON's int64), or a number
        except (TypeError, ValueError, OverflowError):  # OverflowError: 1e999, read as inf
            raise BadExport(f"{path}.intValue: expected an integer") from None
        if not INT64[0] <= number <= INT64[1]:
            raise BadExport(f"{path}.intValue: expected a 64-bit integer")
        return number
    found = _field(value, "arrayValue")
    if found is not None:
        values = _field(found, "values") or [] if isinstance(found, Mapping) else None
        if not isinstance(values, list):
            raise BadExport(f"{path}.arrayValue: expected {{values: [...]}}")
        return [_json_value(v, f"{path}.arrayValue.values.{i}") for i, v in enumerate(values)]
    found = _field(value, "kvlistValue")
    if found is not None:
        values = _field(found, "values") or [] if isinstance(found, Mapping) else None
        if not isinstance(values, list):
            raise BadExport(f"{path}.kvlistValue: expected {{values: [...]}}")
        return _json_attributes(values, f"{path}.kvlistValue.values")
    found = _field(value, "bytesValue")
    if found is not None:
        return str(found)
    return None


def _json_attributes(items: Any, path: str) -> dict[str, Any]:
    if items is None:
        return {}
    if not isinstance(items, list):
        raise BadExport(f"{path}: expected a list of {{key, value}}")
    attributes = {}
    for i, item in enumerate(items):
        if not isinstance(item, Mapping) or not isinstance(item.get("key"), str):
            raise BadExport(f"{path}.{i}: expected {{key, value}}")
        attributes[item["key"]] = _json_value(item.get("value") or {}, f"{path}.{i}.value")
    return attributes


def _hex_id(value: Any, size: int, path: str) -> str:
    if not isinstance(value, str):
        raise BadExport(f"{path}: expected a hex string")
    try:
        raw = bytes.fromhex(value)
    except ValueError:
        raw = b""
    if len(raw) != size:
        # Some clients send the protobuf JSON mapping's base64 instead of OTLP's hex.
        try:
            raw = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raw = b""
    if len(raw) != size:
        raise BadExport(f"{path}: expected {size * 2} hex digits")
    return raw.hex()


def _list(
    node: Mapping[str, Any], camel: str, path: str
) -> Iterator[tuple[int, Mapping[str, Any]]]:
    items = _field(node, camel) or []
    if not isinstance(items, list):
        raise BadExport(f"{path}.{camel}: expected a list")
    for i, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise BadExport(f"{path}.{camel}.{i}: expected an object")
        yield i, item


def _object(node: Mapping[str, Any], camel: str, path: str) -> Mapping[str, Any]:
    """An optional object field (``resource``, ``scope``): ``{}`` when absent."""
    found = _field(node, camel)
    if found is None:
        return {}
    if not isinstance(found, Mapping):
        raise BadExport(f"{path}.{camel}: expected an object")
    return found


def _json_bounds_problem(attributes: Any, budget: Budget) -> str | None:
    """Why a list of OTLP JSON attributes breaks a per-span bound (too many, nested too deeply),
    each value taken from the export's ``budget``; None if it does not (a list of the wrong shape
    is named later, where it is read)."""
    bounds = budget.bounds
    if not isinstance(attributes, list):
        return None
    if len(attributes) > bounds.attributes:
        return bounds.too_many_attributes()
    budget.take(len(attributes))
    stack = [(item.get("value"), 0) for item in attributes if isinstance(item, Mapping)]
    while stack:
        value, depth = stack.pop()
        if not isinstance(value, Mapping):
            continue
        for camel, pairs in (("arrayValue", False), ("kvlistValue", True)):
            found = _field(value, camel)
            if found is None:
                continue
            if depth >= bounds.depth:
                return bounds.too_deep()
            values = _field(found, "values") if isinstance(found, Mapping) else None
            if not isinstance(values, list):
                continue
            budget.take(len(values))
            for item in values:
                inner = item.get("value") if pairs and isinstance(item, Mapping) else item
                stack.append((inner, depth + 1))
    return None


def _json_span_problem(span: Mapping[str, Any], budget: Budget) -> str | None:
    """Why a span breaks a per-span bound, or None."""
    bounds = budget.bounds
    problem = _json_bounds_problem(_field(span, "attributes"), budget)
    if problem is not None:
        return problem
    events = _field(span, "events")
    if isinstance(events, list) and len(events) > bounds.events:
        return bounds.too_many_events()
    for kind in ("events", "links"):
        items = _field(span, kind)
        if not isinstance(items, list):
            continue
        budget.take(len(items))
        for item in items:
            if isinstance(item, Mapping):
                problem = _json_bounds_problem(_field(item, "attributes"), budget)
                if problem is not None:
                    return problem
    return None


def _json_span_id(span: Mapping[str, Any], position: int) -> str:
    """A span's id as sent, to name it when it is rejected (it may not be a valid id)."""
    sent = _field(span, "spanId")
    return sent[:32] if isinstance(sent, str) and sent else f"#{position}"


def spans_from_json(data: bytes | bytearray, bounds: Bounds) -> Decoded:
    """The spans of an OTLP JSON export: its size checked before it is decoded
    (:func:`~ctxweb.capture.bounds.check_json_size`), then the same bounds as protobuf's."""
    check_json_size(data, bounds)
    try:
        # NaN and Infinity are read as their names: only a doubleValue may hold one (_double)
        document = json.loads(data, parse_constant=str)
    except (ValueError, RecursionError) as error:
        raise BadExport(f"not JSON ({error})") from None
    if not isinstance(document, Mapping):
        raise BadExport("expected an object with resourceSpans")
    decoded = Decoded()
    budget = Budget(bounds)
    stopped_by = ""
    position = 0
    for r, resource_spans in _list(document, "resourceSpans", ""):
        where = f"resourceSpans.{r}"
        resource_node = _object(resource_spans, "resource", where)
        resource_attributes = _field(resource_node, "attributes")
        resource = _json_attributes(resource_attributes, f"{where}.resource.attributes")
        resource_problem = None
        if not stopped_by:
            try:
                budget.take()
                resource_problem = _json_bounds_problem(resource_attributes, budget)
            except Exhausted:
                stopped_by = "values"
        for s, scope_spans in _list(resource_spans, "scopeSpans", where):
            scope = _object(scope_spans, "scope", f"{where}.scopeSpans.{s}")
            above = resource_problem and f"its resource: {resource_problem}"
            if not stopped_by:
                try:
                    budget.take()
                    scope_problem = _json_bounds_problem(_field(scope, "attributes"), budget)
                    above = above or (scope_problem and f"its scope: {scope_problem}")
                except Exhausted:
                    stopped_by = "values"
            for n, span in _list(scope_spans, "spans", f"{where}.scopeSpans.{s}"):
                position += 1
                if not stopped_by and len(decoded.spans) + len(decoded.rejected) >= bounds.spans:
                    stopped_by = "spans"
                if not stopped_by:
                    try:
                        budget.take()
                        problem = above or _json_span_problem(span, budget)
                    except Exhausted:
                        stopped_by = "values"
                if stopped_by:
                    decoded.unread.count += 1
                    continue
                if problem is not None:
                    decoded.rejected.append((_json_span_id(span, position), problem))
                    continue
                decoded.spans.append(
                    _json_span(span, f"{where}.scopeSpans.{s}.spans.{n}", resource, scope)
                )
    if decoded.unread.count:
        count = decoded.unread.count
        decoded.unread.reason = (
            bounds.past_spans(count) if stopped_by == "spans" else bounds.past_values(count)
        )
    return decoded


def _json_span(
    span: Mapping[str, Any], path: str, resource: dict[str, Any], scope: Mapping[str, Any]
) -> Span:
    try:
        start = int(_field(span, "startTimeUnixNano") or 0)
    except (TypeError, ValueError, OverflowError):
        raise BadExport(f"{path}.startTimeUnixNano: expected an integer") from None
    return Span(
        trace_id=_hex_id(_field(span, "traceId"), 16, f"{path}.traceId"),
        span_id=_hex_id(_field(span, "spanId"), 8, f"{path}.spanId"),
        name=str(_field(span, "name") or ""),
        start=start,
        attributes=_json_attributes(_field(span, "attributes"), f"{path}.attributes"),
        events=tuple(
            SpanEvent(
                str(_field(event, "name") or ""),
                _json_attributes(_field(event, "attributes"), f"{path}.events.{e}.attributes"),
            )
            for e, event in _list(span, "events", path)
        ),
        resource=resource,
        scope=str(_field(scope, "name") or ""),
    )


# --- answers -------------------------------------------------------------------------------------


def export_answer(media_type: str, rejected: int, message: str) -> bytes:
    """An ``ExportTraceServiceResponse``; ``partial_success`` only when spans were rejected."""
    if media_type == PROTOBUF:
        answer = trace_service_pb2.ExportTraceServiceResponse()
        if rejected:
            answer.partial_success.rejected_spans = rejected
            answer.partial_success.error_message = message
        return bytes(answer.SerializeToString())
    body: dict[str, Any] = {}
    if rejected:
        body["partialSuccess"] = {"rejectedSpans": str(rejected), "errorMessage": message}
    return json.dumps(body).encode()


def status_answer(media_type: str, code: int, message: str) -> bytes:
    """A ``google.rpc.Status``, the body of an OTLP error answer."""
    if media_type == PROTOBUF:
        return bytes(status_pb2.Status(code=code, message=message).SerializeToString())
    return json.dumps({"code": code, "message": message}).encode()
