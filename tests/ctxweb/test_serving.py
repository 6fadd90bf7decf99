"""Django's HTTP requests served on a fixed pool of threads (:mod:`ctxweb.serving`).

In process through the real ``ctxweb.asgi.application``: what Django sees of a request (path,
query, headers, cookies, a body that came in pieces), a streamed response sent as it is produced,
a caller that leaves before its body arrives. Against a live uvicorn on PostgreSQL: requests
reuse the server's database connections instead of opening one each (the point of the pool).
"""

from __future__ import annotations

import http.client
import io
import json
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.db import connection

from ctxweb.asgi import application
from ctxweb.serving import ThreadedDjangoApplication, environ_for
from ctxweb.serving import _body as serving_body
from tests.support.asgi import payload, scope, serve
from tests.support.builders import body, history
from tests.support.servers import database_server_env, live_server, require_postgresql
from tests.support.world import World


def test_the_environ_is_what_a_wsgi_server_gives_django() -> None:
    environ = environ_for(
        {
            **scope(
                "POST",
                "/app/api/v1/sessions/é",
                query=b"a=1&b=%20",
                headers=[
                    (b"cookie", b"a=1"),
                    (b"cookie", b"b=2"),
                    (b"x-thing", b"one"),
                    (b"x-thing", b"two"),
                    (b"content-type", b"application/json"),
                    (b"content-length", b"999"),
                ],
            ),
            "root_path": "/app",
        },
        None,
        12,
    )
    assert environ["SCRIPT_NAME"] == "/app"
    assert environ["PATH_INFO"] == "/api/v1/sessions/é".encode().decode("latin-1")
    assert environ["QUERY_STRING"] == "a=1&b=%20"
    assert environ["HTTP_COOKIE"] == "a=1; b=2"
    assert environ["HTTP_X_THING"] == "one,two"
    assert environ["CONTENT_TYPE"] == "application/json"
    assert environ["CONTENT_LENGTH"] == "12"  # what was read, not what was declared
    assert "HTTP_CONTENT_LENGTH" not in environ
    assert (environ["REMOTE_ADDR"], environ["SERVER_NAME"]) == ("127.0.0.1", "testserver")


@pytest.mark.django_db(transaction=True)
def test_a_body_in_pieces_and_a_streamed_export(world: World) -> None:
    data = json.dumps(body(history(3))).encode()
    pieces = [data[i : i + 100] for i in range(0, len(data), 100)]
    status, _, sent = serve(
        scope(
            "POST",
            "/api/v1/sessions/s1/turns",
            key=world.ingest_key,
            headers=[(b"content-type", b"application/json")],
        ),
        pieces,
    )
    assert status == 201, payload(sent)
    assert json.loads(payload(sent))["index"] == 0

    status, headers, sent = serve(
        scope("GET", "/api/v1/sessions/s1/export", key=world.ingest_key, query=b"format=jsonl")
    )
    assert status == 200, payload(sent)
    assert "jsonl" in headers["content-type"] or "json" in headers["content-type"]
    lines = payload(sent).decode().splitlines()
    assert lines
    assert all(json.loads(line) for line in lines)
    # streamed: each piece sent as the thread produced it, then the end of the body
    assert len(sent) >= 2
    assert all(m.get("more_body") for m in sent[:-1])
    assert not sent[-1].get("more_body")
    assert sent[-1]["body"] == b""


def test_a_caller_that_leaves_before_its_body_gets_nothing() -> None:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async_to_sync(application)(scope("POST", "/api/v1/sessions/s1/turns"), receive, send)
    assert sent == []


