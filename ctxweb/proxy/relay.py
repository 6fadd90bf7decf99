"""The relay itself, whatever serves it: one model call in (method, path, headers, body), the
provider's answer out (status, headers, the body as it arrives), the call recorded afterwards.

:mod:`ctxweb.proxy.app` serves it straight from ASGI (what daphne runs: no Django request,
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
  ``POST messages`` (Anthropic) answered 2xx are recorded in a thread once the last chunk has
  been relayed, or, for a stream, once its last event has (an SDK may leave as soon as it reads
  it, before the upstream ends the stream); a caller that leaves mid-stream is not recorded. A
  recording failure is counted and logged, and the call has succeeded anyway.
- **Managed mode** (``X-Ctxweb-Managed: 1``): once an operator has applied a strategy to the
  session, the start of the agent's request that the operation compacted is sent compacted
  (:func:`~ctxweb.contexts.services.proxying.proxy_prepare`), until the operation is undone.
- **Bounded**: bodies are capped like every request (``CTXWEB_MAX_REQUEST_BYTES``); each key
  has ``CTXWEB_RATE_LIMIT`` (429 with ``Retry-After``, in the provider's shape).
- **No open relay**: the upstream comes from ``CTXWEB_UPSTREAM_OPENAI`` and
  ``CTXWEB_UPSTREAM_ANTHROPIC`` only, never from the request.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import weakref
from collections.abc import AsyncIterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx
import msgspec
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections, connection

from ctxweb import ratelimit
from ctxweb.accounts.selectors import api_key_get_active
from ctxweb.accounts.services import api_key_touch
from ctxweb.bodies import ENCODINGS
from ctxweb.contexts.services.ingest import WINDOW_HEADERS, call_context_window
from ctxweb.contexts.services.proxying import (
    proxy_answer_finished,
    proxy_prepare,
    proxy_record,
)

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
#: A response kept for recording past this size is not recorded (it is still relayed whole).
RECORD_LIMIT = 64 * 1024 * 1024
#: The recorder's database connection is checked before use once it has been idle this long.
RECORDER_IDLE_CHECK = 30.0

Headers = list[tuple[str, str]]


@dataclass
class Relayed:
    """The answer to send back: status, headers (names as the provider wrote them) and the body,
    whole or as the chunks arrive."""

    status: int
    headers: Headers
    body: bytes | AsyncIterator[bytes]


#: One pooled client per event loop, forgotten with its loop (a loop's id can be reused by the
#: next loop once it is gone, and a client bound to a closed loop fails on its next call).
_CLIENTS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = (
    weakref.WeakKeyDictionary()
)
#: Recording runs here, one call at a time in the order the answers ended: a call that extends
#: the previous one finds it recorded, and recording never competes with relaying for threads.
_RECORDER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ctxweb-proxy-record")
_recorder_used = 0.0


def _client() -> httpx.AsyncClient:
    """One pooled client per event loop (daphne runs one)."""
    loop = asyncio.get_running_loop()
    if loop not in _CLIENTS:
        _CLIENTS[loop] = httpx.AsyncClient(
            timeout=httpx.Timeout(settings.CTXWEB_PROXY_TIMEOUT, connect=10.0),
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=64),
            follow_redirects=False,
        )
    return _CLIENTS[loop]


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


def _admit(raw_key: str) -> tuple[ApiKey | None, int | None]:
    """The caller's active key and, when it is over its rate, the seconds to wait: one trip off
    the event loop (a cached key costs a cache read, see ``api_key_get_active``)."""
    key = api_key_get_active(raw_key=raw_key)
    if connection.connection is not None:  # the key was not cached: the database was read
        close_old_connections()
    if key is None:
        return None, None
    api_key_touch(key=key)
    return key, _wait_before(key)


def _prepare(**call: Any) -> Any:
    try:
        return proxy_prepare(**call)
    finally:
        close_old_connections()


def recording_idle(timeout: float = 30, *, close: bool = False) -> None:
    """Wait until every call relayed so far is recorded (tests, and a process shutting down);
    with ``close``, the recorder's database connection is closed too (it keeps it between
    calls), so it holds nothing of the database afterwards."""
    _RECORDER.submit(lambda: connection.close() if close else None).result(timeout=timeout)


class _Model(msgspec.Struct):
    """The one field of a request body the window needs (msgspec skips the rest unread)."""

    model: Any = None


def _window(body: bytes, headers: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """What the call says of its window (the model it names, the headers selecting a longer
    one), as ``proxy_record``'s ``context_window`` and ``context_window_source``."""
    try:
        model = msgspec.json.decode(body, type=_Model).model
    except msgspec.DecodeError:  # not a JSON object: proxy_record says so
        model = None
    window, source = call_context_window(
        model=model if isinstance(model, str) else None, headers=headers
    )
    return {"context_window": window, "context_window_source": source}


def _record(*, window_headers: Sequence[tuple[str, str]] = (), **call: Any) -> None:
    """In the recorder's thread, which keeps its database connection between calls (a new one
    per call costs more than the recording), checked before use after an idle spell. The
    call's window is read from its body and ``window_headers`` there too, off the event loop."""
    global _recorder_used
    try:
        call.update(_window(call["request_body"], window_headers))
        if time.monotonic() - _recorder_used > RECORDER_IDLE_CHECK:
            connection.close_if_unusable_or_obsolete()
            if connection.connection is not None and not connection.is_usable():
                connection.close()
        if proxy_record(**call) is None:
            connection.close()  # it failed: the next call starts on a fresh connection
    except Exception:
        # proxy_record keeps what it cannot read; anything else must not vanish in the
        # executor's future, where nobody looks
        logger.exception("proxy: the recorder failed on a %s call", call.get("format"))
        connection.close()
    finally:
        _recorder_used = time.monotonic()


