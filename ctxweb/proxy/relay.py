"""The relay itself, whatever serves it: one model call in (method, path, headers, body), the
provider's answer out (status, headers, the body as it arrives), the call recorded afterwards.

:mod:`ctxweb.proxy.app` serves it straight from ASGI (what uvicorn runs: no Django request,
middleware or thread hop between the agent and its provider); :mod:`ctxweb.proxy.views` serves
the same through Django's URLs (WSGI, the test client).

- **Who and where**: the ctxweb key in ``X-Ctxweb-Key``, the session in ``X-Ctxweb-Session``
  (optional: see :mod:`ctxweb.contexts.services.proxying`). No key, or a revoked one: 401 in the
  provider's error shape with ``x-should-retry: false``, and nothing leaves.
- **Transparent**: the provider's key and every other header go upstream unchanged (never stored
  or logged) but for hop-by-hop headers (RFC 9110 §7.6.1), ``Host``, ctxweb's own headers and its
  cookies. ``Accept-Encoding`` goes up narrowed to the encodings the recorder reads (gzip,
  deflate, zstd; ``identity`` when the agent accepts none of them or sends none), so the answer
  comes in an encoding both the agent and the recorder read; an answer in any other encoding (an
  upstream that ignored the header) is relayed all the same and kept as an unread call. The
  answer comes back as the provider sent it, status and headers included, streamed chunk by
  chunk.
- **Recorded off the caller's path**: ``POST chat/completions`` and ``responses`` (OpenAI) and
  ``POST messages`` (Anthropic) answered 2xx are written raw as they are relayed (the request,
  then each chunk of the answer before it goes back) to a durable queue that recorders drain
  (:mod:`~ctxweb.contexts.services.recording`): once the last chunk has been relayed, or, for a
  stream, once its last event has (an SDK may leave as soon as it reads it, before the upstream
  ends the stream). An answer cut before its end (its caller left, ctxweb stopped it, relaying
  it failed) is recorded all the same, its turn saying so: the request the
  agent sent is whole, the answer what came before the cut. Nothing is parsed on the
  caller's path, and the answer is never held in memory; the call's files are created on
  threads of their own, never on the event loop (:data:`SPOOL_BIG_BYTES`).
- **Managed mode** (``X-Ctxweb-Managed: 1``): once an operator has applied a strategy to the
  session, the start of the agent's request that the operation compacted is sent compacted
  (:func:`~ctxweb.contexts.services.proxying.proxy_prepare`), until the operation is undone.
- **Bounded**: bodies are capped like every request (``CTXWEB_MAX_REQUEST_BYTES``); each key
  has ``CTXWEB_RATE_LIMIT`` (429 with ``Retry-After``, in the provider's shape), optionally a
  budget of ``CTXWEB_PROXY_KEY_MB_PER_MINUTE`` of request bytes (429 with ``Retry-After`` when
  over it: what relaying, preparing and recording a key's calls cost grows with their bytes)
  and at most ``CTXWEB_PROXY_KEY_CONCURRENCY`` calls in flight in this process (429 past it).
  An answer past ``CTXWEB_PROXY_MAX_ANSWER_BYTES`` or ``CTXWEB_PROXY_MAX_ANSWER_SECONDS`` is
  stopped: a 502 in the provider's shape before it starts, an ``error`` event ending a stream, a
  cut connection otherwise (the caller sees its answer incomplete, never a truncated answer as
  whole).
- **No shared thread**: the key check runs on ``CTXWEB_PROXY_KEY_THREADS`` threads of its own
  (a cache read for a known key); managed mode's preparation in ``CTXWEB_PROXY_PREPARERS``
  processes of its own (:mod:`~ctxweb.contexts.services.preparing`: the web process's
  interpreter lock is never held by it), or with none on ``CTXWEB_PROXY_PREPARE_THREADS`` other
  threads, at most ``CTXWEB_PROXY_KEY_PREPARING`` of them per key, and at most
  ``CTXWEB_PROXY_PREPARE_BYTES`` of preparation at once (a body costs four times its size while
  it is prepared: :func:`~ctxweb.contexts.services.proxying.proxy_prepare_cost`): no caller's
  call waits behind another key's work on a shared thread, and a small call finds room beside a
  big one.
- **No open relay**: the upstream comes from ``CTXWEB_UPSTREAM_OPENAI`` and
  ``CTXWEB_UPSTREAM_ANTHROPIC`` only, never from the request.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.cookiejar
import json
import logging
import math
import re
import time
import urllib.parse
import urllib.request
import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, BinaryIO

import aiohttp
import httpx
import multidict
import yarl
from django.conf import settings
from django.db import close_old_connections, connection

from ctxweb import ratelimit
from ctxweb.accounts.selectors import api_key_get_active
from ctxweb.accounts.services import api_key_touch
from ctxweb.bodies import ENCODINGS
from ctxweb.contexts.services import recording
from ctxweb.contexts.services.preparing import preparers_running, proxy_prepare_elsewhere
from ctxweb.contexts.services.proxying import proxy_prepare, proxy_prepare_cost

if TYPE_CHECKING:
    from ctxweb.accounts.models import ApiKey

logger = logging.getLogger("ctxweb.proxy")

PROVIDERS = ("openai", "anthropic")
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
#: Request headers that do not go upstream (besides hop-by-hop and those Connection names).
NOT_FORWARDED = frozenset(
    {
        "host",
        "content-length",
        "accept-encoding",
        "cookie",
        "x-ctxweb-key",
        "x-ctxweb-session",
        "x-ctxweb-managed",
    }
)
#: Response headers that do not come back: hop-by-hop, and the length (the server frames the
#: body it relays itself).
NOT_RETURNED = HOP_BY_HOP | {"content-length"}
#: (provider, path after v1/) -> the request format recorded.
RECORDED = {
    ("openai", "chat/completions"): "openai-chat",
    ("openai", "responses"): "openai-responses",
    ("anthropic", "messages"): "anthropic-messages",
}
Headers = list[tuple[str, str]]


@dataclass
class Relayed:
    """The answer to send back: status, headers (names as the provider wrote them) and the body,
    whole or as the chunks arrive."""

    status: int
    headers: Headers
    body: bytes | AsyncIterator[bytes]
    #: Called once the answer is over, however it ended (the key's call in flight ends).
    release: Callable[[], None] = field(default=lambda: None)
    #: Awaited once the answer is over, however it ended: ends a streamed body even when it was
    #: never read (the caller left before its first byte, the request was cancelled), so that
    #: the upstream answer is closed and the call queued for recording all the same.
    close: Callable[[], Awaitable[None]] | None = None

    async def end(self) -> None:
        """The answer is over, however it ended: :attr:`close` (a streamed body, read or not),
        then :attr:`release`."""
        try:
            if self.close is not None:
                await self.close()
        finally:
            self.release()


#: The upstream clients of each event loop, forgotten with their loop (a client is bound to the
#: loop it was made on, and a loop's id can be reused by the next loop once it is gone).
_CLIENTS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Clients] = (
    weakref.WeakKeyDictionary()
)
#: Idle upstream connections kept (httpx's), and for how long unused (both clients').
KEPT_ALIVE = 64
KEPT_ALIVE_SECONDS = 5.0
#: Headers aiohttp would add to a request that goes upstream: a relayed request carries the
#: agent's, and only those (``Host`` and the body's length aside).
NOT_ADDED = ("Accept", "Accept-Encoding", "User-Agent", "Content-Type")


@dataclass
class _Clients:
    """An event loop's clients: aiohttp's, which relays every call whose headers are text
    (a streamed call cost the web process 0.6 ms of CPU through it, 2.4 to 2.8 ms through httpx,
    whose connection pool, HTTP parser and async layers are written in Python), and httpx's,
    which writes a header's bytes as given where aiohttp writes text as UTF-8: an agent's header
    in Latin-1 (a title, a user's name) goes up through it byte for byte."""

    session: aiohttp.ClientSession
    by_bytes: httpx.AsyncClient | None = None
    #: The proxy each upstream is reached through (``HTTP(S)_PROXY`` and ``NO_PROXY``, as httpx
    #: honoured them), read once: aiohttp's ``trust_env`` reads the environment on every call.
    proxies: dict[tuple[str, str, int | None], yarl.URL | None] = field(default_factory=dict)

    def proxy(self, url: yarl.URL) -> yarl.URL | None:
        origin = (url.scheme, url.host or "", url.port)
        if origin not in self.proxies:
            proxy = urllib.request.getproxies().get(url.scheme)
            bypass = not proxy or bool(url.host and urllib.request.proxy_bypass(url.host))
            self.proxies[origin] = None if bypass else yarl.URL(str(proxy))
        return self.proxies[origin]


def _clients() -> _Clients:
    loop = asyncio.get_running_loop()
    clients = _CLIENTS.get(loop)
    if clients is None:
        session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(
                limit=0, limit_per_host=0, keepalive_timeout=KEPT_ALIVE_SECONDS
            ),
            timeout=aiohttp.ClientTimeout(
                total=None, sock_connect=10.0, sock_read=settings.CTXWEB_PROXY_TIMEOUT
            ),
            auto_decompress=False,  # relayed as the provider sent it
            skip_auto_headers=NOT_ADDED,
            cookie_jar=aiohttp.DummyCookieJar(),  # see _no_cookies
        )
        clients = _CLIENTS[loop] = _Clients(session)
    return clients


