"""The API's JSON body parser: every way a body can be unreadable is a 400 naming where.

DRF's own parser lets two things through as server errors: JSON nested deeper than Python's
recursion limit (``RecursionError`` while decoding, or later while storing it) and strings that no
database column can hold (NUL characters, lone surrogates from ``\\ud800`` escapes). This parser
refuses both, with the path of the offending value, before any view sees the body.

Paths inside the top-level ``request`` object are named relative to it (``messages.3.content``),
as the format parsers of :mod:`compaction.messages` name them; everything else from the body's
root (``usage.input_tokens``, ``params.keep``).

Cost. A turn's body is mostly its messages, and most of them were in the previous turn: the body
is decoded by msgspec (about 2.5 times faster than :mod:`json` on a large body, same values:
integers past 64 bits stay integers), and a view that parses its request's messages itself with
the format parsers, which check their depth once per new message, and looks for NUL characters
in the new messages (:func:`ctxweb.contexts.services.turn_request_parse`), names them in
``checks_messages``: this parser then does not walk them, and looks at the strings of the rest.
For other views, strings need a look only when the body holds a ``\\u0000`` escape (msgspec
refuses lone surrogates; the slow path below then names them). Anything msgspec refuses is
decoded again by :mod:`json`, so every error is the one it always was. A view with a
``decode_body(request, raw, decode)`` method decodes the body itself (the turns API: without
the messages its session's previous body already held,
:func:`ctxweb.contexts.services.turn_body_decode`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Collection, Mapping
from typing import Any

import msgspec
from rest_framework.parsers import JSONParser

from ctxweb.api.errors import ApiError

#: Objects and arrays nested deeper than this are refused. Real requests nest a few levels (a
#: tool's JSON schema perhaps twenty); the format parsers allow 256 inside ``request``.
MAX_DEPTH = 300
#: A path longer than this many segments is shortened in the error (``0.0.0.0.0.0.…``).
PATH_SEGMENTS = 12

_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{},:]')
#: The escapes that can decode to a NUL or a (possibly lone) surrogate.
_SUSPECT_ESCAPE = re.compile(r"\\u(?:0000|[dD][89a-fA-F])")
#: The fast decoder (a body it refuses is decoded again by :mod:`json` for the error).
_DECODER = msgspec.json.Decoder()


def field_path(segments: list[str | int]) -> str:
    """The error field of a value at ``segments`` below the body's root."""
    if len(segments) > 1 and segments[0] == "request":
        segments = segments[1:]
    names = [str(s) for s in segments] or ["body"]
    if len(names) > PATH_SEGMENTS:
        names = [*names[:PATH_SEGMENTS], "…"]
    return ".".join(names)


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    """A JSON number with a fraction or exponent; ``1e999`` (infinite as a float) is refused:
    no database stores it and no client reads it back."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is out of range for a JSON number")
    return value


def _deep_path(text: str, limit: int) -> list[str | int]:
    """The path of the first value nested deeper than ``limit``, found by scanning the text.

    Used only after the decoder gave up (``RecursionError``), so the slow scan costs nothing on a
    good body.
    """
    # Each open container: its current key (objects) or index (arrays).
    stack: list[list[Any]] = []
    expect_key = False
    for match in _TOKENS.finditer(text):
        token = match.group()
        if token in "[{":
            stack.append([0 if token == "[" else None])
            expect_key = token == "{"
            if len(stack) > limit:
                return [frame[0] for frame in stack[:-1]]
        elif token in "]}":
            if stack:
                stack.pop()
        elif token == ",":
            if stack and isinstance(stack[-1][0], int):
                stack[-1][0] += 1
            else:
                expect_key = True
        elif token == ":":
            expect_key = False
        elif expect_key and stack:
            stack[-1][0] = json.loads(token)
            expect_key = False
    return [frame[0] for frame in stack]


def _bad_string(value: str, surrogates: bool = True) -> str | None:
    if "\x00" in value:
        return "contains a NUL character"
    if not surrogates:
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "is not valid UTF-8 (a lone surrogate)"
    return None


def check_body(
    data: Any,
    *,
    limit: int = MAX_DEPTH,
    strings: bool = True,
    skip: Collection[str] = (),
    surrogates: bool = True,
    known: Collection[str] = (),
) -> None:
    """Refuse nesting deeper than ``limit`` and, with ``strings``, keys or strings that a database
    cannot store (a NUL; a lone surrogate unless ``surrogates`` is off, for a body a decoder
    that refuses them already read). Iterative: a deep body cannot exhaust the stack here.

    ``skip`` names lists of the top-level ``request`` object (``messages``) that are not walked:
    the caller checks them itself. ``known`` names keys of ``request`` whose values are not walked
    at all: the caller knows them checked (a previous body's, equal)."""
    stack: list[tuple[Any, list[str | int]]] = [(data, [])]
    if (skip or known) and isinstance(data, Mapping) and isinstance(data.get("request"), Mapping):
        request = data["request"]
        stack = [(v, [k]) for k, v in data.items() if k != "request"]
        walked = {k: v for k, v in request.items() if k not in known}
        stack.append(({k: v for k, v in walked.items() if k not in skip}, ["request"]))
        stack += [
            (v, ["request", k]) for k, v in walked.items() if k in skip and type(v) is not list
        ]
    while stack:
        node, path = stack.pop()
        if isinstance(node, Mapping | list) and len(path) > limit:
            raise ApiError(
                f"The body is nested deeper than {limit} levels.",
                fields={field_path(path): f"nested deeper than {limit} levels"},
            )
        if isinstance(node, Mapping):
            for key, child in node.items():
                reason = _bad_string(key, surrogates) if strings else None
                if reason is not None:
                    where = field_path([*path, key.replace("\x00", "\\u0000")])
                    raise ApiError(f"A key {reason}.", fields={where: f"key {reason}"})
                if isinstance(child, Mapping | list) or (strings and isinstance(child, str)):
                    stack.append((child, [*path, key]))
        elif isinstance(node, list):
            for index, child in enumerate(node):
                if isinstance(child, Mapping | list) or (strings and isinstance(child, str)):
                    stack.append((child, [*path, index]))
        elif isinstance(node, str):
            reason = _bad_string(node, surrogates)
            if reason is not None:
                raise ApiError(f"{field_path(path)} {reason}.", fields={field_path(path): reason})


class JsonBodyParser(JSONParser):
    """``application/json`` bodies: UTF-8, strict JSON (no ``NaN``), bounded nesting, storable
    strings. Every failure is the contract's 400 with ``fields`` naming where."""

    def parse(
        self,
        stream: Any,
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        raw = stream.read() if stream is not None else b""
        view = (parser_context or {}).get("view")
        decode_body = getattr(view, "decode_body", None)
        try:
            if decode_body is not None:
                # the view decodes it, reusing what the previous body of its session repeats
                data = decode_body((parser_context or {})["request"], raw, _DECODER.decode)
            else:
                data = _DECODER.decode(raw)
        except (msgspec.DecodeError, ValueError, RecursionError):  # UnicodeDecodeError too
            return self._parse_slowly(raw)
        skip = getattr(view, "checks_messages", ())
        if skip:
            # the view looks at the strings of its new messages itself; the rest is looked at
            # here (msgspec refuses lone surrogates: only a NUL can be left to find), but for
            # what the view knows checked already (tools and system prompt its session's
            # previous body sent, equal: a coding agent's tools are tens of KB every call)
            known = getattr(view, "checked_before", lambda: ())()
            check_body(data, strings=True, skip=skip, surrogates=False, known=known)
        elif b"\\u0000" in raw:  # a NUL somewhere: every string is looked at
            check_body(data, strings=True)
        else:
            check_body(data, strings=False)
        return data

    def _parse_slowly(self, raw: bytes) -> Any:
        """Decode with :mod:`json`, whose errors (and its acceptance of lone surrogates, then
        named by :func:`check_body`) are the contract's."""
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ApiError(
                "The body is not valid UTF-8.",
                code="parse_error",
                fields={"body": f"invalid UTF-8 at byte {exc.start}"},
            ) from None
        try:
            data = json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)
        except RecursionError:
            where = field_path(_deep_path(text, MAX_DEPTH))
            raise ApiError(
                f"The body is nested deeper than {MAX_DEPTH} levels.",
                fields={where: f"nested deeper than {MAX_DEPTH} levels"},
            ) from None
        except ValueError as exc:
            raise ApiError(
                f"The body is not valid JSON: {exc}.",
                code="parse_error",
                fields={"body": str(exc)},
            ) from None
        # Strings need a look only when an escape could have made a NUL or a lone surrogate: a
        # raw NUL is invalid JSON, and decoded UTF-8 holds no surrogates.
        check_body(data, strings=_SUSPECT_ESCAPE.search(text) is not None)
        return data
