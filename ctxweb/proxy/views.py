"""``/proxy/openai/v1/...`` and ``/proxy/anthropic/v1/...``: relay to the provider, record model
calls.

- **Who and where**: the ctxweb key in ``X-Ctxweb-Key``, the session in ``X-Ctxweb-Session``
  (optional: see :mod:`ctxweb.contexts.services.proxying`). No key, or a revoked one: 401 in the
  provider's error shape, and nothing leaves.
- **Transparent**: the provider's key and every other header go upstream unchanged (never stored
  or logged) but for hop-by-hop headers (RFC 9110 §7.6.1), ``Host``, ctxweb's own headers and its
  cookies; ``Accept-Encoding`` is dropped so that what is relayed can be recorded. The answer
  comes back as the provider sent it, status and headers included, streamed chunk by chunk.
- **Recorded off the caller's path**: ``POST chat/completions`` and ``responses`` (OpenAI) and
  ``POST messages`` (Anthropic) answered 2xx are recorded in a thread once the last chunk has
  been relayed; a recording failure is counted and logged, and the call has succeeded anyway.
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
import zlib
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.cache import cache
from django.db import close_old_connections
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt

from ctxweb.accounts.selectors import api_key_get_active
from ctxweb.accounts.services import api_key_touch
from ctxweb.contexts.services.proxying import proxy_prepare, proxy_record

logger = logging.getLogger(__name__)

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
#: (provider, path after v1/) -> the request format recorded.
RECORDED = {
    ("openai", "chat/completions"): "openai-chat",
    ("openai", "responses"): "openai-responses",
    ("anthropic", "messages"): "anthropic-messages",
}
#: A response kept for recording past this size is not recorded (it is still relayed whole).
RECORD_LIMIT = 64 * 1024 * 1024

_CLIENTS: dict[int, httpx.AsyncClient] = {}
#: Recording runs here, one call at a time in the order the answers ended: a call that extends
#: the previous one finds it recorded, and recording never competes with relaying for threads.
_RECORDER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ctxweb-proxy-record")


def _client() -> httpx.AsyncClient:
    """One pooled client per event loop (daphne runs one)."""
    loop = id(asyncio.get_running_loop())
    if loop not in _CLIENTS:
        _CLIENTS[loop] = httpx.AsyncClient(
            timeout=httpx.Timeout(settings.CTXWEB_PROXY_TIMEOUT, connect=10.0),
            follow_redirects=False,
        )
    return _CLIENTS[loop]


def _upstream(provider: str) -> str:
    base = (
        settings.CTXWEB_UPSTREAM_OPENAI
        if provider == "openai"
        else settings.CTXWEB_UPSTREAM_ANTHROPIC
    )
    return str(base).rstrip("/")


def _error(provider: str, status: int, kind: str, message: str) -> HttpResponse:
    """An error in the provider's own shape, so the agent's SDK reports it as it would."""
    if provider == "anthropic":
        body: dict[str, Any] = {"type": "error", "error": {"type": kind, "message": message}}
    else:
        body = {"error": {"message": message, "type": kind, "param": None, "code": kind}}
    return HttpResponse(json.dumps(body), status=status, content_type="application/json")


def _forwarded(request: HttpRequest) -> dict[str, str]:
    named = {
        token.strip().lower()
        for token in request.headers.get("Connection", "").split(",")
        if token.strip()
    }
    return {
        name: value
        for name, value in request.headers.items()
        if name.lower() not in HOP_BY_HOP | NOT_FORWARDED | named
    }


#: A rate's period, as ``CTXWEB_RATE_LIMIT`` writes it (``1200/min``), in seconds.
PERIODS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _wait_before(key: Any) -> int | None:
    """Seconds the key must wait when it is over ``CTXWEB_RATE_LIMIT`` (a fixed window per
    key, counted in the shared cache), else None; an unreachable cache lets the call through."""
    rate = str(getattr(settings, "CTXWEB_RATE_LIMIT", "") or "")
    if not rate:
        return None
    number, _, period = rate.partition("/")
    seconds = PERIODS.get(period.strip()[:1].lower(), 0)
    allowed = int(number) if number.strip().isdigit() else 0
    if not allowed or not seconds:
        return None
    now = time.time()
    window = int(now // seconds)
    name = f"ctxweb-throttle:proxy:{key.pk}:{key.key_hash[:16]}:{window}"
    try:
        cache.add(name, 0, seconds + 1)
        count = cache.incr(name)
    except Exception:
        logger.warning("proxy rate limit not checked: the cache is unavailable")
        return None
    return int(seconds - now % seconds) + 1 if count > allowed else None


def recording_idle(timeout: float = 30) -> None:
    """Wait until every call relayed so far is recorded (tests, and a process shutting down)."""
    _RECORDER.submit(lambda: None).result(timeout=timeout)


def _record(**call: Any) -> None:
    try:
        proxy_record(**call)
    finally:
        close_old_connections()


@csrf_exempt
async def relay(
    request: HttpRequest, provider: str, rest: str
) -> HttpResponse | StreamingHttpResponse:
    raw_key = request.headers.get("X-Ctxweb-Key", "").strip()
    key = await sync_to_async(api_key_get_active)(raw_key=raw_key) if raw_key else None
    if key is not None:
        await sync_to_async(api_key_touch)(key=key)
    if key is None:
        return _error(
            provider,
            401,
            "authentication_error" if provider == "anthropic" else "invalid_api_key",
            "ctxweb: send your ctxweb API key in the X-Ctxweb-Key header (the provider's key"
            " stays in its usual header).",
        )
    wait = await sync_to_async(_wait_before)(key)
    if wait is not None:
        kind = "rate_limit_error" if provider == "anthropic" else "rate_limit_exceeded"
        refused = _error(
            provider, 429, kind, f"ctxweb: over this key's rate limit; retry in {wait}s."
        )
        refused["Retry-After"] = str(wait)
        return refused
    url = f"{_upstream(provider)}/{rest}"
    if request.META.get("QUERY_STRING"):
        url += "?" + request.META["QUERY_STRING"]
    format = RECORDED.get((provider, rest.rstrip("/"))) if request.method == "POST" else None
    session = request.headers.get("X-Ctxweb-Session", "").strip() or None
    body = request.body
    original: tuple[str, ...] = ()
    events: list[dict[str, Any]] = []
    managed = request.headers.get("X-Ctxweb-Managed", "").strip().lower() in ("1", "true")
    if format is not None and managed:  # else nothing to decide before the call: the recorder does
        prepared = await sync_to_async(proxy_prepare)(
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
    outgoing = client.build_request(
        request.method or "GET", url, headers=_forwarded(request), content=body
    )
    try:
        upstream = await client.send(outgoing, stream=True)
    except httpx.HTTPError as error:
        logger.warning("proxy: %s unreachable: %s", _upstream(provider), type(error).__name__)
        return _error(
            provider,
            502,
            "api_error",
            f"ctxweb: the provider could not be reached ({type(error).__name__}).",
        )
    if not 200 <= upstream.status_code < 300:
        format = None
    streamed = upstream.headers.get("content-type", "").startswith("text/event-stream")
    key_id = key.pk
    project = key.project

    async def chunks() -> AsyncIterator[bytes]:
        kept: bytearray | None = bytearray() if format else None
        complete = False
        try:
            async for chunk in upstream.aiter_raw():
                if kept is not None:
                    if len(kept) + len(chunk) > RECORD_LIMIT:
                        kept = None
                    else:
                        kept += chunk
                yield chunk
            complete = True
        finally:
            await upstream.aclose()
        if complete and kept is not None and format is not None:
            received = bytes(kept)
            if upstream.headers.get("content-encoding", "").lower() in ("gzip", "deflate"):
                received = zlib.decompress(received, zlib.MAX_WBITS | 32)
            _RECORDER.submit(
                _record,
                project=project,
                key_id=key_id,
                format=format,
                request_body=body,
                response_body=received,
                streamed=streamed,
                session=session,
                original=original,
                events=events,
            )

    response = StreamingHttpResponse(chunks(), status=upstream.status_code)
    for name, value in upstream.headers.multi_items():
        if name.lower() not in HOP_BY_HOP | {"content-length"}:
            response[name] = value
    return response
