"""Django's HTTP requests under uvicorn (:mod:`ctxweb.server`), each run whole in one thread of
a fixed pool.

Django's ASGI handler runs a request in a thread created for it (its ``ThreadSensitiveContext``),
so no database connection outlives the request that opened it, and it hops between the event
loop and that thread twice for every middleware that is not async-native (request and response
halves: about twenty hops for ours). Here the request goes through Django's WSGI handler instead,
the same code path a WSGI server takes (middleware chain and view in one thread, one hop each
way), in fixed pools of threads that live as long as the process, so ``CONN_MAX_AGE`` keeps their
connections (``CONN_HEALTH_CHECKS`` replaces one that died). WebSockets stay with Channels, the
recording proxy with its own ASGI relay, and the body cap with :class:`BodyLimitASGIMiddleware`
in front of all of it.

No caller waits behind another kind of work (issue 33):

- **Pages and the API** run on ``CTXWEB_HTTP_THREADS`` threads; the **telemetry receivers**
  (OTLP's ``/v1/traces``, Langfuse's ``/api/public/...``), which exporters may flood, on
  ``CTXWEB_CAPTURE_THREADS`` of their own: a flood of exports queues behind itself, never in front
  of a page or ``/api/v1/health``. Those threads hand each request to a capturer process
  (:mod:`ctxweb.capturers`, the application's ``elsewhere``) when the web process started
  them, so that the receivers' work never holds this process's interpreter lock.
- **A streaming response** (exports, artifacts) is produced on a third pool,
  ``CTXWEB_STREAM_THREADS``, chunk by chunk as the client takes it: the server's ``send`` waits
  while the client's socket is full (backpressure, so memory holds a chunk, never the answer), and
  a client that takes nothing for ``CTXWEB_SEND_TIMEOUT`` seconds is dropped, freeing its thread.
  The request's thread goes back to its pool as soon as the response is built.

A complete response is sent from the event loop once it is built.

**The health check** (``GET``/``HEAD /api/v1/health``, no query, no body) is answered on the event
loop, queueing behind nothing: its first request of each kind (method, scheme, ``Host``, the
forwarded headers Django reads) goes through Django on the pool, and Django's answer, when it is
200, is kept and sent again as it was, headers and all (at most :data:`HEALTH_KEPT` kinds; past
them, through Django). It reports liveness only (the view touches nothing), so it answers the
same while every pool thread is busy.
"""

from __future__ import annotations

import asyncio
import io
import logging
import sys
import tempfile
from collections.abc import Awaitable, Callable, Coroutine, Iterable, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, BinaryIO

from django.conf import settings
from django.core.handlers.wsgi import WSGIHandler, WSGIRequest
from django.db import close_old_connections

from ctxweb.afterwards import Work, answers_pending, run_all

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


#: glibc's ``mallopt`` parameters (malloc.h): the trim and mmap thresholds, the number of arenas.
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8
#: Allocations from this size up are mapped, and given back to the system when freed.
MMAP_THRESHOLD = 1024 * 1024
#: Free memory at the top of a heap kept for the next allocations instead of given back: glibc
#: stops adapting its trim threshold (128 KB) once the mmap threshold is set, so every request's
#: blocks of hundreds of KB (a late turn's body, its copies) were given back when freed and
#: mapped again, page by page, by the next request: 114 page faults a late turn of the ingest
#: benchmark (3 us each on this machine), 10 with this.
TRIM_THRESHOLD = 32 * 1024 * 1024


