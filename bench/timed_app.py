"""``ctxweb.asgi:application`` with a timestamp at each step of a request through uvicorn and
Django, for :mod:`endtoend`'s phases: served as ``python -m ctxweb.server --app
timed_app:application`` with this folder on ``PYTHONPATH``; the timestamps of every ``POST`` go
to ``CTXWEB_PHASES_FILE`` (JSON, one object per request) when the server shuts down.

The clock is :func:`time.perf_counter`, which on Linux is ``CLOCK_MONOTONIC``: one clock for
every process of the machine, so the client's timestamps and these can be subtracted.

Steps (each the first time it happens for the request):

- ``received``: uvicorn's protocol is handed the request's first bytes (``data_received``);
- ``app``: the ASGI application is called (uvicorn calls it once the headers are parsed, while
  the body may still be arriving);
- ``process``: the whole body is in (the parser's ``on_message_complete``);
- ``django`` / ``django_end``: Django's handler runs in the pool thread (the whole request,
  middleware and view, and closing its response);
- ``answer``: the application hands uvicorn the response's start;
- ``written``: the response's first bytes (its status line and headers) are handed to the
  transport's ``write``, which sends them at once when nothing is queued before them.

``app`` and ``process`` come in either order: a body that arrives in one read is parsed whole
before the application's task first runs.

The steps are those of one request at a time (the benchmark's one client waits for each answer
before it posts again): concurrent requests would mix theirs.

Only for measuring: the hooks wrap uvicorn's methods (about a microsecond each) in this
benchmark's server process, never in ctxweb's, so the latencies of a timed run are not reported
as the benchmark's. uvicorn takes its HTTP protocol class before it imports the application, and
``ctxweb.server`` names ``httptools``: wrapping its methods is the one way in from here. The
transport (uvloop's, compiled) cannot be wrapped in place, so each request's cycle gets a thin
proxy of it.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle
from uvicorn.server import Server

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


class _TimedTransport:
    """A request cycle's transport, marking ``written`` at the answer's first write."""

    def __init__(self, transport: Any) -> None:
        self._transport = transport

    def write(self, data: bytes) -> None:
        if "answer" in _current and "written" not in _current:
            # Marked before the write: the kernel may run the woken client on this core before
            # the write returns (a few turns in a hundred, for as long as the client computes).
            _current["written"] = _clock()
            _done.append(dict(_current))
            _current.clear()
        self._transport.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


_wrap(HttpToolsProtocol, "data_received", before="received")
_wrap(HttpToolsProtocol, "on_message_complete", before="process")
_wrap(serving.ThreadedDjangoApplication, "_respond", before="django", after="django_end")

_cycle_init = RequestResponseCycle.__init__


def _timed_cycle_init(self: RequestResponseCycle, *args: Any, **kwargs: Any) -> None:
    _cycle_init(self, *args, **kwargs)
    self.transport = _TimedTransport(self.transport)  # type: ignore[assignment]


RequestResponseCycle.__init__ = _timed_cycle_init  # type: ignore[method-assign]


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


_shutdown: Callable[..., Awaitable[None]] = Server.shutdown


async def _shutdown_then_save(self: Server, *args: Any, **kwargs: Any) -> None:
    # Here, not at exit: uvicorn re-raises the SIGTERM it stopped on, and the process dies of
    # it without running exit handlers. ctxweb.server runs no lifespan to hook instead.
    await _shutdown(self, *args, **kwargs)
    _save()


Server.shutdown = _shutdown_then_save  # type: ignore[method-assign]
