"""Django's HTTP requests under daphne, each run whole in one thread of a fixed pool.

Django's ASGI handler runs a request in a thread created for it (its ``ThreadSensitiveContext``),
so no database connection outlives the request that opened it, and it hops between the event
loop and that thread twice for every middleware that is not async-native (request and response
halves: about twenty hops for ours). Measured through daphne on this machine, a trivial
``GET /api/v1/health`` cost 3.6 ms, of which the relay in front of Django (:mod:`ctxweb.proxy.app`)
shows daphne's own part is 0.4 ms; a late turn paid the same again to open and close its database
connection.

Here the request goes through Django's WSGI handler instead, the same code path a WSGI server
takes (middleware chain and view in one thread, one hop each way), in a fixed pool of
``CTXWEB_HTTP_THREADS`` threads that live as long as the process, so ``CONN_MAX_AGE`` keeps their
connections (``CONN_HEALTH_CHECKS`` replaces one that died). WebSockets stay with Channels, the
recording proxy with its own ASGI relay, and the body cap with :class:`BodyLimitASGIMiddleware`
in front of all of it.

A response is sent from the event loop once it is complete; a streaming response (exports) is
sent chunk by chunk as the thread produces it. Async views (the proxy's Django URLs) run as
under any WSGI server.
"""

from __future__ import annotations

import asyncio
import io
import logging
import sys
import tempfile
from collections.abc import Awaitable, Callable, Coroutine, Iterable, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, BinaryIO

from django.conf import settings
from django.core.handlers.wsgi import WSGIHandler

logger = logging.getLogger("ctxweb.serving")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Coroutine[Any, Any, None]]
Headers = list[tuple[bytes, bytes]]

#: The cyclic garbage collector's thresholds in a web process (:mod:`ctxweb.asgi`): a full
#: collection waits for 100 collections of the middle generation instead of 10.
GC_THRESHOLDS = (700, 10, 100)

_FAILED = (
    500,
    [(b"content-type", b"text/plain; charset=utf-8")],
    b"Internal Server Error",
)


def environ_for(scope: Scope, body: Any, size: int) -> dict[str, Any]:
    """The WSGI environ of an ASGI HTTP ``scope`` whose whole ``body`` (``size`` bytes) was read.

    ``CONTENT_LENGTH`` is the size read, whatever the headers said: the body cap in front has
    already refused a body over its limit and handed a chunked one over whole."""
    script_name = scope.get("root_path", "") or ""
    path = scope["path"]
    if script_name and path.startswith(script_name):
        path = path[len(script_name) :]
    server = scope.get("server") or ("localhost", 80)
    environ: dict[str, Any] = {
        "REQUEST_METHOD": scope["method"],
        "SCRIPT_NAME": script_name.encode("utf-8").decode("latin-1"),
        "PATH_INFO": path.encode("utf-8").decode("latin-1"),
        "QUERY_STRING": (scope.get("query_string") or b"").decode("latin-1"),
        "SERVER_PROTOCOL": f"HTTP/{scope.get('http_version', '1.1')}",
        "SERVER_NAME": str(server[0]),
        "SERVER_PORT": str(server[1] if server[1] is not None else 80),
        "CONTENT_LENGTH": str(size),
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": scope.get("scheme", "http"),
        "wsgi.input": body,
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
    }
    client = scope.get("client")
    if client:
        environ["REMOTE_ADDR"] = str(client[0])
        environ["REMOTE_PORT"] = str(client[1])
    joined: dict[str, list[str]] = {}
    for raw_name, raw_value in scope.get("headers") or []:
        name = raw_name.decode("latin-1").upper().replace("-", "_")
        if name == "CONTENT_LENGTH":
            continue
        key = name if name == "CONTENT_TYPE" else f"HTTP_{name}"
        joined.setdefault(key, []).append(raw_value.decode("latin-1"))
    for key, values in joined.items():
        # as Django's ASGI handler joins repeated headers (cookies with "; ")
        environ[key] = ("; " if key == "HTTP_COOKIE" else ",").join(values)
    return environ


class ThreadedDjangoApplication:
    """An ASGI application serving Django's HTTP requests on a fixed pool of threads."""

    def __init__(self, threads: int | None = None) -> None:
        self.handler = WSGIHandler()
        self.threads = threads or settings.CTXWEB_HTTP_THREADS
        self.executor = ThreadPoolExecutor(self.threads, thread_name_prefix="ctxweb-http")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            raise ValueError(f"HTTP only, not {scope['type']!r}")
        body = await _body(receive)
        if body is None:
            return  # the caller left before its body arrived
        with body:
            size = body.seek(0, io.SEEK_END)
            body.seek(0)
            loop = asyncio.get_running_loop()
            status, headers, content = await loop.run_in_executor(
                self.executor, self._respond, environ_for(scope, body, size), loop, send
            )
        if content is None:  # streamed from the thread, already sent
            return
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": content})

    def _respond(
        self, environ: dict[str, Any], loop: asyncio.AbstractEventLoop, send: Send
    ) -> tuple[int, Headers, bytes | None]:
        """In a pool thread: the whole request, and its response closed in the same thread
        (``request_finished``, which closes or keeps the thread's database connection)."""
        started: list[Any] = []

        def start_response(status: str, headers: list[tuple[str, str]], *_: Any) -> Any:
            started[:] = [
                int(status.split(" ", 1)[0]),
                [(n.lower().encode("latin-1"), v.encode("latin-1")) for n, v in headers],
            ]
            return lambda data: None  # the legacy write(): Django never calls it

        try:
            response = self.handler(environ, start_response)
        except Exception:  # Django turns a view's errors into responses; this is ours
            logger.exception("serving: the request failed outside Django's handler")
            return _FAILED
        try:
            if not getattr(response, "streaming", False):
                return started[0], started[1], b"".join(_chunks(response))
            self._stream(response, started[0], started[1], loop, send)
            return 0, [], None
        finally:
            close = getattr(response, "close", None)
            if close is not None:
                close()

    @staticmethod
    def _stream(
        response: Iterable[bytes],
        status: int,
        headers: Headers,
        loop: asyncio.AbstractEventLoop,
        send: Send,
    ) -> None:
        def deliver(message: Message) -> None:
            asyncio.run_coroutine_threadsafe(send(message), loop).result()

        deliver({"type": "http.response.start", "status": status, "headers": headers})
        for chunk in _chunks(response):
            if chunk:
                deliver({"type": "http.response.body", "body": chunk, "more_body": True})
        deliver({"type": "http.response.body", "body": b""})


async def _body(receive: Receive) -> BinaryIO | None:
    """The request's whole body as a file: in memory as it came when it came in one message
    (daphne sends up to a megabyte at once), else spooled to disk past
    ``FILE_UPLOAD_MAX_MEMORY_SIZE``, as Django's ASGI handler does; ``None`` if the caller left."""
    message = await receive()
    if message["type"] == "http.disconnect":
        return None
    if not message.get("more_body", False):
        return io.BytesIO(message.get("body", b""))
    spooled = tempfile.SpooledTemporaryFile(  # noqa: SIM115 (the caller closes it)
        settings.FILE_UPLOAD_MAX_MEMORY_SIZE, mode="w+b"
    )
    spooled.write(message.get("body", b""))
    while message.get("more_body", False):
        message = await receive()
        if message["type"] == "http.disconnect":
            spooled.close()
            return None
        spooled.write(message.get("body", b""))
    return spooled  # type: ignore[return-value]


def _chunks(response: Iterable[bytes]) -> Iterable[bytes]:
    for chunk in response:
        yield bytes(chunk)