async def clients_close() -> None:
    """Close this event loop's upstream clients, if it has any (as the server stops, and as a
    loop that lives for one call ends: WSGI's, the tests'); the next call makes others."""
    clients = _CLIENTS.pop(asyncio.get_running_loop(), None)
    if clients is not None:
        await clients.session.close()
        if clients.by_bytes is not None:
            await clients.by_bytes.aclose()


def _by_bytes(clients: _Clients) -> httpx.AsyncClient:
    if clients.by_bytes is None:
        clients.by_bytes = httpx.AsyncClient(
            timeout=httpx.Timeout(settings.CTXWEB_PROXY_TIMEOUT, connect=10.0),
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=KEPT_ALIVE),
            follow_redirects=False,
            cookies=_no_cookies(),
        )
    return clients.by_bytes


def _no_cookies() -> http.cookiejar.CookieJar:
    """A cookie jar that keeps nothing: a client shared by every caller must never send one
    caller's cookie from the provider (its edge's bot-management token, say) with another's
    call. The caller gets the ``Set-Cookie`` itself, with the rest of the answer."""
    return http.cookiejar.CookieJar(http.cookiejar.DefaultCookiePolicy(allowed_domains=[]))


@dataclass
class _Answer:
    """The upstream's answer as it starts: status, headers as received, and the body's raw
    chunks as they come (undecoded); ``close`` lets its connection go (kept alive when the
    body was read whole)."""

    status: int
    headers: list[tuple[bytes, bytes]]
    chunks: AsyncIterator[bytes]
    close: Callable[[], Awaitable[None]]

    def header(self, name: str) -> str:
        wanted = name.encode("latin-1")
        return next(
            (v.decode("latin-1") for k, v in self.headers if k.lower() == wanted), ""
        ).strip()


