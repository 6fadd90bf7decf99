"""The proxy as a plain ASGI application, in front of Django's (see :mod:`ctxweb.asgi`).

A relayed call pays for what it needs and nothing else: no Django request object, no middleware
stack (sessions, CSRF, messages, templates: none apply to a model call), no thread hop to run
it. What the middleware gave that applies here is kept: the body cap (the ASGI body limit wraps
this app too) and the ``Host`` check against ``ALLOWED_HOSTS``. Paths that are not
``/proxy/<openai|anthropic>/v1/...`` go to Django, but for ``HEAD /proxy/<openai|anthropic>``
(and any path below it): a connectivity check (Claude Code sends ``HEAD`` to its base URL as it
starts), answered 200 with no body, without a key and without asking the provider.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from typing import Any

from django.conf import settings
from django.http.request import split_domain_port, validate_host

from ctxweb.logqueue import logs_off_the_loop
from ctxweb.proxy.relay import Deadline, Relayed, clients_close, error, relay

logger = logging.getLogger("ctxweb.proxy")

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

ROUTE = re.compile(r"^/proxy/(?P<provider>openai|anthropic)/v1/(?P<rest>.+)$", re.DOTALL)
#: Where ``HEAD`` is a connectivity check: a provider's base URL and anything below it.
CHECKED = re.compile(r"^/proxy/(?P<provider>openai|anthropic)(?:/.*)?$", re.DOTALL)


async def lifespan(scope: Scope, receive: Receive, send: Send) -> None:
    """The server's start and end (ASGI lifespan): log lines are written by a thread of their
    own while it serves (:mod:`ctxweb.logqueue`); the upstream clients close as it ends."""
    logs_back = None
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            logs_back = logs_off_the_loop()
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            try:
                await clients_close()
            finally:
                if logs_back is not None:
                    logs_back()
            await send({"type": "lifespan.shutdown.complete"})
            return


def _host_allowed(host: str) -> bool:
    allowed = list(settings.ALLOWED_HOSTS)
    if settings.DEBUG and not allowed:  # as Django allows it
        allowed = [".localhost", "127.0.0.1", "[::1]"]
    domain, _ = split_domain_port(host)
    return bool(domain) and validate_host(domain, allowed)


class ProxyApplication:
    """``/proxy/...`` relayed here; everything else to ``app`` (Django)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = _route_path(scope)
        if scope["type"] == "http" and scope.get("method") == "HEAD" and CHECKED.match(path):
            await _reachable(scope, send)
            return
        route = ROUTE.match(path) if scope["type"] == "http" else None
        if route is None:
            await self.app(scope, receive, send)
            return
        relayed = await _relayed(scope, route["provider"], route["rest"], receive)
        if relayed is None:  # the caller left before its body arrived
            return
        await _answer(relayed, receive, send)


async def _relayed(scope: Scope, provider: str, rest: str, receive: Receive) -> Relayed | None:
    """The call relayed (``None`` if the caller left before its body arrived).

    The request's body lives in this frame and the relay's, which end before the answer is
    sent: once it is written upstream, nothing refers to it while the answer streams back."""
    body = await _body(receive)
    if body is None:
        return None
    headers = [
        (name.decode("latin-1"), value.decode("latin-1"))
        for name, value in scope.get("headers") or []
    ]
    host = next((value for name, value in headers if name.lower() == "host"), "")
    try:
        if not _host_allowed(host):
            return error(provider, 400, "invalid_request_error", "ctxweb: bad Host header.")
        raw = scope.get("raw_path") or b""
        root = str(scope.get("root_path", "") or "").encode("utf-8")
        if root and raw.startswith(root):
            raw = raw[len(root) :]
        prefix = f"/proxy/{provider}/v1/".encode()
        return await relay(
            provider=provider,
            rest=raw[len(prefix) :].decode("latin-1") if raw.startswith(prefix) else rest,
            method=scope.get("method", "GET"),
            query=(scope.get("query_string") or b"").decode("latin-1"),
            headers=headers,
            body=body,
        )
    except Exception:
        logger.exception("proxy: the call could not be relayed")
        return error(provider, 500, "api_error", "ctxweb: the proxy failed.")


