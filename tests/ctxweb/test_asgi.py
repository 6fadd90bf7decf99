"""The ASGI application's body cap: a body without ``Content-Length`` (chunked) is read up to
``CTXWEB_MAX_REQUEST_BYTES`` and handed to Django whole (it used to arrive empty), refused with 413
as soon as it goes over; a declared length over the cap is refused before a byte is read.

Through the real ``ctxweb.asgi.application`` in process, and once through the server with a client
that sends ``Transfer-Encoding: chunked``.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import async_to_sync

from ctxweb.asgi import application
from ctxweb.contexts.models import Turn
from tests.support.builders import body, history
from tests.support.servers import LiveServer, create_key, embedded_env, live_server
from tests.support.world import World


def call(
    path: str, key: str, chunks: list[bytes], *, headers: list[tuple[bytes, bytes]] | None = None
) -> tuple[int, Any, int]:
    """POST ``chunks`` as separate ASGI body messages; (status, JSON body, messages read)."""
    read = 0
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        nonlocal read
        if read < len(chunks):
            read += 1
            return {
                "type": "http.request",
                "body": chunks[read - 1],
                "more_body": read < len(chunks),
            }
        await asyncio.sleep(3600)  # the client waits for its answer (Django cancels this)
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
        "headers": [
            (b"host", b"testserver"),
            (b"authorization", f"Bearer {key}".encode()),
            (b"content-type", b"application/json"),
            *(headers or [(b"transfer-encoding", b"chunked")]),
        ],
        "client": ("127.0.0.1", 1234),
        "server": ("testserver", 80),
    }
    async_to_sync(application)(scope, receive, send)
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    payload = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return status, json.loads(payload), read


def pieces(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


@pytest.mark.django_db(transaction=True)
def test_a_chunked_turn_arrives_whole(world: World) -> None:
    data = json.dumps(body(history(3))).encode()
    status, answer, read = call("/api/v1/sessions/s1/turns", world.ingest_key, pieces(data, 4096))
    assert status == 201, answer
    assert read == len(pieces(data, 4096))
    assert Turn.objects.get().message_count == len(history(3))


@pytest.mark.django_db(transaction=True)
def test_a_chunked_body_over_the_cap_is_refused_while_streaming(
    world: World, settings: Any
) -> None:
    settings.CTXWEB_MAX_REQUEST_BYTES = 10_000
    chunks = [b"x" * 1000] * 100
    status, answer, read = call("/api/v1/sessions/s1/turns", world.ingest_key, chunks)
    assert status == 413
    assert answer["error"]["code"] == "too_large"
    assert "10000" in answer["error"]["message"]
    assert read == 11  # stopped at the first chunk past the cap, not at the end
    assert not Turn.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_declared_length_over_the_cap_is_refused_before_reading(
    world: World, settings: Any
) -> None:
    settings.CTXWEB_MAX_REQUEST_BYTES = 10_000
    status, answer, read = call(
        "/api/v1/sessions/s1/turns",
        world.ingest_key,
        [b"{}"],
        headers=[(b"content-length", b"99999999999999999999")],
    )
    assert status == 413
    assert answer["error"]["code"] == "too_large"
    assert read == 0


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveServer, str]]:
    env = embedded_env(tmp_path_factory.mktemp("asgi"), CTXWEB_MAX_REQUEST_BYTES="200000")
    key = create_key(env, role="ingest")
    with live_server(env) as server:
        yield server, key


@pytest.fixture
def capped_server(live: tuple[LiveServer, str]) -> tuple[str, str]:
    server, key = live
    return f"127.0.0.1:{server.port}", key


def post_chunked(host: str, key: str, data: bytes) -> tuple[int, Any]:
    connection = http.client.HTTPConnection(host, timeout=60)
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    connection.request(
        "POST",
        "/api/v1/sessions/s1/turns",
        body=iter(pieces(data, 8192)),
        headers=headers,
        encode_chunked=True,
    )
    response = connection.getresponse()
    answer = json.loads(response.read())
    connection.close()
    return response.status, answer


@pytest.mark.embedded_server
def test_the_server_passes_a_chunked_turn_whole_and_refuses_one_over_the_cap(
    capped_server: tuple[str, str],
) -> None:
    host, key = capped_server
    status, answer = post_chunked(host, key, json.dumps(body(history(3))).encode())
    assert status == 201, answer
    assert answer["index"] == 0
    big = body(history(3, output="y" * 100_000))
    try:
        status, answer = post_chunked(host, key, json.dumps(big).encode())
    except OSError:
        # the server answers 413 and closes the connection as soon as the cap is passed; a client
        # still sending sees the connection closed before it reads the answer.
        status, answer = 413, {"error": {"code": "too_large"}}
    assert status == 413, answer
    assert answer["error"]["code"] == "too_large"
    # The server is unharmed, and stored nothing of it.
    status, answer = post_chunked(host, key, json.dumps(body(history(4))).encode())
    assert (status, answer["index"]) == (201, 1)


@pytest.mark.embedded_server
def test_the_server_hands_a_multipart_body_it_cannot_parse_to_ctxweb(
    capped_server: tuple[str, str],
) -> None:
    """A multipart body that cannot be parsed reaches ctxweb (daphne, the server before uvicorn,
    answered a bare empty 400 itself), which answers in the API's shape, naming the missing file."""
    host, key = capped_server
    connection = http.client.HTTPConnection(host, timeout=60)
    connection.request(
        "POST",
        "/api/v1/import",
        body=b"--c6--\r\n",
        headers={
            "Authorization": f"Bearer {key}",
            "Content-Type": "multipart/form-data; boundary=c6",
        },
    )
    response = connection.getresponse()
    answer = json.loads(response.read())
    connection.close()
    assert response.status == 400
    assert response.getheader("Content-Type") == "application/json"
    assert "file" in answer["error"]["fields"]


@pytest.mark.embedded_server
def test_the_server_still_logs_each_request(live: tuple[LiveServer, str]) -> None:
    """Each request has its access log line."""
    server, _ = live
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    connection.request("GET", "/api/v1/health?logged=1")
    assert connection.getresponse().read()
    connection.close()
    for _ in range(50):
        if '"GET /api/v1/health?logged=1 HTTP/1.1" 200' in server.log:
            break
        time.sleep(0.1)
    assert '"GET /api/v1/health?logged=1 HTTP/1.1" 200' in server.log, server.output


@pytest.mark.embedded_server
def test_the_server_reads_a_large_body_whole(live: tuple[LiveServer, str]) -> None:
    """A body of many socket reads (under the cap) arrives whole and in order."""
    server, key = live
    big = body(history(3, output="".join(f"line {i}\n" for i in range(5_000))))
    raw = json.dumps(big).encode()
    assert 150_000 < len(raw) < 200_000
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    connection.request("POST", "/api/v1/sessions/large/turns", body=raw, headers=headers)
    response = connection.getresponse()
    answer = json.loads(response.read())
    connection.close()
    assert response.status == 201, answer
    assert answer["index"] == 0