class _BadUrl(Exception):
    """A URL no client can send."""


#: The bytes of a path or query sent as they are: printable ASCII but ``%`` (written as an
#: escape when it does not start one), the rest percent-encoded.
_URL_SAFE = "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) not in "%#")
_LONE_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")


def _url(base: str, rest: str, query: str) -> yarl.URL:
    """The upstream URL, the path and query as the agent sent them: each control character
    refused (as httpx refused it), other bytes outside printable ASCII percent-encoded."""
    for text in (rest, query):
        if any(ord(c) < 0x21 or ord(c) == 0x7F for c in text):
            raise _BadUrl("a control character or a space in the path or query")

    def encoded(text: str) -> str:
        text = _LONE_PERCENT.sub("%25", text)
        return urllib.parse.quote(text, safe=_URL_SAFE + "%", encoding="latin-1")

    url = f"{base}/{encoded(rest)}" + (f"?{encoded(query)}" if query else "")
    try:
        return yarl.URL(url, encoded=True)
    except ValueError as invalid:
        raise _BadUrl(str(invalid)) from None


def _as_text(headers: Headers) -> Headers | None:
    """``headers`` (each byte one character) as the text whose UTF-8 is their bytes, as aiohttp
    writes them; None when a value's bytes are not UTF-8."""
    if all(value.isascii() for _, value in headers):
        return headers
    try:
        return [(name, value.encode("latin-1").decode("utf-8")) for name, value in headers]
    except UnicodeDecodeError:
        return None


async def _send(
    clients: _Clients, method: str, url: yarl.URL, headers: Headers, body: bytes
) -> _Answer:
    """Send the call upstream and wait for its answer to start."""
    text = _as_text(headers)
    if text is not None:
        answer = await clients.session.request(
            method,
            url,
            headers=multidict.CIMultiDict(text),
            data=body or None,
            allow_redirects=False,
            proxy=clients.proxy(url),  # credentials in its URL are its authorization
        )

        async def close() -> None:
            if answer.content.at_eof():
                answer.release()  # read whole: its connection is kept alive
            else:
                answer.close()

        return _Answer(answer.status, list(answer.raw_headers), answer.content.iter_any(), close)
    client = _by_bytes(clients)
    outgoing = client.build_request(
        method,
        str(url),
        # As bytes, each character one byte, as received: httpx encodes text headers as ASCII.
        headers=[(n.encode("latin-1"), v.encode("latin-1")) for n, v in headers],
        content=_sent_once(body) if body else body,
    )
    streamed = await client.send(outgoing, stream=True)
    return _Answer(
        streamed.status_code, list(streamed.headers.raw), streamed.aiter_raw(), streamed.aclose
    )


#: What a call that could not reach the provider fails with.
_UNREACHABLE = (aiohttp.ClientError, httpx.HTTPError, OSError)


def _deadline_passed(failure: BaseException) -> bool:
    """Whether ``failure`` is a :class:`Deadline`'s: a ``TimeoutError`` (an ``OSError``) that
    is not a client's (aiohttp's read timeout is a ``TimeoutError`` too)."""
    return isinstance(failure, TimeoutError) and not isinstance(
        failure, aiohttp.ClientError | httpx.HTTPError
    )


#: The key checks' threads, and managed mode's preparation's: apart from each other and from
#: Django's, so that no call waits behind another caller's work on a shared thread.
_KEYS = ThreadPoolExecutor(settings.CTXWEB_PROXY_KEY_THREADS, thread_name_prefix="ctxweb-proxy-key")
_PREPARE = ThreadPoolExecutor(
    settings.CTXWEB_PROXY_PREPARE_THREADS, thread_name_prefix="ctxweb-proxy-prepare"
)
#: A call's files are created for the recorder on threads of their own, never on the event
#: loop, which relays every other call meanwhile: creating a file waits for the file system's
#: journal, which the database's and the other calls' writes keep busy (under the hostile load,
#: on this machine: up to 60 ms for a small call's request file, 87 ms to open its answer's,
#: 350 ms to write a 24 MB request), and every caller and the health check waited with it. Big
#: requests (from ``SPOOL_BIG_BYTES``) have threads of their own: a small call is never queued
#: behind their writes. The answer's chunks are then appended on the loop, to the open file.
SPOOL_BIG_BYTES = 1024 * 1024
_SPOOLING = ThreadPoolExecutor(4, thread_name_prefix="ctxweb-proxy-spool")
_SPOOLING_BIG = ThreadPoolExecutor(4, thread_name_prefix="ctxweb-proxy-spool-big")
#: Calls in flight per key in this process, and each key's preparations.
_IN_FLIGHT: dict[int, int] = {}
_PREPARING: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[int, asyncio.Semaphore]] = (
    weakref.WeakKeyDictionary()
)