def _route_path(scope: Scope) -> str:
    """The path the routes match: the request's, less the root path ctxweb is served under
    (``CTXWEB_ROOT_PATH``, which the server puts in front of it; no request can set it)."""
    path = str(scope.get("path", ""))
    root = str(scope.get("root_path", "") or "")
    return path[len(root) :] if root and path.startswith(root) else path


async def _reachable(scope: Scope, send: Send) -> None:
    """``HEAD`` on the proxy: 200 and no body (400 for a Host that ``ALLOWED_HOSTS`` refuses,
    as for every other path)."""
    host = next(
        (
            value.decode("latin-1")
            for name, value in scope.get("headers") or []
            if name.lower() == b"host"
        ),
        "",
    )
    await send(
        {
            "type": "http.response.start",
            "status": 200 if _host_allowed(host) else 400,
            "headers": [(b"content-length", b"0")],
        }
    )
    await send({"type": "http.response.body", "body": b""})


async def _body(receive: Receive) -> bytes | None:
    """The whole request body (``None`` if the caller left before it arrived): as it came when
    it came in one message, else its pieces joined once at the end (one copy of the body, into
    one allocation: grown in a buffer, then copied out of it, a 24 MB managed call was mapped
    and copied twice, page by page, on the event loop)."""
    message = await receive()
    if message["type"] == "http.disconnect":
        return None
    body = message.get("body", b"")
    if not message.get("more_body"):
        return bytes(body)
    pieces = [body]
    del body
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        pieces.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    return b"".join(pieces)  # the pieces go with this frame: one copy of the body from here on


async def _answer(relayed: Relayed, receive: Receive, send: Send) -> None:
    try:
        await _send_answer(relayed, receive, send)
    finally:
        await relayed.end()


async def _send_answer(relayed: Relayed, receive: Receive, send: Send) -> None:
    headers = [
        (name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in relayed.headers
    ]
    if isinstance(relayed.body, bytes):  # whole: framed by its length
        headers.append((b"content-length", str(len(relayed.body)).encode()))
    await send({"type": "http.response.start", "status": relayed.status, "headers": headers})
    if isinstance(relayed.body, bytes):
        await send({"type": "http.response.body", "body": relayed.body})
        return
    streaming = asyncio.ensure_future(_stream(relayed.body, send))
    leaving = asyncio.ensure_future(_disconnected(receive))
    try:
        await asyncio.wait({streaming, leaving}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (streaming, leaving):
            task.cancel()
        for task in (streaming, leaving):  # the stream closes the upstream answer as it ends
            with contextlib.suppress(asyncio.CancelledError):
                await task
    if streaming.done() and not streaming.cancelled() and streaming.exception() is not None:
        logger.warning("proxy: relaying the answer failed: %r", streaming.exception())


async def _stream(chunks: AsyncIterator[bytes], send: Send) -> None:
    """Relay the chunks as the caller takes them: the server's ``send`` waits while the
    caller's socket is full, so the upstream is read no faster than the caller reads. A caller
    that takes nothing for ``CTXWEB_SEND_TIMEOUT`` seconds is dropped."""
    timeout = settings.CTXWEB_SEND_TIMEOUT
    loop = asyncio.get_running_loop()
    stalled = Deadline(loop)  # one timer for every send of the answer
    try:
        async for chunk in chunks:
            if chunk:
                message = {"type": "http.response.body", "body": chunk, "more_body": True}
                stalled.until(loop.time() + timeout)
                try:
                    await stalled.run(functools.partial(send, message))
                except TimeoutError:
                    logger.info("proxy: the caller took nothing for %gs: dropped", timeout)
                    return
        await send({"type": "http.response.body", "body": b""})
    finally:
        stalled.close()
        close = getattr(chunks, "aclose", None)
        if close is not None:
            await close()


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
