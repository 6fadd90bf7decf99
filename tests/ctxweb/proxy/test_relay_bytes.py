"""Headers cross the proxy byte for byte, whatever their bytes, and a URL that cannot is refused
with a 400 (issue 34, the space around the proxy's fuzzing). An answer's header value in UTF-8
outside Latin-1 (an upstream's note, a request id, a file name) used to stop the relay as it
wrote the answer, and the server (daphne then) answered 500 for a call the upstream had answered
200, which was never recorded either; an agent's header value that is not ASCII (a title, a user
name in Latin-1 or UTF-8) was a 500 from ctxweb itself, and nothing reached the provider. So was a
path or query holding a DEL (0x7F), which the server passes on and no HTTP client sends.

A live uvicorn relays to a loopback server speaking OpenAI's chat completions, streamed and not."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.support.servers import create_key, embedded_env, live_server

pytestmark = pytest.mark.embedded_server

#: A header value as the upstream writes it: UTF-8, with a character outside Latin-1.
NOTE = "réponse ✓ 答".encode()
#: What each call's ``X-Agent-Note`` was, as the upstream received it.
RECEIVED: list[bytes] = []
#: The ``Cookie`` header of each call, as the upstream received it (None: none came).
COOKIES: list[str | None] = []
#: The ``Set-Cookie`` header of each answer, as the caller received it.
SET_COOKIES: list[str | None] = []


class Upstream(BaseHTTPRequestHandler):
    """OpenAI's chat completions, answered with :data:`NOTE` in ``X-Upstream-Note``; the
    ``X-Agent-Note`` of each call kept in :data:`RECEIVED`, as bytes."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        # the headers are parsed as Latin-1: the characters are the bytes received
        RECEIVED.append((self.headers.get("X-Agent-Note") or "").encode("latin-1"))
        COOKIES.append(self.headers.get("Cookie"))
        request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        message = {"role": "assistant", "content": "Fine."}
        if request.get("stream"):
            chunks = [
                {"choices": [{"index": 0, "delta": message, "finish_reason": None}]},
                {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
            ]
            body = b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in chunks)
            body += b"data: [DONE]\n\n"
            kind = "text/event-stream"
        else:
            body = json.dumps(
                {
                    "id": "chatcmpl-1",
                    "object": "chat.completion",
                    "created": 1,
                    "model": request["model"],
                    "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11},
                }
            ).encode()
            kind = "application/json"
        self.send_response(200)
        self.send_header("Content-Type", kind)
        # send_header writes Latin-1: these characters are NOTE's bytes.
        self.send_header("X-Upstream-Note", NOTE.decode("latin-1"))
        # as providers' edges set them (Cloudflare's __cf_bm on api.openai.com): for the caller
        self.send_header("Set-Cookie", "__cf_bm=for-this-caller; Path=/; HttpOnly")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
    upstream.daemon_threads = True
    thread = threading.Thread(target=upstream.serve_forever, daemon=True)
    thread.start()
    env = embedded_env(
        tmp_path_factory.mktemp("headers"),
        # a name, not an address: a client's cookie jar keeps no cookie of an IP address
        CTXWEB_UPSTREAM_OPENAI=f"http://localhost:{upstream.server_address[1]}/v1",
        CTXWEB_RATE_LIMIT="",
    )
    key = create_key(env, role="ingest")
    try:
        with live_server(env) as running:
            yield running.url, key
    finally:
        upstream.shutdown()
        upstream.server_close()


