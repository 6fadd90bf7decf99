"""The bounds issue 33 put on the server and the proxy, each tested at its bound on a live server
(``python -m ctxweb.server``, uvicorn) that relays to a loopback stand-in for OpenAI's API.

- No request can move a proxied call: a ``Daphne-Root-Path`` header (which daphne obeyed) changes
  nothing, and ``/x/proxy/...`` is a 404 that never reaches the provider.
- An answer over ``CTXWEB_PROXY_MAX_ANSWER_BYTES`` is a 502 in OpenAI's shape when its length is
  declared, and ends with an error event when it is streamed; one that takes over
  ``CTXWEB_PROXY_MAX_ANSWER_SECONDS`` ends the same way, or is a 502 when not even its headers came.
- A key has at most ``CTXWEB_PROXY_KEY_CONCURRENCY`` calls in flight: the next is a 429 with
  ``retry-after``, another key's call goes through, and the key calls again once one ends.
- A client that reads nothing of a huge answer (a proxied one, or a session's export) costs the
  server a bounded amount of memory, and is dropped after ``CTXWEB_SEND_TIMEOUT`` seconds without
  progress while the server keeps answering others.
- Big request bodies do not pile up: calls of 20 MB one after another leave the server no bigger
  than a few of them at once (each call's request used to wait in a reference cycle for a rare
  full garbage collection), and a gzip bomb of empty OTLP spans is refused having cost about
  its inflated size once (it was three times that).

Memory is read from the server's ``/proc/<pid>/status``: the peak (``VmHWM``) after the client
was dropped, against the peak before it called. Nothing here measures time: the waits are
generous bounds on what takes a second or two.
"""

from __future__ import annotations

import gzip
import http.client
import json
import re
import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from openai import OpenAI
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from tests.support.servers import (
    LiveServer,
    create_key,
    embedded_env,
    live_server,
    session_turns,
)

pytestmark = pytest.mark.embedded_server

PROVIDER_KEY = "sk-provider-secret-0123456789"
#: The bound on an answer's bytes of the ``bounded`` server.
ANSWER_BYTES = 100_000
#: The answer the upstream floods a client with (it never writes it all unless nothing stops it).
FLOOD_BYTES = 300 * 1024 * 1024
#: The events of about 1 kB an ``overflowing`` stream starts with, before its big one.
SMALL_EVENTS = 20
#: The pieces the ``overflowing`` stream writes its big event in, each on its own.
PIECE = 16 * 1024
#: How much more memory the server may reach while a client reads nothing of a huge answer.
MEMORY_BOUND = 150 * 1024 * 1024
#: A generous bound on what takes a second or two (a failure, not a measure).
WAIT = 60


class Upstream:
    """What the stand-in saw and what the tests let it do (one per module)."""

    def __init__(self) -> None:
        self.lock = threading.Condition()
        self.models: list[str] = []
        self.held = 0
        #: Set to let ``held`` calls answer.
        self.hold = threading.Event()
        #: Set to let ``late`` calls answer (a test of its own: ``hold`` stays set once set).
        self.late = threading.Event()
        #: Set at the end: every hanging call gives up.
        self.release = threading.Event()
        #: The bytes each flood wrote before it ended (the relay let go, or it was all written).
        self.flooded: list[int] = []
        self.flood_ended = threading.Event()

    def seen(self, model: str) -> int:
        with self.lock:
            return self.models.count(model)


UPSTREAM = Upstream()


def completion(model: str, content: str) -> bytes:
    return json.dumps(
        {
            "id": "chatcmpl-limits",
            "object": "chat.completion",
            "created": 1,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11},
        }
    ).encode()


def event(model: str, content: str) -> bytes:
    chunk = {
        "id": "chatcmpl-limits",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": model,
        "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": None}],
    }
    return f"data: {json.dumps(chunk)}\n\n".encode()


