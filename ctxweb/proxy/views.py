"""The proxy through Django's URLs (WSGI, the test client): the same relay as
:mod:`ctxweb.proxy.app`, which daphne serves without Django's request cycle."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt

from ctxweb.proxy.relay import relay as relay_call


@csrf_exempt
async def relay(
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
    response: HttpResponse | StreamingHttpResponse = (
        HttpResponse(relayed.body, status=relayed.status)
        if isinstance(relayed.body, bytes)
        else StreamingHttpResponse(relayed.body, status=relayed.status)
    )
    for name, value in relayed.headers:
        response[name] = value
    return response