def call(url: str, key: str, session: str, *, stream: bool, note: bytes = b"") -> bytes:
    """One chat completion through the proxy, with ``note`` as ``X-Agent-Note``; the answer
    (200, or the test fails)."""
    body = {"model": "gpt-4o", "stream": stream, "messages": [{"role": "user", "content": "Hi"}]}
    headers = {"Content-Type": "application/json", "X-Ctxweb-Key": key, "X-Ctxweb-Session": session}
    if note:
        headers["X-Agent-Note"] = note.decode("latin-1")  # http.client writes Latin-1
    connection = http.client.HTTPConnection(urlsplit(url).netloc, timeout=30)
    connection.request(
        "POST", "/proxy/openai/v1/chat/completions", body=json.dumps(body), headers=headers
    )
    answer = connection.getresponse()
    content = answer.read()
    connection.close()
    assert answer.status == 200, content[:300]
    assert b"Fine." in content
    SET_COOKIES.append(answer.getheader("Set-Cookie"))
    return (answer.getheader("X-Upstream-Note") or "").encode("latin-1")


def recorded(url: str, key: str, session: str) -> int:
    """The session's turns, once the first is recorded (recording follows the answer)."""
    deadline = time.monotonic() + 30
    while turn_count(url, key, session) < 1 and time.monotonic() < deadline:
        time.sleep(0.1)
    return turn_count(url, key, session)


def turn_count(url: str, key: str, session: str) -> int:
    request = urllib.request.Request(
        f"{url}/api/v1/sessions/{session}", headers={"Authorization": f"Bearer {key}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return int(json.loads(answer.read())["turn_count"])
    except urllib.error.HTTPError:
        return 0


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_it_relays_an_answers_header_in_utf8_byte_for_byte_and_records_the_call(
    server: tuple[str, str], stream: bool
) -> None:
    url, key = server
    session = f"utf8-header-{'sse' if stream else 'json'}"
    # http.client reads header bytes as Latin-1: the same characters are the same bytes.
    assert call(url, key, session, stream=stream) == NOTE
    assert recorded(url, key, session) == 1


@pytest.mark.parametrize(
    "note", ["café".encode("latin-1"), "café ✓".encode()], ids=["latin-1", "utf-8"]
)
def test_it_relays_an_agents_header_that_is_not_ascii_byte_for_byte(
    server: tuple[str, str], note: bytes
) -> None:
    url, key = server
    session = f"agent-header-{len(note)}"
    call(url, key, session, stream=False, note=note)
    assert RECEIVED[-1] == note
    assert recorded(url, key, session) == 1


@pytest.mark.parametrize(
    "target",
    [
        b"/proxy/openai/v1/chat/completions?debug=\x7f",
        b"/proxy/openai/v1/chat/comp\x7fletions",
    ],
    ids=["query", "path"],
)
def test_it_refuses_a_url_no_client_can_send_and_relays_nothing(
    server: tuple[str, str], target: bytes
) -> None:
    url, key = server
    before = len(RECEIVED)
    body = json.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "Hi"}]})
    with socket.create_connection(("127.0.0.1", urlsplit(url).port or 80), timeout=30) as sock:
        sock.sendall(
            b"POST " + target + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\nConnection: close\r\n"
            + f"X-Ctxweb-Key: {key}\r\nContent-Length: {len(body)}\r\n\r\n{body}".encode()
        )
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, content = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 "), answer[:300]
    assert f"content-length: {len(content)}".encode() in head.lower(), head
    # uvicorn's HTTP parser refuses a control character in the request line itself, before
    # ctxweb sees it (the relay keeps its own refusal, in the provider's shape, for any that
    # would reach it)
    assert content == b"Invalid HTTP request received."
    assert len(RECEIVED) == before


@pytest.mark.parametrize(
    "note", [b"", "caf\u00e9".encode("latin-1")], ids=["aiohttp", "httpx (a Latin-1 header)"]
)
def test_an_upstreams_cookie_goes_to_its_caller_and_to_no_other_call(
    server: tuple[str, str], note: bytes
) -> None:
    """The proxy's clients keep no cookies: one caller's cookie from the provider (a session,
    a bot-management token) never rides on another caller's call."""
    url, key = server
    for n in range(3):
        call(url, key, f"cookies-{len(note)}-{n}", stream=bool(n % 2), note=note)
        assert COOKIES[-1] is None
        assert SET_COOKIES[-1] == "__cf_bm=for-this-caller; Path=/; HttpOnly"
