"""The proxy through Django's URLs (WSGI, the test client): the same relay as
:mod:`ctxweb.proxy.app`, which daphne serves without Django's request cycle."""

from __future__ import annotations

from collections.abc import AsyncIterator

from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt

from ctxweb.proxy.relay import Relayed, clients_close
from ctxweb.proxy.relay import relay as relay_call


@csrf_exempt
async def relay(
    request: HttpRequest, provider: str, rest: str
) -> HttpResponse | StreamingHttpResponse:
    if isinstance(request, ASGIRequest):
        return await _relay(request, provider, rest)
    # Under WSGI this view runs in an event loop of its own that ends with it: so do the
    # upstream clients made on it.
    try:
        return await _relay(request, provider, rest)
    finally:
        await clients_close()


async def _relay(
    request: HttpRequest, provider: str, rest: str
) -> HttpResponse | StreamingHttpResponse:
    relayed = await relay_call(
        provider=provider,
        rest=rest,
        method=request.method or "GET",
        query=request.META.get("QUERY_STRING", ""),
        headers=list(request.headers.items()),
        body=request.body,
    )
    body = relayed.body
    if not isinstance(body, bytes) and not isinstance(request, ASGIRequest):
        # Under WSGI this view runs in an event loop of its own that ends with it, and the
        # upstream's connection belongs to that loop: the answer is read whole before it ends
        # (WSGI cannot stream an asynchronous body anyway; Django would buffer it later). The
        # relay bounds it (CTXWEB_PROXY_MAX_ANSWER_BYTES).
        try:
            body = b"".join([chunk async for chunk in body])
        finally:
            await relayed.end()
    elif isinstance(body, bytes):
        relayed.release()
    else:
        body = _released(relayed, body)
    response: HttpResponse | StreamingHttpResponse = (
        HttpResponse(body, status=relayed.status)
        if isinstance(body, bytes)
        else StreamingHttpResponse(body, status=relayed.status)
    )
    for name, value in relayed.headers:
        response[name] = value
    return response


async def _released(relayed: Relayed, chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """``relayed``'s streamed body, its answer ended (:meth:`Relayed.end`) however the reading
    ends."""
    try:
        async for chunk in chunks:
            yield chunk
    finally:
        await relayed.end()
