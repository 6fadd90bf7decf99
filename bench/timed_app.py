"""``ctxweb.asgi:application`` with a timestamp at each step of a request through daphne and
Django, for :mod:`endtoend`'s phases: run as ``daphne timed_app:application`` with this folder
on ``PYTHONPATH``; the timestamps of every ``POST`` go to ``CTXWEB_PHASES_FILE`` (JSON, one
object per request) when the server shuts down.

The clock is :func:`time.perf_counter`, which on Linux is ``CLOCK_MONOTONIC``: one clock for
every process of the machine, so the client's timestamps and these can be subtracted.

Steps (each the first time it happens for the request):

- ``received``: daphne's connection reads the request's first bytes (its request line);
- ``process``: the whole body is in, daphne starts the request;
- ``app``: the ASGI application is called;
- ``django`` / ``django_end``: Django's handler runs in the pool thread (the whole request,
  middleware and view, and closing its response);
- ``answer``: the application hands daphne the response's start;
- ``written``: the response's first bytes are handed to the socket's ``send``.

The steps are those of one request at a time (the benchmark's one client waits for each answer
before it posts again): concurrent requests would mix theirs.

Only for measuring: the hooks wrap daphne's and Twisted's methods (about a microsecond each), so
the latencies of a timed run are not reported as the benchmark's.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from daphne.http_protocol import WebRequest
from twisted.internet import reactor, tcp
from twisted.web import http as twisted_http

from ctxweb import asgi, serving

_clock = time.perf_counter
#: The requests whose answer was written, in order; and the one under way.
_done: list[dict[str, Any]] = []
_current: dict[str, Any] = {}


def _mark(step: str) -> None:
    _current.setdefault(step, _clock())


def _wrap(owner: Any, name: str, before: str | None = None, after: str | None = None) -> None:
    original = getattr(owner, name)

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if before:
            _mark(before)
        try:
            return original(*args, **kwargs)
        finally:
            if after:
                _mark(after)

    setattr(owner, name, wrapped)


_wrap(twisted_http.HTTPChannel, "dataReceived", before="received")
_wrap(WebRequest, "process", before="process")
_wrap(serving.ThreadedDjangoApplication, "_respond", before="django", after="django_end")

_send_bytes = tcp.Connection.writeSomeData


def _write_some(self: Any, data: Any) -> Any:
    if "answer" in _current and "written" not in _current:
        # Marked before the send: the kernel may run the woken client on this core before the
        # send returns (a few turns in a hundred, for as long as the client then computes).
        _current["written"] = _clock()
        _done.append(dict(_current))
        _current.clear()
    return _send_bytes(self, data)


# The socket's send, whichever way the answer got there.
tcp.Connection.writeSomeData = _write_some  # type: ignore[method-assign]


async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        await asgi.application(scope, receive, send)
        return
    _mark("app")
    _current["method"] = scope.get("method")

    async def timed_send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            _mark("answer")
        await send(message)

    await asgi.application(scope, receive, timed_send)


def _save() -> None:
    with open(os.environ["CTXWEB_PHASES_FILE"], "w") as out:
        json.dump([r for r in _done if r.get("method") == "POST"], out)


reactor.addSystemEventTrigger("before", "shutdown", _save)  # type: ignore[arg-type]
