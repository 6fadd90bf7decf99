"""Driving the ASGI application in process, as a server would (:mod:`ctxweb.serving`): a request's
scope, its body handed over in pieces, and what the application sends back."""

from __future__ import annotations

import asyncio
from typing import Any

from asgiref.sync import async_to_sync

from ctxweb.asgi import application
from ctxweb.proxy.relay import clients_close


def scope(
    method: str, path: str, *, key: str | None = None, query: bytes = b"", headers: Any = ()
) -> dict[str, Any]:
    auth = [(b"authorization", f"Bearer {key}".encode())] if key else []
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query,
        "root_path": "",
        "headers": [(b"host", b"testserver"), *auth, *headers],
        "client": ("127.0.0.1", 1234),
        "server": ("testserver", 80),
    }


def proxied_chat(raw_key: str, session: str) -> dict[str, Any]:
    """The scope of an agent's chat completion through the proxy, with ctxweb's key and session
    headers beside the provider's key."""
    return scope(
        "POST",
        "/proxy/openai/v1/chat/completions",
        headers=[
            (b"content-type", b"application/json"),
            (b"x-ctxweb-key", raw_key.encode()),
            (b"x-ctxweb-session", session.encode()),
            (b"authorization", b"Bearer sk-provider"),
        ],
    )


def serve(
    request: dict[str, Any],
    chunks: list[bytes] | None = None,
    *,
    sent: list[dict[str, Any]] | None = None,
) -> tuple[int, dict[str, str], list[dict[str, Any]]]:
    """Run ``request`` through the application; (status, headers, the body messages sent).
    ``sent``: the list each message the application sends is appended to, as it is sent."""
    pending = list(chunks or [b""])
    sent = [] if sent is None else sent

    async def receive() -> dict[str, Any]:
        if pending:
            chunk = pending.pop(0)
            return {"type": "http.request", "body": chunk, "more_body": bool(pending)}
        await asyncio.sleep(3600)
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def served() -> None:
        try:
            await application(request, receive, send)
        finally:  # the loop ends with the call: so do the proxy's upstream clients made on it
            await clients_close()

    async_to_sync(served)()
    start = next(m for m in sent if m["type"] == "http.response.start")
    headers = {n.decode(): v.decode() for n, v in start["headers"]}
    return start["status"], headers, [m for m in sent if m["type"] == "http.response.body"]


def payload(messages: list[dict[str, Any]]) -> bytes:
    return b"".join(m.get("body", b"") for m in messages)