def tune_allocator() -> bool:
    """Make freed large blocks go back to the system (glibc only; whether it applied).

    glibc raises its mmap threshold each time a mapped block is freed, up to 32 MB: after the
    first large body, request bodies of megabytes (a 24 MB managed call, an export) came from
    the heap's arenas, one per thread that allocated, and stayed there once freed. Under
    hostile load a web process grew by a gigabyte that way and never shrank. A fixed threshold
    of :data:`MMAP_THRESHOLD` maps every large block and unmaps it when freed; two arenas keep
    the small ones from spreading over one arena per thread; each keeps up to
    :data:`TRIM_THRESHOLD` of free memory for the next requests."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    if not name:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc
        return False
    return (
        bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))
        and bool(mallopt(_M_ARENA_MAX, 2))
        and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    )


#: Paths served by the telemetry receivers' own threads (exporters post there in bursts).
CAPTURE_PATHS = ("/v1/traces", "/api/public/")
#: The health check, answered on the event loop once Django has answered it (see above).
HEALTH_PATH = "/api/v1/health"
#: The most kinds of health request whose answer is kept (Hosts an attacker may vary).
HEALTH_KEPT = 32
#: The request headers Django's answer to the health check may depend on (Host, and those a
#: configured proxy sets: the scheme, the host).
HEALTH_HEADERS = (b"host", b"x-forwarded-proto", b"x-forwarded-host", b"x-forwarded-port")

HealthKey = tuple[Any, ...]


def health_key(scope: Scope) -> HealthKey | None:
    """What Django's answer to this request depends on, when it is a plain health check
    (``GET`` or ``HEAD``, no query, no body); else None."""
    if scope.get("method") not in ("GET", "HEAD") or scope.get("query_string"):
        return None
    root = scope.get("root_path", "") or ""
    path = scope.get("path", "")
    if (path[len(root) :] if root and path.startswith(root) else path) != HEALTH_PATH:
        return None
    kept: list[tuple[bytes, bytes]] = []
    for name, value in scope.get("headers") or []:
        name = name.lower()
        if name in (b"content-length", b"transfer-encoding"):
            return None  # a body: Django's to answer
        if name in HEALTH_HEADERS:
            kept.append((name, value))
    return (scope["method"], scope.get("scheme", "http"), root, tuple(sorted(kept)))


class FinishedRequest(WSGIRequest):
    """A Django request that lets go of everything it holds once its answer is closed.

    Django's request sits in reference cycles with what the middleware hangs on it (the
    messages' storage refers back to it, ``request.user`` and ``request.auser`` are closures of
    it), so its body (``request.body``, read whole), its parsed form and its upload stayed until a
    full run of the cyclic garbage collector, which a web process does rarely
    (:data:`GC_THRESHOLDS`). Closed (the answer's last closer, after every middleware and the
    view are done with it), it holds nothing, and what it held goes by reference counting."""

    def close(self) -> None:
        super().close()
        self.__dict__.clear()


class FinishingHandler(WSGIHandler):
    """Django's WSGI handler, its requests :class:`FinishedRequest`."""

    request_class = FinishedRequest


def finish(response: Any) -> None:
    """Close a Django answer (``request_finished``, and the request's closers: a
    :class:`FinishedRequest` lets go of its body) and end a DRF answer's view and request the
    same way: the view refers to itself (Django's ``view.head = view.get``), to both requests and
    to the answer, whose renderer context names the view and the request, whose parser context
    names the view and the request itself. Nothing reads them once the answer is closed; emptied,
    the view, the parsed body and what the view kept of it go by reference counting."""
    close = getattr(response, "close", None)
    if close is not None:
        close()
    rendering = getattr(response, "renderer_context", None)
    if isinstance(rendering, dict):
        for finished in (rendering.get("view"), rendering.get("request")):
            held = getattr(finished, "__dict__", None)
            if held is not None:
                held.clear()
        rendering.clear()


def respond(handler: WSGIHandler, environ: dict[str, Any]) -> tuple[int, Headers, Any, list[Work]]:
    """In a pool thread: the whole request, and its response closed in the same thread
    (``request_finished``, which closes or keeps the thread's database connection); or a
    streaming response, returned unread (:meth:`_stream` reads and closes it), the
    thread's connection released as ``request_finished`` would. Last, the work the request
    left for after its answer (:func:`ctxweb.afterwards.after_answer`)."""
    started: list[Any] = []

    def start_response(status: str, headers: list[tuple[str, str]], *_: Any) -> Any:
        started[:] = [
            int(status.split(" ", 1)[0]),
            [(n.lower().encode("latin-1"), v.encode("latin-1")) for n, v in headers],
        ]
        return lambda data: None  # the legacy write(): Django never calls it

    with answers_pending() as later:
        try:
            response = handler(environ, start_response)
        except Exception:  # Django turns a view's errors into responses; this is ours
            logger.exception("serving: the request failed outside Django's handler")
            return (*_FAILED, later)
        if getattr(response, "streaming", False):
            close_old_connections()  # what request_finished does, in this thread
            return started[0], started[1], response, later
        try:
            return started[0], started[1], b"".join(_chunks(response)), later
        finally:
            finish(response)