class StandIn(BaseHTTPRequestHandler):
    """OpenAI's chat completions; the ``model`` says how the answer misbehaves:

    - ``fine``: a small JSON answer; ``held``: the same once :attr:`Upstream.hold` is set;
      ``late``: the same once :attr:`Upstream.late` is set;
    - ``oversized``: a JSON answer of 200 kB, its length declared;
    - ``overflowing``: a stream of :data:`SMALL_EVENTS` events of about 1 kB, then one of 150 kB;
    - ``stalling``: a stream's headers and first event, then nothing;
    - ``breaking``: a stream's headers (a length declared) and first event, then the connection
      closed short of that length;
    - ``silent``: not even the headers.

    ``GET /v1/flood``: :data:`FLOOD_BYTES` declared and written as fast as they are taken.
    """

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        model = str(request.get("model", "fine"))
        with UPSTREAM.lock:
            UPSTREAM.models.append(model)
            if model == "held":
                UPSTREAM.held += 1
                UPSTREAM.lock.notify_all()
        try:
            if model == "silent":
                UPSTREAM.release.wait(WAIT)
            elif model in ("overflowing", "stalling"):
                self._stream(model)
            elif model == "breaking":
                self._break()
            else:
                if model == "held":
                    UPSTREAM.hold.wait(WAIT)
                if model == "late":
                    UPSTREAM.late.wait(WAIT)
                content = "x" * 200_000 if model == "oversized" else "Fine."
                self._json(completion(model, content))
        except (BrokenPipeError, ConnectionResetError):
            pass  # the relay let go
        finally:
            self.close_connection = True

    def _json(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _break(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", "100000")
        self.end_headers()
        self.wfile.write(event("breaking", "Thinking"))
        self.wfile.flush()
        self.connection.shutdown(socket.SHUT_RDWR)  # 100000 bytes said, a hundred sent

    def _stream(self, model: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")  # the body ends with the connection
        self.end_headers()
        if model == "stalling":
            self.wfile.write(event(model, "Thinking"))
            self.wfile.flush()
            UPSTREAM.release.wait(WAIT)
            return
        for n in range(SMALL_EVENTS):
            self.wfile.write(event(model, f"{n:04d}" + "y" * 1000))
        self.wfile.flush()
        # The big event in pieces with pauses between, so that the relay reads pieces of it with
        # no end of an event in them before the bound falls (when the relay let three bytes of
        # such a piece through, the error event after them was unreadable, and the answer looked
        # whole: only a loaded machine used to split the reads that way).
        big = event(model, "g" * 150_000)  # the bound falls within it
        for start in range(0, len(big), PIECE):
            self.wfile.write(big[start : start + PIECE])
            self.wfile.flush()
            time.sleep(0.05)
        self.wfile.write(b"data: [DONE]\n\n")

    def do_GET(self) -> None:
        written = 0
        block = b"z" * 65536
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(FLOOD_BYTES))
            self.end_headers()
            while written < FLOOD_BYTES:
                self.wfile.write(block)
                written += len(block)
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            self.close_connection = True
            UPSTREAM.flooded.append(written)
            UPSTREAM.flood_ended.set()


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, str], str]]:
    """A data folder with keys of two projects (``p`` and ``q``), copied for each server, and
    the environment that points the servers at the stand-in."""
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), StandIn)
    upstream.daemon_threads = True
    thread = threading.Thread(target=upstream.serve_forever, daemon=True)
    thread.start()
    data = tmp_path_factory.mktemp("limits")
    env = embedded_env(
        data,
        CTXWEB_UPSTREAM_OPENAI=f"http://127.0.0.1:{upstream.server_address[1]}/v1",
        CTXWEB_RATE_LIMIT="",
    )
    key = create_key(env, project="p", role="operator")
    other = create_key(env, project="q", role="operator")
    env["LIMITS_OTHER_KEY"] = other  # carried to each test with the environment
    try:
        yield env, key
    finally:
        UPSTREAM.release.set()
        UPSTREAM.hold.set()
        UPSTREAM.late.set()
        upstream.shutdown()
        upstream.server_close()


Started = tuple[LiveServer, str]


