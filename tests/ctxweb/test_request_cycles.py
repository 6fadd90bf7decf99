"""A request's body goes when the request ends, by reference counting: nothing of it waits in a
reference cycle for the cyclic garbage collector, whose full runs a web process makes rare
(``ctxweb.serving.GC_THRESHOLDS``) and which, run on the event loop after every 16 MB of bodies,
stopped every caller for 15 to 30 ms each time (issue 33).

Each test calls the real ``ctxweb.asgi.application`` in process with the collector off, then
collects once, keeping what it finds (``gc.DEBUG_SAVEALL``): no unreachable object may hold a
string or bytes the size of the body. Through the relay (httpx's answer and its stream refer to
each other, and the answer to the request that held the body), an ingest (Django's request sits
in cycles with what the middleware hangs on it, DRF's view with its request and answer) and an
OTLP export and a Langfuse batch (the same, through the receivers' views).
"""

from __future__ import annotations

import asyncio
import gc
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from ctxweb.asgi import application
from ctxweb.contexts.models import Turn
from ctxweb.proxy.relay import clients_close, recorders_quiet
from tests.support.builders import body, history
from tests.support.providers import provider_stand_in
from tests.support.world import World

#: The size of each request's big text: nothing else in the process is a string that long.
BIG = 2 * 1024 * 1024 + 17


def big_text(n: int) -> str:
    return f"{n} " + "w" * BIG


async def post(path: str, headers: list[tuple[bytes, bytes]], data: bytes) -> tuple[int, bytes]:
    """POST ``data`` to the application in 1 MB pieces, as a server hands a big body over."""
    pieces = [data[i : i + 1024 * 1024] for i in range(0, len(data), 1024 * 1024)]
    del data  # the pieces only: the body the application joins is its own
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if pieces:
            return {"type": "http.request", "body": pieces.pop(0), "more_body": bool(pieces)}
        await asyncio.sleep(3600)  # the client waits for its answer (cancelled then)
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"testserver"), (b"content-type", b"application/json"), *headers],
        "client": ("127.0.0.1", 1234),
        "server": ("testserver", 80),
    }
    await application(scope, receive, send)
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    return status, b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")


@contextmanager
def collector_off() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def unreachable() -> tuple[list[str], list[str]]:
    """What only the cyclic collector would free, by type: all of it, and the objects that hold
    a string or bytes of :data:`BIG` or more; freed once found."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        kinds = [f"{type(o).__module__}.{type(o).__qualname__}" for o in gc.garbage]
        holding = [
            kind
            for kind, holder in zip(kinds, gc.garbage, strict=True)
            if any(
                isinstance(held, str | bytes | bytearray) and len(held) >= BIG
                for held in gc.get_referents(holder)
            )
        ]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    gc.collect()
    return kinds, holding


def requests_among(kinds: list[str]) -> list[str]:
    """Django's and DRF's requests and ctxweb's API views among ``kinds``."""
    return [kind for kind in kinds if kind.endswith(("Request", "Api"))]


def chat(n: int, *, stream: bool) -> bytes:
    messages = [{"role": "user", "content": big_text(n)}]
    return json.dumps({"model": "m", "messages": messages, "stream": stream}).encode()


@pytest.mark.django_db(transaction=True)
def test_a_relayed_calls_body_is_freed_when_the_call_ends(world: World, settings: Any) -> None:
    settings.CTXWEB_RATE_LIMIT = ""
    headers = [
        (b"x-ctxweb-key", world.ingest_key.encode()),
        (b"x-ctxweb-session", b"cycles"),
        (b"authorization", b"Bearer sk-provider"),
    ]
    with provider_stand_in() as upstream:
        settings.CTXWEB_UPSTREAM_OPENAI = f"{upstream.url}/v1"

        async def calls() -> list[int]:
            statuses = []
            for n, path in enumerate(("chat/completions", "chat/completions", "embeddings")):
                data = chat(n, stream=n == 0)
                status, _ = await post(f"/proxy/openai/v1/{path}", headers, data)
                statuses.append(status)
            await clients_close()  # the loop ends here
            return statuses

        with collector_off():
            # streamed, whole, and relayed but not recorded (the stand-in's 404 comes back)
            assert asyncio.run(calls()) == [200, 200, 404]
            recorders_quiet()  # the recorder read the recorded calls back: done with them
            # nothing that is left of the calls holds their bodies
            _, holding = unreachable()
            assert holding == []


@pytest.mark.django_db(transaction=True)
def test_an_ingested_turns_body_is_freed_when_the_request_ends(world: World) -> None:
    headers = [(b"authorization", f"Bearer {world.ingest_key}".encode())]

    def turn(n: int) -> bytes:
        data = body(history(3))
        data["request"]["messages"].append({"role": "user", "content": big_text(n)})
        return json.dumps(data).encode()

    async def ingest() -> list[int]:
        return [(await post("/api/v1/sessions/cycles/turns", headers, turn(n)))[0] for n in (1, 2)]

    with collector_off():
        assert asyncio.run(ingest()) == [201, 201]
        kinds, holding = unreachable()
    assert holding == []
    assert requests_among(kinds) == []
    assert Turn.objects.count() == 2


@pytest.mark.django_db(transaction=True)
def test_a_telemetry_exports_body_is_freed_when_the_request_ends(world: World) -> None:
    headers = [(b"authorization", f"Bearer {world.ingest_key}".encode())]

    def otlp(n: int) -> bytes:
        said = [{"role": "user", "parts": [{"type": "text", "content": big_text(n)}]}]
        attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.input.messages": json.dumps(said),
        }
        span = {
            "traceId": "5b8efff798038103d269b633813fc60c",
            "spanId": f"{n:016x}",
            "name": "chat gpt-4o",
            "startTimeUnixNano": "100",
            "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attributes.items()],
        }
        resource = {"attributes": [{"key": "session.id", "value": {"stringValue": "otlp"}}]}
        scope = {"scope": {"name": "test"}, "spans": [span]}
        return json.dumps(
            {"resourceSpans": [{"resource": resource, "scopeSpans": [scope]}]}
        ).encode()

    def langfuse(n: int) -> bytes:
        said = [{"role": "user", "content": big_text(n)}]
        generation = {"id": f"g{n}", "traceId": "t", "input": said, "output": "ok"}
        event = {
            "id": f"e{n}",
            "type": "generation-create",
            "timestamp": "2026-11-28T00:00:00Z",
            "body": generation,
        }
        return json.dumps({"batch": [event]}).encode()

    async def exports() -> list[tuple[int, bytes]]:
        return [
            await post("/v1/traces", headers, otlp(1)),
            await post("/api/public/ingestion", headers, langfuse(2)),
        ]

    with collector_off():
        # the span and the generation stored: every byte of both was read
        assert asyncio.run(exports()) == [
            (200, b"{}"),
            (207, b'{"successes":[{"id":"e2","status":201}],"errors":[]}'),
        ]
        kinds, holding = unreachable()
    assert holding == []
    assert requests_among(kinds) == []
    assert Turn.objects.count() == 2