def upstream(provider: str) -> str:
    base = (
        settings.CTXWEB_UPSTREAM_OPENAI
        if provider == "openai"
        else settings.CTXWEB_UPSTREAM_ANTHROPIC
    )
    return str(base).rstrip("/")


def error(provider: str, status: int, kind: str, message: str) -> Relayed:
    """An error in the provider's own shape, so the agent's SDK reports it as it would."""
    if provider == "anthropic":
        body: dict[str, Any] = {"type": "error", "error": {"type": kind, "message": message}}
    else:
        body = {"error": {"message": message, "type": kind, "param": None, "code": kind}}
    return Relayed(status, [("content-type", "application/json")], json.dumps(body).encode())


def _forwarded(headers: Sequence[tuple[str, str]]) -> Headers:
    named = {
        token.strip().lower()
        for name, value in headers
        if name.lower() == "connection"
        for token in value.split(",")
        if token.strip()
    }
    return [
        (name, value)
        for name, value in headers
        if name.lower() not in HOP_BY_HOP | NOT_FORWARDED | named
    ]


def _accept_encoding(headers: Sequence[tuple[str, str]]) -> str:
    """What goes upstream as ``Accept-Encoding``: the codings the agent accepts (``q`` above 0,
    ``*`` for any) that the recorder reads too, in the agent's order; ``identity`` when none
    (no header at all included: an SDK that sends none reads no compressed answer)."""
    accepted: list[str] = []
    for name, value in headers:
        if name.lower() != "accept-encoding":
            continue
        for item in value.split(","):
            coding, *params = (piece.strip().lower() for piece in item.split(";"))
            q = next((p.partition("=")[2].strip() for p in params if p.startswith("q=")), "1")
            try:
                wanted = float(q) > 0
            except ValueError:
                wanted = False
            codings = ENCODINGS if coding == "*" else (coding,)
            accepted += [c for c in codings if wanted and c in ENCODINGS and c not in accepted]
    return ", ".join(accepted) or "identity"


def _header(headers: Sequence[tuple[str, str]], name: str) -> str:
    return next((value for key, value in headers if key.lower() == name), "").strip()


def _wait_before(key: ApiKey) -> int | None:
    """Seconds the key must wait when it is over ``CTXWEB_RATE_LIMIT`` (a fixed window per
    key, counted in the shared cache: :mod:`ctxweb.ratelimit`), else None; an unreachable cache
    lets the call through."""
    rate = ratelimit.parse_rate(str(getattr(settings, "CTXWEB_RATE_LIMIT", "") or ""))
    if rate is None:
        return None
    try:
        hit = ratelimit.hit(f"ctxweb-throttle:proxy:{key.pk}:{key.key_hash[:16]}", rate)
    except Exception:
        logger.warning("proxy rate limit not checked: the cache is unavailable")
        return None
    return hit.wait(rate)


def _over_budget(key: ApiKey, size: int) -> int | None:
    """Seconds the key must wait when its requests' bytes are over
    ``CTXWEB_PROXY_KEY_MB_PER_MINUTE`` (a budget that refills continuously, holding a minute's
    worth, in the shared cache: :func:`ctxweb.ratelimit.debit`), else None, ``size`` taken from
    the budget; an unreachable cache lets the call through."""
    budget = settings.CTXWEB_PROXY_KEY_MB_PER_MINUTE * 1024 * 1024
    if budget <= 0 or size <= 0:
        return None
    try:
        wait = ratelimit.debit(
            f"ctxweb-budget:proxy:{key.pk}:{key.key_hash[:16]}",
            size,
            per_second=budget / 60,
            burst=60.0,
        )
    except Exception:
        logger.warning("proxy byte budget not checked: the cache is unavailable")
        return None
    return None if wait is None else max(1, math.ceil(wait))


def _admit(raw_key: str, size: int = 0) -> tuple[ApiKey | None, int | None, int | None]:
    """The caller's active key and, when it is over its rate, the seconds to wait, then, when
    its request of ``size`` bytes is over its key's budget, the seconds to wait: one trip off
    the event loop (a cached key costs a cache read, see ``api_key_get_active``)."""
    key = api_key_get_active(raw_key=raw_key)
    if connection.connection is not None:  # the key was not cached: the database was read
        close_old_connections()
    if key is None:
        return None, None, None
    api_key_touch(key=key)
    wait = _wait_before(key)
    return key, wait, None if wait is not None else _over_budget(key, size)