def test_the_health_check_is_answered_on_the_event_loop_as_django_answered_it() -> None:
    """Django answers a kind of health check once; then the same answer comes from the event
    loop, while every thread of the pool is busy. A disallowed Host, a query or another method
    still go through Django."""
    import threading

    app = ThreadedDjangoApplication(threads=1)
    calls: list[str] = []
    respond = app._respond

    def counted(environ: dict[str, Any]) -> Any:
        calls.append(environ["REQUEST_METHOD"])
        return respond(environ)

    app._respond = counted  # type: ignore[method-assign]

    def run(request: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        async_to_sync(app)(request, receive, send)
        start = next(m for m in sent if m["type"] == "http.response.start")
        return start["status"], dict(_text(start["headers"])), payload(sent[1:])

    first = run(scope("GET", "/api/v1/health"))
    assert first[0] == 200
    assert json.loads(first[2]) == {"status": "ok"}
    assert "content-security-policy" in first[1]
    assert calls == ["GET"]
    release = threading.Event()
    busy = app.executor.submit(release.wait, 60)  # the pool's only thread, taken
    try:
        assert run(scope("GET", "/api/v1/health")) == first
    finally:
        release.set()
        busy.result(timeout=60)
    assert calls == ["GET"]
    assert run(scope("HEAD", "/api/v1/health"))[0] == 200
    assert run(scope("HEAD", "/api/v1/health"))[0] == 200
    assert calls == ["GET", "HEAD"]
    evil = scope("GET", "/api/v1/health", headers=())
    evil["headers"] = [(b"host", b"evil.example")]
    assert run(evil)[0] == 400
    assert run(evil)[0] == 400
    assert run(scope("GET", "/api/v1/health", query=b"a=1"))[0] == 200
    assert run(scope("POST", "/api/v1/health"))[0] == 405
    assert calls == ["GET", "HEAD", "GET", "GET", "GET", "POST"]
    assert len(app.health) == 2


def _text(headers: list[tuple[bytes, bytes]]) -> list[tuple[str, str]]:
    return [(n.decode(), v.decode()) for n, v in headers]


THREADS = 2


@pytest.fixture
def postgres_server(tmp_path: Any, world: World) -> Iterator[tuple[int, str]]:
    require_postgresql("a server's own connections")
    env = {**database_server_env(tmp_path), "CTXWEB_HTTP_THREADS": str(THREADS)}
    with live_server(env) as server:
        yield server.port, world.ingest_key


def server_backends() -> set[int]:
    """The PostgreSQL backends on the test database other than this process's own."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
            " AND pid <> pg_backend_pid()"
        )
        return {pid for (pid,) in cursor.fetchall()}


@pytest.mark.django_db(transaction=True)
def test_a_server_keeps_its_database_connections(postgres_server: tuple[int, str]) -> None:
    """Turn after turn, every request runs on a connection one of the server's threads already
    holds: the server's backends never outnumber its threads (plus the one that records a key's
    use, once a minute). It used to open and close one per request: none was left between
    requests, and each request's was new."""
    port, key = postgres_server
    client = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    seen: set[int] = set()
    for n in range(1, 13):
        client.request("POST", "/api/v1/sessions/kept/turns", json.dumps(body(history(n))), headers)
        answer = client.getresponse()
        assert answer.status == 201, answer.read()
        answer.read()
        now = server_backends()
        assert now, f"no connection kept after request {n}"
        seen |= now
    assert len(seen) <= THREADS + 1, seen


def _read_body(chunks: list[bytes], *, leave: bool = False) -> Any:
    pending = list(chunks)

    async def receive() -> dict[str, Any]:
        if not pending:
            return {"type": "http.disconnect"}
        chunk = pending.pop(0)
        return {"type": "http.request", "body": chunk, "more_body": bool(pending) or leave}

    return async_to_sync(serving_body)(receive)


def test_a_body_in_pieces_is_one_bytes_in_memory_read_without_a_copy(settings: Any) -> None:
    """Under ``FILE_UPLOAD_MAX_MEMORY_SIZE`` the pieces are joined once: Django's read of the
    whole body is that very object (a late turn's body is not copied again)."""
    settings.FILE_UPLOAD_MAX_MEMORY_SIZE = 1000
    read = _read_body([b"a" * 300, b"b" * 300, b"c" * 300])
    assert isinstance(read, io.BytesIO)
    whole = read.getvalue()
    assert whole == b"a" * 300 + b"b" * 300 + b"c" * 300
    assert read.read(900) is whole


def test_a_body_past_the_memory_size_is_spooled_to_disk_whole(settings: Any) -> None:
    settings.FILE_UPLOAD_MAX_MEMORY_SIZE = 1000
    pieces = [bytes([65 + n]) * 400 for n in range(6)]
    read = _read_body(pieces)
    with read:
        assert not isinstance(read, io.BytesIO)  # a file on disk
        assert read.read() == b"".join(pieces)


def test_a_caller_that_leaves_mid_body_gets_nothing(settings: Any) -> None:
    settings.FILE_UPLOAD_MAX_MEMORY_SIZE = 1000
    assert _read_body([b"x" * 600, b"y" * 600], leave=True) is None