async def relay(
    *,
    provider: str,
    rest: str,
    method: str,
    query: str,
    headers: Sequence[tuple[str, str]],
    body: bytes,
) -> Relayed:
    """Relay one call to ``provider``'s upstream (``rest`` is the path after ``v1/``)."""
    raw_key = _header(headers, "x-ctxweb-key")
    key, wait = await sync_to_async(_admit)(raw_key) if raw_key else (None, None)
    if key is None:
        refused = error(
            provider,
            401,
            "authentication_error" if provider == "anthropic" else "invalid_api_key",
            "ctxweb: send your ctxweb API key in the X-Ctxweb-Key header (the provider's key"
            " stays in its usual header).",
        )
        # Asking again cannot help. Claude Code retries a bare 401 for about three minutes
        # before it prints the message; this header (which the Anthropic and OpenAI SDKs
        # honour) makes it stop at the first answer.
        refused.headers.append(("x-should-retry", "false"))
        return refused
    if wait is not None:
        kind = "rate_limit_error" if provider == "anthropic" else "rate_limit_exceeded"
        refused = error(
            provider, 429, kind, f"ctxweb: over this key's rate limit; retry in {wait}s."
        )
        refused.headers.append(("retry-after", str(wait)))
        return refused
    url = f"{upstream(provider)}/{rest}"
    if query:
        url += "?" + query
    format = RECORDED.get((provider, rest.rstrip("/"))) if method == "POST" else None
    session = _header(headers, "x-ctxweb-session") or None
    original: tuple[str, ...] = ()
    events: list[dict[str, Any]] = []
    managed = _header(headers, "x-ctxweb-managed").lower() in ("1", "true")
    if format is not None and managed:  # else nothing to decide before the call: the recorder does
        prepared = await sync_to_async(_prepare)(
            project=key.project,
            key_id=key.pk,
            format=format,
            body=body,
            session=session,
            managed=managed,
        )
        session, events = prepared.session, prepared.events
        if prepared.body != body:
            body, original = prepared.body, prepared.original
    client = _client()
    forwarded = [*_forwarded(headers), ("accept-encoding", _accept_encoding(headers))]
    try:
        outgoing = client.build_request(
            method,
            url,
            # As bytes, each character one byte, as received: httpx encodes text headers as
            # ASCII, and an agent's header that is not (a title in Latin-1 or UTF-8) must go up
            # unchanged.
            headers=[(n.encode("latin-1"), v.encode("latin-1")) for n, v in forwarded],
            content=body,
        )
    except httpx.InvalidURL as invalid:  # a control character in the path or query, say
        why = f"ctxweb: the URL cannot be relayed ({invalid})."
        return error(provider, 400, "invalid_request_error", why)
    try:
        answer = await client.send(outgoing, stream=True)
    except httpx.HTTPError as failure:
        logger.warning("proxy: %s unreachable: %s", upstream(provider), type(failure).__name__)
        return error(
            provider,
            502,
            "api_error",
            f"ctxweb: the provider could not be reached ({type(failure).__name__}).",
        )
    if not 200 <= answer.status_code < 300:
        format = None
    streamed = answer.headers.get("content-type", "").startswith("text/event-stream")
    project, key_id, sent = key.project, key.pk, body
    window_headers = [(name, value) for name, value in headers if name.lower() in WINDOW_HEADERS]
    coding = answer.headers.get("content-encoding", "").strip().lower()
    encoded = coding not in ("", "identity")

    async def chunks() -> AsyncIterator[bytes]:
        kept: bytearray | None = bytearray() if format else None
        complete = False
        try:
            async for chunk in answer.aiter_raw():
                if kept is not None:
                    if len(kept) + len(chunk) > RECORD_LIMIT:
                        kept = None
                    else:
                        kept += chunk
                yield chunk
            complete = True
        finally:
            try:
                # A stream whose last event was relayed is a whole answer even when the caller
                # leaves before its end (the openai SDK closes the connection once it reads
                # ``[DONE]``, racing the upstream's end of stream): it is recorded all the same.
                if kept is not None and format is not None:
                    whole = complete or (
                        streamed and not encoded and proxy_answer_finished(format, kept)
                    )
                    if whole:
                        _RECORDER.submit(
                            _record,
                            project=project,
                            key_id=key_id,
                            format=format,
                            request_body=sent,
                            response_body=bytes(kept),
                            streamed=streamed,
                            session=session,
                            original=original,
                            events=events,
                            compressed=encoded,
                            content_encoding=coding if encoded else "",
                            window_headers=window_headers,
                        )
            finally:
                await answer.aclose()

    # As received, read as Latin-1 (each byte one character): the bytes go back unchanged. The
    # decoded headers are UTF-8 where they can be, which the answer could not write.
    returned = [
        (name.decode("latin-1"), value.decode("latin-1"))
        for name, value in answer.headers.raw
        if name.decode("latin-1").lower() not in NOT_RETURNED
    ]
    return Relayed(answer.status_code, returned, chunks())
