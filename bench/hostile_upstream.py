"""The hostile benchmark's upstream: a loopback stand-in for OpenAI's chat completions, served by
uvicorn in its own processes (``bench/hostile.py`` starts it), so that it is never what limits
the run.

What it answers depends on the request's ``model``:

- any model but those below: a stream of :data:`CHUNKS` content chunks of :data:`ANSWER` over
  about ``HOSTILE_UPSTREAM_SECONDS`` (0.2 s: a model thinking), the first at once, then the
  usage and ``[DONE]``; without ``"stream": true``, the same answer as one JSON object after
  that time;
- ``hang-headers``: the stream's headers, then nothing until the caller leaves;
- ``hang-silent``: nothing at all until the caller leaves;
- ``huge``: a stream of ``HOSTILE_UPSTREAM_HUGE_MB`` megabytes (512 by default), as fast as the
  caller takes it (for clients that never read).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import msgspec

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

#: The answer of every ordinary call: the callers append it to their conversation, so that every
#: caller's k-th call is the same request (bench/hostile.py maps turns to calls by their size).
ANSWER = "Done: the step ran, its tests pass and the build is green again."
CHUNKS = 10
SECONDS = float(os.environ.get("HOSTILE_UPSTREAM_SECONDS", "0.2"))
HUGE_BYTES = int(float(os.environ.get("HOSTILE_UPSTREAM_HUGE_MB", "512")) * 1024 * 1024)
SSE = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]


class _Call(msgspec.Struct):
    """The fields of a request this stand-in reads (msgspec skips the rest unread: a 30 MB body
    costs a scan, not a Python object per message)."""

    model: str = "gpt-4o"
    stream: bool = False


def _chunk(model: str, delta: dict[str, Any], finish: str | None = None) -> bytes:
    data = {
        "id": "chatcmpl-hostile",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(data).encode() + b"\n\n"


def _usage(size: int) -> dict[str, int]:
    prompt = max(1, size // 4)
    return {"prompt_tokens": prompt, "completion_tokens": 16, "total_tokens": prompt + 16}


async def _read(receive: Receive) -> bytes | None:
    parts: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        parts.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(parts)


async def _until_gone(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def _stream(model: str, size: int, send: Send) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": SSE})
    body: list[bytes] = [_chunk(model, {"role": "assistant", "content": ""})]
    await send({"type": "http.response.body", "body": body[0], "more_body": True})
    step = len(ANSWER) // CHUNKS + 1
    for start in range(0, len(ANSWER), step):
        await asyncio.sleep(SECONDS / CHUNKS)
        piece = _chunk(model, {"content": ANSWER[start : start + step]})
        await send({"type": "http.response.body", "body": piece, "more_body": True})
    end = _chunk(model, {}, "stop")
    usage = json.dumps(
        {
            "id": "chatcmpl-hostile",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": model,
            "choices": [],
            "usage": _usage(size),
        }
    ).encode()
    tail = end + b"data: " + usage + b"\n\ndata: [DONE]\n\n"
    await send({"type": "http.response.body", "body": tail})


async def _whole(model: str, size: int, send: Send) -> None:
    await asyncio.sleep(SECONDS)
    answer = {
        "id": "chatcmpl-hostile",
        "object": "chat.completion",
        "created": 1,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": ANSWER},
                "finish_reason": "stop",
            }
        ],
        "usage": _usage(size),
    }
    headers = [(b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": json.dumps(answer).encode()})


async def _huge(model: str, send: Send) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": SSE})
    piece = _chunk(model, {"content": "x" * 65_000})
    sent = 0
    while sent < HUGE_BYTES:  # each send waits while the caller's buffers are full
        await send({"type": "http.response.body", "body": piece, "more_body": True})
        sent += len(piece)
    await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    """The ASGI application uvicorn serves."""
    if scope["type"] != "http":
        return
    body = await _read(receive)
    if body is None:
        return
    try:
        call = msgspec.json.decode(body, type=_Call)
    except msgspec.DecodeError:
        call = _Call()
    if call.model == "hang-silent":
        await _until_gone(receive)
    elif call.model == "hang-headers":
        await send({"type": "http.response.start", "status": 200, "headers": SSE})
        await _until_gone(receive)
    elif call.model == "huge":
        await _huge(call.model, send)
    elif call.stream:
        await _stream(call.model, len(body), send)
    else:
        await _whole(call.model, len(body), send)