def start(
    template: tuple[dict[str, str], str], tmp: pytest.TempPathFactory, **extra: str
) -> Iterator[Started]:
    env, key = template
    data = tmp.mktemp("server")
    shutil.copytree(env["CTXWEB_DATA_DIR"], data, dirs_exist_ok=True)
    with live_server({**env, "CTXWEB_DATA_DIR": str(data), **extra}) as running:
        yield running, key


@pytest.fixture(scope="module")
def bounded(
    template: tuple[dict[str, str], str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Started]:
    yield from start(
        template,
        tmp_path_factory,
        CTXWEB_PROXY_MAX_ANSWER_BYTES=str(ANSWER_BYTES),
        CTXWEB_PROXY_MAX_ANSWER_SECONDS="2",
    )


@pytest.fixture(scope="module")
def crowded(
    template: tuple[dict[str, str], str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Started]:
    yield from start(template, tmp_path_factory, CTXWEB_PROXY_KEY_CONCURRENCY="2")


@pytest.fixture
def impatient(
    template: tuple[dict[str, str], str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Started]:
    """A server of its own for each test (each reads the peak of its server's memory)."""
    yield from start(
        template,
        tmp_path_factory,
        CTXWEB_SEND_TIMEOUT="2",
        CTXWEB_PROXY_MAX_ANSWER_BYTES=str(2 * FLOOD_BYTES),
    )


def openai_client(server: LiveServer, key: str, session: str) -> OpenAI:
    return OpenAI(
        base_url=f"{server.url}/proxy/openai/v1",
        api_key=PROVIDER_KEY,
        default_headers={"X-Ctxweb-Key": key, "X-Ctxweb-Session": session},
        max_retries=0,
        timeout=WAIT,
    )


def ask(client: OpenAI, model: str) -> ChatCompletion:
    return client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": f"Answer as {model}."}]
    )


def read_events(stream: Iterable[ChatCompletionChunk], received: list[str]) -> None:
    """Each event's text into ``received`` as it comes (an error raises, as the SDK does)."""
    for chunk in stream:
        received.append(chunk.choices[0].delta.content or "")


def eventually(check: Callable[[], Any], what: str, server: LiveServer) -> Any:
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"{what}: not within {WAIT} s; the server's last lines:\n{server.output}")


def recorded_turn(server: LiveServer, key: str, session: str) -> dict[str, Any]:
    """The session's first turn, as the API shows it, once it is recorded."""
    eventually(lambda: session_turns(server.url, key, session) >= 1, f"{session} recorded", server)
    answer = httpx.get(
        f"{server.url}/api/v1/sessions/{session}/turns/0",
        headers={"Authorization": f"Bearer {key}"},
    )
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def cut_turn(server: LiveServer, key: str, session: str) -> tuple[str, dict[str, Any]]:
    """The session's first turn once recorded, a call whose answer was cut: its one
    ``interrupted`` event's message, and the turn (its request, the user's "Think.", whole)."""
    turn = recorded_turn(server, key, session)
    [cut] = [e for e in turn["events"] if e["type"] == "interrupted"]
    assert [m["role"] for m in turn["messages"]] == ["user"]
    assert "Think." in json.dumps(turn["messages"][0]["message"])
    return str(cut["message"]), turn


def memory_peak(server: LiveServer) -> int:
    """The most memory the server's process has held so far (its ``VmHWM``), in bytes."""
    status = Path(f"/proc/{server.process.pid}/status").read_text()
    line = next(line for line in status.splitlines() if line.startswith("VmHWM:"))
    return int(line.split()[1]) * 1024


def unread_connection(server: LiveServer, request: bytes) -> socket.socket:
    """A connection that sent ``request`` and has a small receive buffer it will not empty."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", server.port or 0))
    sock.sendall(request)
    return sock


def read_to_the_end(sock: socket.socket) -> int:
    """Bytes read until the server closes the connection (a timeout fails the test)."""
    sock.settimeout(WAIT)
    received = 0
    try:
        while chunk := sock.recv(1024 * 1024):
            received += len(chunk)
    except ConnectionResetError:
        pass
    finally:
        sock.close()
    return received


# --- the root path ---------------------------------------------------------------------------


def test_a_daphne_root_path_header_moves_no_call_off_the_relay(bounded: Started) -> None:
    server, key = bounded
    before = UPSTREAM.seen("fine")
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=WAIT)
    connection.request(
        "POST",
        "/x/proxy/openai/v1/chat/completions",
        body=json.dumps({"model": "fine", "messages": [{"role": "user", "content": "Hi"}]}),
        headers={
            "Content-Type": "application/json",
            "Daphne-Root-Path": "/x",
            "X-Ctxweb-Key": key,
            "Authorization": f"Bearer {PROVIDER_KEY}",
        },
    )
    answer = connection.getresponse()
    answer.read()
    connection.close()
    assert answer.status == 404
    assert UPSTREAM.seen("fine") == before, "the call reached the provider"
    assert httpx.get(f"{server.url}/api/v1/health").status_code == 200


# --- an answer's bytes and seconds -----------------------------------------------------------


def test_an_answer_declared_over_the_bound_is_a_502_and_is_not_recorded(bounded: Started) -> None:
    server, key = bounded
    client = openai_client(server, key, "oversized")
    with pytest.raises(openai.InternalServerError) as refused:
        ask(client, "oversized")
    assert refused.value.status_code == 502
    error = refused.value.response.json()["error"]
    assert error["type"] == "api_error"
    assert "CTXWEB_PROXY_MAX_ANSWER_BYTES" in error["message"]
    assert str(ANSWER_BYTES) in error["message"]
    # A session's calls are recorded in the order they were relayed: once the next call is,
    # the refused one would have been too.
    assert ask(client, "fine").choices[0].message.content == "Fine."
    eventually(
        lambda: session_turns(server.url, key, "oversized") >= 1, "the next call recorded", server
    )
    assert session_turns(server.url, key, "oversized") == 1


def test_a_stream_over_the_bound_ends_with_an_error_event_after_what_came_before(
    bounded: Started,
) -> None:
    server, key = bounded
    client = openai_client(server, key, "overflowing")
    stream = client.chat.completions.create(
        model="overflowing",
        messages=[{"role": "user", "content": "Write a lot."}],
        stream=True,
    )
    received: list[str] = []
    with pytest.raises(openai.APIError) as stopped:
        read_events(stream, received)
    assert "CTXWEB_PROXY_MAX_ANSWER_BYTES" in stopped.value.message
    assert "cut" in stopped.value.message
    # the events before the bound came whole, in order, and none of the event it fell in
    assert received == [f"{n:04d}" + "y" * 1000 for n in range(SMALL_EVENTS)]


def test_a_stream_that_stalls_past_the_bound_ends_with_an_error_event(bounded: Started) -> None:
    server, key = bounded
    client = openai_client(server, key, "stalling")
    stream = client.chat.completions.create(
        model="stalling", messages=[{"role": "user", "content": "Think."}], stream=True
    )
    received: list[str] = []
    with pytest.raises(openai.APIError) as stopped:
        read_events(stream, received)
    assert received == ["Thinking"]
    assert "CTXWEB_PROXY_MAX_ANSWER_SECONDS" in stopped.value.message
    assert "(2s)" in stopped.value.message
    # Recorded all the same: the request whole, what came of the answer, and why it ended.
    message, turn = cut_turn(server, key, "stalling")
    assert "ctxweb stopped it: the provider's answer took over" in message
    assert "CTXWEB_PROXY_MAX_ANSWER_SECONDS (2s)" in message
    assert turn["response"] == [{"role": "assistant", "content": "Thinking"}]


def test_a_call_whose_caller_leaves_mid_stream_is_recorded_as_interrupted(
    crowded: Started,
) -> None:
    # An agent's user pressing Esc: the SDK closes the stream after its first event. (Not on the
    # bounded server: past its 2 s, ctxweb would stop the answer, a reason of its own.)
    server, key = crowded
    client = openai_client(server, key, "interrupted")
    stream = client.chat.completions.create(
        model="stalling", messages=[{"role": "user", "content": "Think."}], stream=True
    )
    first = next(iter(stream))
    assert first.choices[0].delta.content == "Thinking"
    stream.close()
    message, turn = cut_turn(server, key, "interrupted")
    assert "its caller left before the answer's end" in message
    assert turn["response"] == [{"role": "assistant", "content": "Thinking"}]


def test_a_stream_the_providers_connection_breaks_is_recorded_as_interrupted(
    crowded: Started,
) -> None:
    server, key = crowded
    client = openai_client(server, key, "broken")
    stream = client.chat.completions.create(
        model="breaking", messages=[{"role": "user", "content": "Think."}], stream=True
    )
    received: list[str] = []
    with pytest.raises((openai.APIError, httpx.HTTPError)):
        read_events(stream, received)  # the caller's answer ends short as well, never whole
    assert received == ["Thinking"]
    message, turn = cut_turn(server, key, "broken")
    assert "relaying it failed (" in message
    assert turn["response"] == [{"role": "assistant", "content": "Thinking"}]


def test_a_call_whose_caller_gave_up_before_the_providers_answer_is_recorded(
    crowded: Started,
) -> None:
    # A client's timeout shorter than the model's answer (or a user's Esc) on a call answered
    # whole, not streamed: the caller is gone before the provider's headers.
    server, key = crowded
    impatient = openai_client(server, key, "gave-up").with_options(timeout=1.0)
    with pytest.raises(openai.APITimeoutError):
        impatient.chat.completions.create(
            model="late", messages=[{"role": "user", "content": "Think."}]
        )
    assert UPSTREAM.seen("late") == 1
    UPSTREAM.late.set()  # the provider answers, to no one
    # Recorded, the request whole. The answer: whole, when the relay read it before it saw that
    # its caller had left (of its declared length: what the caller took of it, the server
    # cannot tell); else none, the turn saying the caller left, after none of the answer's bytes
    # or after the ones written for the recorder while the relay saw it (it went each way in CI).
    turn = recorded_turn(server, key, "gave-up")
    cut = [e["message"] for e in turn["events"] if e["type"] == "interrupted"]
    if turn["response"] is None:
        assert len(cut) == 1, turn["events"]
        assert re.search(r"after \d+ bytes: its caller left before the answer's end", cut[0])
    else:
        assert turn["response"] == [{"role": "assistant", "content": "Fine."}]
        assert cut == []
    assert [m["role"] for m in turn["messages"]] == ["user"]
    assert "Think." in json.dumps(turn["messages"][0]["message"])


def test_an_upstream_that_sends_no_headers_is_a_502(bounded: Started) -> None:
    server, key = bounded
    client = openai_client(server, key, "silent")
    with pytest.raises(openai.InternalServerError) as refused:
        ask(client, "silent")
    assert refused.value.status_code == 502
    error = refused.value.response.json()["error"]
    assert error["type"] == "api_error"
    assert "CTXWEB_PROXY_MAX_ANSWER_SECONDS" in error["message"]


# --- a key's calls in flight -----------------------------------------------------------------


def test_a_key_has_at_most_its_calls_in_flight_and_others_keys_are_served(
    crowded: Started, template: tuple[dict[str, str], str]
) -> None:
    server, key = crowded
    other = template[0]["LIMITS_OTHER_KEY"]
    client = openai_client(server, key, "crowded")
    answers: list[str | None] = []

    def held() -> None:
        answers.append(ask(client, "held").choices[0].message.content)

    callers = [threading.Thread(target=held) for _ in range(2)]
    try:
        for caller in callers:
            caller.start()
        with UPSTREAM.lock:
            assert UPSTREAM.lock.wait_for(lambda: UPSTREAM.held >= 2, WAIT), server.output
        with pytest.raises(openai.RateLimitError) as refused:
            ask(client, "fine")
        assert refused.value.status_code == 429
        assert refused.value.response.headers["retry-after"] == "1"
        error = refused.value.response.json()["error"]
        assert error["code"] == "rate_limit_exceeded"
        assert "CTXWEB_PROXY_KEY_CONCURRENCY" in error["message"]
        assert "2 calls" in error["message"]
        # another key is not held back
        assert ask(openai_client(server, other, "other"), "fine").choices[0].message.content
    finally:
        UPSTREAM.hold.set()
        for caller in callers:
            caller.join(WAIT)
    assert answers == ["Fine.", "Fine."]

    def served() -> bool:
        try:
            return ask(client, "fine").choices[0].message.content == "Fine."
        except openai.RateLimitError:
            return False  # the calls that ended are released as their answers end

    eventually(served, "the key called again after its calls ended", server)


# --- clients that read nothing ---------------------------------------------------------------


def test_a_client_that_reads_nothing_of_a_huge_answer_costs_bounded_memory_and_is_dropped(
    impatient: Started,
) -> None:
    server, key = impatient
    peak = memory_peak(server)
    sock = unread_connection(
        server,
        b"GET /proxy/openai/v1/flood HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        + f"X-Ctxweb-Key: {key}\r\n\r\n".encode(),
    )
    try:
        # the relay lets go of the upstream once the client is dropped
        assert UPSTREAM.flood_ended.wait(WAIT), server.output
        grown = memory_peak(server) - peak
        assert grown < MEMORY_BOUND, f"the server's memory grew by {grown / 2**20:.0f} MiB"
        assert UPSTREAM.flooded[-1] < FLOOD_BYTES, "the whole answer was taken from the upstream"
        eventually(lambda: "took nothing for 2s: dropped" in server.log, "dropped", server)
    finally:
        received = read_to_the_end(sock)
    assert received < FLOOD_BYTES // 10, "the connection stayed open for the whole answer"


#: The exported session: each call's context is every message before it, so the export (each
#: turn's whole context) holds TURNS² / 2 of these messages: some 280 MB.
TURNS, MESSAGE_BYTES = 120, 40_000


@pytest.fixture(scope="module")
def exportable(template: tuple[dict[str, str], str]) -> str:
    """The template's data holds a session whose export is some 280 MB (imported from a 5 MB
    file by a server of its own: the memory the import took is not the exporting server's)."""
    env, key = template
    with live_server(env) as server:
        return big_session(server, key)


def big_session(server: LiveServer, key: str) -> str:
    """Import a conversation whose export is some 280 MB (the file is 5 MB); its session id."""
    messages: list[dict[str, str]] = [{"role": "system", "content": "You are a coding agent."}]
    for n in range(TURNS):
        messages.append({"role": "user", "content": f"Output {n}:\n" + "w" * MESSAGE_BYTES})
        messages.append({"role": "assistant", "content": f"Read {n}."})
    document = json.dumps({"id": "huge", "model": "gpt-4o", "messages": messages})
    started = httpx.post(
        f"{server.url}/api/v1/import",
        headers={"Authorization": f"Bearer {key}"},
        files={"file": ("huge.json", document.encode(), "application/json")},
        data={"format": "openai-chat"},
        timeout=WAIT,
    )
    assert started.status_code in (201, 202), started.text[:500]

    def done() -> bool:
        return session_turns(server.url, key, "huge") >= TURNS

    eventually(done, "the import", server)
    return "huge"


def test_a_client_that_reads_nothing_of_a_huge_export_costs_bounded_memory_and_is_dropped(
    exportable: str, impatient: Started
) -> None:
    server, key = impatient
    session = exportable
    peak = memory_peak(server)
    sock = unread_connection(
        server,
        f"GET /api/v1/sessions/{session}/export?format=jsonl HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: Bearer {key}\r\n\r\n".encode(),
    )
    try:
        sock.settimeout(WAIT)
        assert sock.recv(12) == b"HTTP/1.1 200", server.output
        # the server answers others while the export waits for its client, until it drops it
        health = 0
        deadline = time.monotonic() + WAIT
        while "a streamed answer was abandoned" not in server.log:
            assert httpx.get(f"{server.url}/api/v1/health", timeout=WAIT).status_code == 200
            health += 1
            assert time.monotonic() < deadline, f"the export was never dropped:\n{server.output}"
        assert health > 0
        grown = memory_peak(server) - peak
        assert grown < MEMORY_BOUND, f"the server's memory grew by {grown / 2**20:.0f} MiB"
    finally:
        received = read_to_the_end(sock)
    assert received < TURNS * TURNS // 2 * MESSAGE_BYTES // 10


@pytest.fixture
def paging(
    template: tuple[dict[str, str], str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Started]:
    """A server that reads and sends a session's whole turn list 7 turns at a time."""
    yield from start(template, tmp_path_factory, CTXWEB_TURN_LIST_PAGE="7")


def test_a_sessions_whole_turn_list_is_streamed_a_page_at_a_time(
    exportable: str, paging: Started
) -> None:
    """``GET .../turns`` without ``limit``, read by httpx from a live server that reads and
    sends 7 turns at a time: a chunked answer (no length known before the first byte), one JSON
    array of every turn in order, the same turns the paged form gives."""
    server, key = paging
    headers = {"Authorization": f"Bearer {key}"}
    url = f"{server.url}/api/v1/sessions/{exportable}/turns"
    with (
        httpx.Client(timeout=WAIT, headers=headers) as client,
        client.stream("GET", url) as answer,
    ):
        assert answer.status_code == 200, answer.read()[:500]
        assert answer.headers["content-type"] == "application/json"
        assert "content-length" not in answer.headers
        assert answer.headers["transfer-encoding"] == "chunked"
        whole = json.loads(answer.read())
        assert [t["index"] for t in whole] == list(range(TURNS))
        paged: list[dict[str, Any]] = []
        page_url: str | None = f"{url}?limit=50"
        while page_url:
            page = client.get(page_url)
            paged += page.json()
            page_url = page.links.get("next", {}).get("url")
        assert whole == paged
        assert client.get(f"{url}?after={TURNS - 10}").json() == paged[-9:]


#: The request body of the big calls, and how many are sent one after another.
BIG_BODY, BIG_CALLS = 20 * 1024 * 1024, 8


def test_big_calls_one_after_another_leave_the_server_no_bigger_than_a_few_of_them(
    impatient: Started,
) -> None:
    server, key = impatient
    content = "w" * BIG_BODY
    peak = memory_peak(server)
    with httpx.Client(timeout=WAIT) as client:
        for n in range(BIG_CALLS):
            body = json.dumps({"model": "fine", "input": f"{n} {content}"}).encode()
            answer = client.post(
                f"{server.url}/proxy/openai/v1/embeddings",  # relayed, not recorded
                content=body,
                headers={"X-Ctxweb-Key": key, "Authorization": f"Bearer {PROVIDER_KEY}"},
            )
            assert answer.status_code == 200, answer.text[:500]
    grown = memory_peak(server) - peak
    # one call holds its body twice at most (as received, then joined): the calls before it must
    # be gone, not waiting for the garbage collector (eight of them were about 200 MB)
    assert grown < 4 * BIG_BODY, f"the server's memory grew by {grown / 2**20:.0f} MiB"


def test_a_gzip_bomb_of_empty_spans_costs_its_inflated_size_once(impatient: Started) -> None:
    server, key = impatient
    spans = 10 * 1024 * 1024  # 30 MB once inflated, under CTXWEB_MAX_REQUEST_BYTES
    document = b'{"resourceSpans": [{"scopeSpans": [{"spans": [' + b"{}," * spans + b"{}]}]}]}"
    inflated = len(document)
    bomb = gzip.compress(document, compresslevel=9)
    del document
    peak = memory_peak(server)
    answer = httpx.post(
        f"{server.url}/v1/traces",
        content=bomb,
        headers={
            "Authorization": f"Bearer {key}",
            "Content-Type": "application/json",
            "Content-Encoding": "gzip",
        },
        timeout=WAIT,
    )
    assert answer.status_code == 413, answer.text[:500]
    assert "JSON objects and arrays" in answer.json()["message"]
    grown = memory_peak(server) - peak
    # inflated once into one buffer and counted where it is (it was inflated, joined, copied and
    # copied again without its strings: some three times its size)
    assert grown < 2 * inflated, f"the server's memory grew by {grown / 2**20:.0f} MiB"