class ThreadedDjangoApplication:
    """An ASGI application serving Django's HTTP requests on fixed pools of threads."""

    def __init__(
        self,
        threads: int | None = None,
        *,
        elsewhere: Callable[[dict[str, Any]], tuple[int, Headers, bytes]] | None = None,
    ) -> None:
        """``elsewhere`` answers the telemetry receivers' requests instead of this process's
        threads (:func:`ctxweb.capturers.capture_elsewhere`, once the capturers are started)."""
        self.handler = FinishingHandler()
        self.elsewhere = elsewhere
        self.threads = threads or settings.CTXWEB_HTTP_THREADS
        self.executor = ThreadPoolExecutor(self.threads, thread_name_prefix="ctxweb-http")
        self.capture_executor = ThreadPoolExecutor(
            settings.CTXWEB_CAPTURE_THREADS, thread_name_prefix="ctxweb-capture"
        )
        self.stream_executor = ThreadPoolExecutor(
            settings.CTXWEB_STREAM_THREADS, thread_name_prefix="ctxweb-stream"
        )
        #: Django's 200 answers to the health check, by :func:`health_key`.
        self.health: dict[HealthKey, tuple[int, Headers, bytes]] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            raise ValueError(f"HTTP only, not {scope['type']!r}")
        health = health_key(scope)
        kept = self.health.get(health) if health is not None else None
        if kept is not None:  # on the event loop: behind nothing
            status, headers, content = kept
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": content})
            return
        body = await _body(receive)
        if body is None:
            return  # the caller left before its body arrived
        with body:
            size = body.seek(0, io.SEEK_END)
            body.seek(0)
            loop = asyncio.get_running_loop()
            environ = environ_for(scope, body, size)
            capture = environ["PATH_INFO"].startswith(CAPTURE_PATHS)
            executor = self.capture_executor if capture else self.executor
            if capture and self.elsewhere is not None:  # by a process of its own
                status, headers, content = await loop.run_in_executor(
                    executor, self.elsewhere, environ
                )
                later: list[Work] = []
            else:
                status, headers, content, later = await loop.run_in_executor(
                    executor, self._respond, environ
                )
        if not isinstance(content, bytes):  # a streaming response: produced on its own pool
            await loop.run_in_executor(
                self.stream_executor, self._stream, content, status, headers, loop, send, later
            )
            return
        if health is not None and status == 200 and len(self.health) < HEALTH_KEPT:
            self.health[health] = (status, headers, content)
        try:
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": content})
        finally:
            if later:  # the request's work for after its answer (ctxweb.afterwards)
                await loop.run_in_executor(executor, run_all, later)

    def _respond(self, environ: dict[str, Any]) -> tuple[int, Headers, Any, list[Work]]:
        return respond(self.handler, environ)

    @staticmethod
    def _stream(
        response: Iterable[bytes],
        status: int,
        headers: Headers,
        loop: asyncio.AbstractEventLoop,
        send: Send,
        later: list[Work] | None = None,
    ) -> None:
        """In a stream thread: the response's chunks sent as the client takes them, then the
        response closed (its ``request_finished`` in this thread), then the work the request
        left for after its answer. A client that takes nothing for ``CTXWEB_SEND_TIMEOUT``
        seconds, or that left, ends it: the server closes the connection of an answer left
        unfinished."""
        timeout = settings.CTXWEB_SEND_TIMEOUT

        def deliver(message: Message) -> None:
            future = asyncio.run_coroutine_threadsafe(send(message), loop)
            try:
                future.result(timeout=timeout)
            except FutureTimeout:
                future.cancel()
                raise ClientStalled(f"the client took nothing for {timeout:g}s") from None

        try:
            deliver({"type": "http.response.start", "status": status, "headers": headers})
            for chunk in _chunks(response):
                if chunk:
                    deliver({"type": "http.response.body", "body": chunk, "more_body": True})
            deliver({"type": "http.response.body", "body": b""})
        except ClientStalled as stalled:
            logger.info("serving: a streamed answer was abandoned: %s", stalled)
        except OSError as gone:  # the client left (the server's send raises)
            logger.info("serving: the client left during a streamed answer: %r", gone)
        finally:
            finish(response)
            if later:
                run_all(later)


class ClientStalled(Exception):
    """A streamed answer's client took nothing for ``CTXWEB_SEND_TIMEOUT`` seconds."""


async def _body(receive: Receive) -> BinaryIO | None:
    """The request's whole body as a file: in memory up to ``FILE_UPLOAD_MAX_MEMORY_SIZE``, as
    one ``bytes`` (Django's ``request.body`` then reads it without a copy: a late turn's body of
    hundreds of KB was written piece by piece into a spooled file and copied out of it), spooled
    to disk past it, as Django's ASGI handler does; ``None`` if the caller left."""
    message = await receive()
    if message["type"] == "http.disconnect":
        return None
    if not message.get("more_body", False):
        return io.BytesIO(message.get("body", b""))
    memory = settings.FILE_UPLOAD_MAX_MEMORY_SIZE
    chunks = [message.get("body", b"")]
    size = len(chunks[0])
    spooled: BinaryIO | None = None
    while message.get("more_body", False):
        message = await receive()
        if message["type"] == "http.disconnect":
            if spooled is not None:
                spooled.close()
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if spooled is not None:
            spooled.write(chunk)
            continue
        chunks.append(chunk)
        if size > memory:  # from here on, on disk
            spooled = tempfile.TemporaryFile(mode="w+b")  # noqa: SIM115 (the caller closes it)
            spooled.writelines(chunks)
            chunks.clear()
    if spooled is not None:
        spooled.seek(0)
        return spooled
    return io.BytesIO(b"".join(chunks))


def _chunks(response: Iterable[bytes]) -> Iterable[bytes]:
    for chunk in response:
        yield bytes(chunk)