def _prepare(**call: Any) -> Any:
    try:
        return proxy_prepare(**call)
    finally:
        close_old_connections()


def recording_idle(timeout: float = 30, *, close: bool = False) -> None:
    """Wait until every call relayed so far is recorded (tests, and a process shutting down);
    with ``close``, this thread's database connection is closed afterwards."""
    _answers_ended(timeout)
    recording.recordings_queued(timeout)
    try:
        recording.recordings_idle(timeout)
    finally:
        if close:
            connection.close()


def _answers_ended(timeout: float) -> None:
    for ending in list(_ENDING):
        ending.result(timeout=timeout)


def recorders_quiet(timeout: float = 30) -> None:
    """Wait until this process's recording threads have nothing left to do (no database read:
    for tests that end with calls they relayed)."""
    deadline = time.monotonic() + timeout
    _answers_ended(timeout)
    recording.recordings_queued(timeout)
    while recording.recorders_busy() and time.monotonic() < deadline:
        time.sleep(0.02)


def _enter(key_id: int) -> Callable[[], None] | None:
    """Count a call of the key in flight; its release, or None when the key has
    ``CTXWEB_PROXY_KEY_CONCURRENCY`` already."""
    if _IN_FLIGHT.get(key_id, 0) >= settings.CTXWEB_PROXY_KEY_CONCURRENCY:
        return None
    _IN_FLIGHT[key_id] = _IN_FLIGHT.get(key_id, 0) + 1
    released = False

    def release() -> None:
        nonlocal released
        if released:
            return
        released = True
        left = _IN_FLIGHT.get(key_id, 1) - 1
        if left > 0:
            _IN_FLIGHT[key_id] = left
        else:
            _IN_FLIGHT.pop(key_id, None)

    return release


class _Budget:
    """Bytes of request bodies being prepared at once on an event loop: a call takes its body's
    size (at most the whole budget) and waits while the budget has not that much left. A body
    costs several times its size while it is parsed, so three 24 MB managed calls at once grew
    the process by a gigabyte; small calls find room beside a big one."""

    def __init__(self, total: int) -> None:
        self.total = max(1, total)
        self.free = self.total
        self.changed = asyncio.Condition()

    @contextlib.asynccontextmanager
    async def held(self, size: int) -> AsyncIterator[None]:
        size = min(max(size, 1), self.total)
        async with self.changed:
            await self.changed.wait_for(lambda: self.free >= size)
            self.free -= size
        try:
            yield
        finally:
            async with self.changed:
                self.free += size
                self.changed.notify_all()


_BUDGETS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Budget] = (
    weakref.WeakKeyDictionary()
)


def _budget() -> _Budget:
    loop = asyncio.get_running_loop()
    budget = _BUDGETS.get(loop)
    if budget is None:
        budget = _BUDGETS[loop] = _Budget(settings.CTXWEB_PROXY_PREPARE_BYTES)
    return budget


def _preparing(key_id: int) -> asyncio.Semaphore:
    """The key's preparations on this event loop (a semaphore belongs to one loop)."""
    keys = _PREPARING.setdefault(asyncio.get_running_loop(), {})
    semaphore = keys.get(key_id)
    if semaphore is None:
        semaphore = keys[key_id] = asyncio.Semaphore(settings.CTXWEB_PROXY_KEY_PREPARING)
    return semaphore


#: The error types of a call refused before it goes upstream, by status: (Anthropic's, OpenAI's).
_REFUSALS = {
    401: ("authentication_error", "invalid_api_key"),
    429: ("rate_limit_error", "rate_limit_exceeded"),
}


def _refused(provider: str, status: int, why: str, header: tuple[str, str]) -> Relayed:
    """A call refused before it goes upstream (no key, over a limit), in the provider's shape,
    with the header that tells the agent's SDK whether or when to ask again."""
    anthropic, openai = _REFUSALS[status]
    kind = anthropic if provider == "anthropic" else openai
    refused = error(provider, status, kind, f"ctxweb: {why}.")
    refused.headers.append(header)
    return refused


def _bad_gateway(provider: str, why: str) -> Relayed:
    """The provider's answer cannot be relayed (unreachable, too slow, too large): a 502 in its
    shape."""
    return error(provider, 502, "api_error", f"ctxweb: {why}.")


def _stream_error(provider: str, format: str | None, message: str) -> bytes:
    """An event that ends a stream with an error, in the provider's shape."""
    if provider == "anthropic":
        event = {"type": "error", "error": {"type": "api_error", "message": message}}
        return f"event: error\ndata: {json.dumps(event)}\n\n".encode()
    if format == "openai-responses":
        failed: dict[str, Any] = {"type": "error", "code": "api_error", "message": message}
        failed["param"] = None
        return f"event: error\ndata: {json.dumps(failed)}\n\n".encode()
    body = {"error": {"message": message, "type": "api_error", "param": None, "code": None}}
    return f"data: {json.dumps(body)}\n\n".encode()


class Deadline:
    """Awaits of a call bounded by one timer, however many they are: ``asyncio.wait_for`` makes a
    task of each awaited, ``asyncio.timeout`` a timer of each, and a stream is a dozen chunks or
    more, each awaited twice (read from the provider, sent to the caller).

    :meth:`run` raises :class:`TimeoutError` when the deadline (loop time, :meth:`until`) passes
    while it waits, or has passed already; the task is cancelled for it only while it waits, and
    a cancellation from elsewhere stays one."""

    def __init__(self, loop: asyncio.AbstractEventLoop, at: float = float("inf")) -> None:
        self.loop = loop
        self.at = at
        self.waiting: asyncio.Task[Any] | None = None
        self.expired = False
        self.timer: asyncio.TimerHandle | None = None
        self.armed = float("inf")
        #: The latest deadline the timer reached (uvloop's clock counts milliseconds: its timer
        #: may fire while ``loop.time()`` still reads a little before the deadline).
        self.reached = float("-inf")

    def until(self, at: float) -> None:
        """The deadline moved to ``at`` (later: the timer armed for an earlier one arms again)."""
        self.at = at

    def _arm(self) -> None:
        if self.timer is not None and self.armed <= self.at:
            return
        if self.timer is not None:
            self.timer.cancel()
        self.armed = self.at
        self.timer = self.loop.call_at(self.at, self._fire)

    def _fire(self) -> None:
        self.timer = None
        self.armed = float("inf")
        if self.loop.time() + 0.001 < self.at:  # moved later since the timer was armed
            if self.waiting is not None:
                self._arm()
            return  # else the next run arms it
        self.reached = self.at
        if self.waiting is None:
            return  # the next run sees the deadline reached
        self.expired = True
        self.waiting.cancel()

    async def run(self, awaited: Callable[[], Awaitable[Any]]) -> Any:
        """``awaited()`` awaited, within the deadline."""
        if self.at <= self.reached or self.loop.time() >= self.at:
            raise TimeoutError
        self._arm()
        task = asyncio.current_task()
        assert task is not None
        self.waiting = task
        try:
            return await awaited()
        except asyncio.CancelledError:
            if self.expired:
                self.expired = False
                if task.uncancel() == 0:  # cancelled by the deadline alone
                    raise TimeoutError from None
            raise
        finally:
            self.waiting = None

    def close(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None


#: Answers being closed and queued for recording (:func:`recording_idle`).
_ENDING: set[Future[None]] = set()


def _spool(**call: Any) -> Future[tuple[recording.Spooled, BinaryIO]]:
    """The call spooled for the recorder (:func:`~ctxweb.contexts.services.recording.
    recording_spool`) and its answer's file, open to be written, on a spooling thread: the
    thread's own future, which completes without the event loop (a loop that ends as a server
    stops leaves no call spooled but never queued)."""
    big = len(call["request_body"]) >= SPOOL_BIG_BYTES
    return (_SPOOLING_BIG if big else _SPOOLING).submit(_spool_files, call)


def _finish_when_spooled(
    spooling: Future[tuple[recording.Spooled, BinaryIO]],
    size: int,
    complete: bool,
    cut: str,
) -> None:
    """Once the call is spooled, its answer's file closed and the call queued for recording
    (:func:`~ctxweb.contexts.services.recording.recording_finish`): at once when it is
    spooled, else by the spooling thread as it ends. Nothing is awaited here, so a relay
    cancelled as it ends still queues its call. A call that could not be spooled is not
    recorded (said in the log)."""
    ending: Future[None] = Future()
    _ENDING.add(ending)
    ending.add_done_callback(_ENDING.discard)

    def spooled(done: Future[tuple[recording.Spooled, BinaryIO]]) -> None:
        if done.cancelled() or done.exception() is not None:
            logger.error(
                "proxy: the call could not be spooled for its recording",
                exc_info=None if done.cancelled() else done.exception(),
            )
            ending.set_result(None)
            return
        call, written = done.result()
        try:
            written.close()
            recording.recording_finish(spooled=call, answer_bytes=size, complete=complete, cut=cut)
        except Exception:
            logger.exception("proxy: queueing the call for its recording failed")
        finally:
            ending.set_result(None)

    spooling.add_done_callback(spooled)


def _spool_files(call: dict[str, Any]) -> tuple[recording.Spooled, BinaryIO]:
    spooled = recording.recording_spool(**call)
    # unbuffered: each chunk is in the page cache before it is relayed
    return spooled, recording.answer_path(spooled.spool).open("wb", buffering=0)


async def _sent_once(body: bytes) -> AsyncIterator[bytes]:
    """``body`` as the content of the request that goes upstream, let go as soon as it is sent.

    httpx's answer refers to its request, and sits in a reference cycle with its stream (the
    stream refers back to the answer: encode/httpx#3733): a request that held its body as
    ``bytes`` kept it until a full run of the cyclic garbage collector, long after the call
    ended (a dozen 24 MB bodies at once under hostile load). The generator holds the body until
    httpx asks for the next piece, once the body is written; the request then holds nothing of
    it, and the body goes with the last frame that refers to it, by reference counting."""
    yield body


class AnswerStopped(Exception):
    """An upstream answer went past a bound and was stopped."""


async def relay(
    *,
    provider: str,
    rest: str,
    method: str,
    query: str,
    headers: Sequence[tuple[str, str]],
    body: bytes,
) -> Relayed:
    """Relay one call to ``provider``'s upstream (``rest`` is the path after ``v1/``). The
    answer's ``release`` must be called once it is over (:mod:`ctxweb.proxy.app` does)."""
    raw_key = _header(headers, "x-ctxweb-key")
    loop = asyncio.get_running_loop()
    key, wait, spent = (
        await loop.run_in_executor(_KEYS, _admit, raw_key, len(body))
        if raw_key
        else (None, None, None)
    )
    if key is None:
        # Asking again cannot help. Claude Code retries a bare 401 for about three minutes
        # before it prints the message; x-should-retry (which the Anthropic and OpenAI SDKs
        # honour) makes it stop at the first answer.
        return _refused(
            provider,
            401,
            "send your ctxweb API key in the X-Ctxweb-Key header (the provider's key stays in"
            " its usual header)",
            ("x-should-retry", "false"),
        )
    if wait is not None:
        return _refused(
            provider,
            429,
            f"over this key's rate limit; retry in {wait}s",
            ("retry-after", str(wait)),
        )
    if spent is not None:
        return _refused(
            provider,
            429,
            f"this key sent more than {settings.CTXWEB_PROXY_KEY_MB_PER_MINUTE} MB of requests"
            f" in a minute (CTXWEB_PROXY_KEY_MB_PER_MINUTE); retry in {spent}s",
            ("retry-after", str(spent)),
        )
    release = _enter(key.pk)
    if release is None:
        limit = settings.CTXWEB_PROXY_KEY_CONCURRENCY
        return _refused(
            provider,
            429,
            f"this key has {limit} calls in flight already (CTXWEB_PROXY_KEY_CONCURRENCY);"
            " retry when one ends",
            ("retry-after", "1"),
        )
    try:
        relayed = await _relay(key, provider, rest, method, query, headers, body)
    except BaseException:
        release()
        raise
    if isinstance(relayed.body, bytes):
        release()
    else:
        relayed.release = release
    return relayed


async def _relay(
    key: ApiKey,
    provider: str,
    rest: str,
    method: str,
    query: str,
    headers: Sequence[tuple[str, str]],
    body: bytes,
) -> Relayed:
    format = RECORDED.get((provider, rest.rstrip("/"))) if method == "POST" else None
    session = _header(headers, "x-ctxweb-session") or None
    original: tuple[str, ...] = ()
    events: list[dict[str, Any]] = []
    managed = _header(headers, "x-ctxweb-managed").lower() in ("1", "true")
    loop = asyncio.get_running_loop()
    if format is not None and managed:  # else nothing to decide before the call: the recorder does
        async with _preparing(key.pk), _budget().held(proxy_prepare_cost(len(body))):
            if preparers_running():
                prepared = await proxy_prepare_elsewhere(
                    project_id=key.project_id,
                    key_id=key.pk,
                    format=format,
                    body=body,
                    session=session,
                    managed=managed,
                )
            else:
                prepared = await loop.run_in_executor(
                    _PREPARE,
                    lambda: _prepare(
                        project=key.project,
                        key_id=key.pk,
                        format=format,
                        body=body,
                        session=session,
                        managed=managed,
                    ),
                )
        session, events = prepared.session, prepared.events
        if prepared.body != body:
            body, original = prepared.body, prepared.original
    forwarded = [*_forwarded(headers), ("accept-encoding", _accept_encoding(headers))]
    if body:  # its length said, as a client says it for bytes
        forwarded.append(("content-length", str(len(body))))
    try:
        target = _url(upstream(provider), rest, query)
    except _BadUrl as invalid:  # a control character in the path or query, say
        why = f"ctxweb: the URL cannot be relayed ({invalid})."
        return error(provider, 400, "invalid_request_error", why)
    clients = _clients()
    seconds = settings.CTXWEB_PROXY_MAX_ANSWER_SECONDS
    deadline = Deadline(loop, loop.time() + seconds)
    try:
        answer = await deadline.run(lambda: _send(clients, method, target, forwarded, body))
    except Exception as failure:
        deadline.close()
        if _deadline_passed(failure):
            logger.warning("proxy: %s did not answer within %ss", upstream(provider), seconds)
            return _bad_gateway(
                provider,
                f"the provider did not answer within CTXWEB_PROXY_MAX_ANSWER_SECONDS ({seconds}s)",
            )
        if not isinstance(failure, _UNREACHABLE):
            raise
        name = type(failure).__name__
        logger.warning("proxy: %s unreachable: %s", upstream(provider), name)
        return _bad_gateway(provider, f"the provider could not be reached ({name})")
    limit = settings.CTXWEB_PROXY_MAX_ANSWER_BYTES
    declared = answer.header("content-length")
    if declared.isdigit() and int(declared) > limit:
        deadline.close()
        await answer.close()
        return _bad_gateway(
            provider,
            f"the provider's answer is {int(declared)} bytes, over"
            f" CTXWEB_PROXY_MAX_ANSWER_BYTES ({limit})",
        )
    if not 200 <= answer.status < 300:
        format = None
    streamed = answer.header("content-type").startswith("text/event-stream")
    coding = answer.header("content-encoding").lower()
    encoded = coding not in ("", "identity")
    # The call's files are created on a spooling thread while the answer's first bytes are read
    # (awaited before any of them is written or relayed): an answer that arrived whole with the
    # provider's connection failing right after it is read before aiohttp raises the failure,
    # which it raises in place of what it holds unread.
    spooling: Future[tuple[recording.Spooled, BinaryIO]] | None = (
        None
        if format is None
        else (
            _spool(
                project_id=key.project_id,
                key_id=key.pk,
                format=format,
                streamed=streamed,
                session=session,
                original=original,
                events=events,
                content_encoding=coding if encoded else "",
                headers=headers,
                length=int(declared) if declared.isdigit() else None,
                request_body=body,
            )
        )
    )

    async def chunks() -> AsyncGenerator[bytes, None]:
        written: BinaryIO | None = None
        size = 0
        complete = False
        # why the answer ended before its end, if it did: the caller left unless said otherwise
        cut = "its caller left before the answer's end"
        events = WholeEvents() if streamed and not encoded else None
        upstream_chunks = answer.chunks
        try:
            while True:
                try:
                    chunk = await deadline.run(upstream_chunks.__anext__)
                except StopAsyncIteration:
                    break
                except TimeoutError as timeout:
                    if not _deadline_passed(timeout):
                        raise
                    raise AnswerStopped(
                        f"the provider's answer took over CTXWEB_PROXY_MAX_ANSWER_SECONDS"
                        f" ({seconds}s)"
                    ) from None
                size += len(chunk)
                if size > limit:
                    raise AnswerStopped(
                        f"the provider's answer went over CTXWEB_PROXY_MAX_ANSWER_BYTES ({limit})"
                    )
                if spooling is not None:
                    if written is None:  # shielded: a caller leaving now leaves it spooled
                        written = (await asyncio.shield(asyncio.wrap_future(spooling)))[1]
                    # Written before it is relayed, on the loop, to the open file. A write may
                    # wait on the disk too (a ninth of the watchdog's looks at a late loop), but
                    # written on a thread, awaited, each chunk cost the web process 0.75 ms of CPU
                    # more a call (bench/hostile_profile.py) for no change measurable under the
                    # hostile load (docs/benchmarks.md).
                    written.write(chunk)
                if events is not None:
                    # an event stream goes back whole events at a time (a client parses none
                    # before its end anyway), so that an error can always follow as an event
                    chunk = events.feed(chunk)
                if chunk:
                    yield chunk
            complete = True
            if events is not None and events.held:
                yield bytes(events.held)  # the stream's last bytes, whatever they are
        except AnswerStopped as stopped:
            logger.warning("proxy: %s", stopped)
            cut = f"ctxweb stopped it: {stopped}"
            if events is not None:
                yield _stream_error(provider, format, f"ctxweb: {stopped}; the answer was cut.")
                return
            raise
        except Exception as error:  # the caller's leaving is GeneratorExit or a cancellation
            # the provider's connection, most often (a disk that is full, seldom)
            cut = f"relaying it failed ({type(error).__name__}: {error})"
            raise
        finally:
            await end(size, complete, cut)

    ended = False

    async def end(size: int, complete: bool, cut: str) -> None:
        """The answer is over, however it ended (once): its file closed and the call queued
        for recording, the upstream answer closed."""
        nonlocal ended
        if ended:
            return
        ended = True
        try:
            if spooling is not None:
                _finish_when_spooled(spooling, size, complete, "" if complete else cut)
        finally:
            deadline.close()
            await answer.close()

    answer_body = chunks()

    async def close() -> None:
        await answer_body.aclose()  # a body being read ends there (its ``finally``)
        if not ended:  # never read: not a byte of the answer relayed (its file is empty)
            await end(0, False, "its caller left before the answer's first byte")

    # As received, read as Latin-1 (each byte one character): the bytes go back unchanged. The
    # decoded headers are UTF-8 where they can be, which the answer could not write.
    returned = [
        (name.decode("latin-1"), value.decode("latin-1"))
        for name, value in answer.headers
        if name.decode("latin-1").lower() not in NOT_RETURNED
    ]
    return Relayed(answer.status, returned, answer_body, close=close)


#: What ends a server-sent event: a blank line, in the line endings servers write.
EVENT_ENDS = (b"\n\n", b"\r\n\r\n", b"\r\r")


class WholeEvents:
    """An event stream's bytes let through after each complete event, the rest held.

    Only the bytes that arrived since the last look are searched (with the few before them a
    blank line may start in), so an event of megabytes in many chunks costs its size once."""

    def __init__(self) -> None:
        self.held = bytearray()

    def feed(self, chunk: bytes) -> bytes:
        """``chunk`` added; the complete events held so far, or ``b""`` while none is."""
        start = max(0, len(self.held) - 3)
        self.held += chunk
        found = [(self.held.rfind(mark, start), len(mark)) for mark in EVENT_ENDS]
        end = max((at + size for at, size in found if at >= 0), default=0)
        if not end:
            return b""
        whole = bytes(self.held[:end])
        del self.held[:end]
        return whole
