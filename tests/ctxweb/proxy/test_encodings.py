"""Compressed answers through the recording proxy (issue 34, item 3): the upstream is asked only
for encodings both the agent and the recorder read, a zstd answer (what the openai SDK's own
``Accept-Encoding`` invites) is recorded whole with its usage, and an answer in an encoding the
recorder does not read is relayed unchanged and kept as an unread call, never a turn with an
empty answer.

The upstream is a loopback stand-in that compresses as a provider's CDN does: in the first of its
preferred encodings the request accepts (or, to play an upstream that ignores the header, in one
forced whatever was asked); the agent is the real ``openai`` SDK, or raw HTTP where the SDK would
not read the answer."""

from __future__ import annotations

import gzip
import json
import threading
import time
import urllib.error
import urllib.request
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
import zstandard
from openai import OpenAI

from tests.support.servers import create_key, embedded_env, live_server

pytestmark = pytest.mark.embedded_server

PROVIDER_KEY = "sk-provider-secret-0123456789"
QUESTION: Any = [{"role": "user", "content": "Why does the test fail?"}]
ANSWER = "The divisor is zero."
#: A "br" body: what an upstream that ignored Accept-Encoding might send (ctxweb reads no br).
BROTLI_LIKE = b"\x1b\x0f\x00\xf8\x25\x82\x82\x11\x8c\x0a\x32\x00"
ENCODERS: dict[str, Callable[[bytes], bytes]] = {
    "gzip": gzip.compress,
    "deflate": zlib.compress,
    "zstd": lambda data: zstandard.ZstdCompressor().compress(data),
    "br": lambda data: BROTLI_LIKE,
}


@dataclass
class Upstream:
    url: str = ""
    #: The encodings it answers in, in its order of preference, when the request accepts them.
    prefers: tuple[str, ...] = ("zstd", "br", "gzip", "deflate")
    #: Answer in this encoding whatever the request accepts ("" to follow the request).
    forced: str = ""
    #: Each call's Accept-Encoding as it arrived (None: no header).
    accepted: list[str | None] = field(default_factory=list)
    #: Each answer's Content-Encoding ("" for none) and body as sent.
    sent: list[tuple[str, bytes]] = field(default_factory=list)


def _answer(request: dict[str, Any]) -> tuple[str, bytes]:
    prompt = max(1, len(json.dumps(request.get("messages", []))) // 4)
    usage = {"prompt_tokens": prompt, "completion_tokens": 5, "total_tokens": prompt + 5}
    if not request.get("stream"):
        return "application/json", json.dumps(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 1,
                "model": request["model"],
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": ANSWER},
                        "finish_reason": "stop",
                    }
                ],
                "usage": usage,
            }
        ).encode()
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1}
    chunks = [
        {**base, "model": request["model"], "choices": [{"index": 0, "delta": delta}]}
        for delta in ({"role": "assistant", "content": ""}, {"content": ANSWER})
    ]
    chunks[-1]["choices"][0]["finish_reason"] = "stop"
    chunks.append({**base, "model": request["model"], "choices": [], "usage": usage})
    events = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    return "text/event-stream", events.encode()


def _handler(state: Upstream) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
            accepted = self.headers.get("Accept-Encoding")
            state.accepted.append(accepted)
            asked = {c.split(";")[0].strip().lower() for c in (accepted or "").split(",")}
            encoding = state.forced or next((e for e in state.prefers if e in asked), "")
            kind, plain = _answer(request)
            body = ENCODERS[encoding](plain) if encoding else plain
            state.sent.append((encoding, body))
            self.send_response(200)
            self.send_header("Content-Type", kind)
            if encoding:
                self.send_header("Content-Encoding", encoding)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler


@pytest.fixture(scope="module")
def upstream() -> Iterator[Upstream]:
    state = Upstream()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    server.daemon_threads = True
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture(autouse=True)
def honest(upstream: Upstream) -> Iterator[None]:
    upstream.forced = ""
    yield
    upstream.forced = ""


@pytest.fixture(scope="module")
def server(
    upstream: Upstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, str]]:
    env = embedded_env(
        tmp_path_factory.mktemp("encodings"),
        CTXWEB_UPSTREAM_OPENAI=f"{upstream.url}/v1",
        CTXWEB_RATE_LIMIT="",
    )
    key = create_key(env, role="ingest")
    with live_server(env) as running:
        yield running.url, key


def api(url: str, key: str, path: str) -> Any:
    request = urllib.request.Request(
        f"{url}/api/v1/{path}", headers={"Authorization": f"Bearer {key}"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def eventually(check: Callable[[], Any], what: str) -> Any:
    """``check()``'s first true value (recording follows the answer, off the caller's path)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            value = check()
        except urllib.error.HTTPError as error:
            if error.code != 404:
                raise
            value = None
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"{what}: not within 30 s")


DECODERS: dict[str, Callable[[bytes], bytes]] = {
    "": lambda data: data,
    "gzip": gzip.decompress,
    "deflate": zlib.decompress,
    "zstd": lambda data: zstandard.ZstdDecompressor().decompressobj().decompress(data),
}


@dataclass
class Relayed:
    status: int
    encoding: str
    raw: bytes


def ask(url: str, key: str, session: str, accepts: str | None, *, stream: bool = False) -> Relayed:
    """One chat call through the proxy by raw HTTP (``accepts``: its Accept-Encoding, None for
    none), the answer's bytes as relayed."""
    with httpx.Client(timeout=30) as client:
        request = client.build_request(
            "POST",
            f"{url}/proxy/openai/v1/chat/completions",
            headers={
                "Authorization": f"Bearer {PROVIDER_KEY}",
                "X-Ctxweb-Key": key,
                "X-Ctxweb-Session": session,
            },
            json={
                "model": "gpt-4o",
                "messages": QUESTION,
                **({"stream": True, "stream_options": {"include_usage": True}} if stream else {}),
            },
        )
        del request.headers["accept-encoding"]  # httpx's own
        if accepts is not None:
            request.headers["accept-encoding"] = accepts
        response = client.send(request, stream=True)
        try:
            raw = b"".join(response.iter_raw())
        finally:
            response.close()
    return Relayed(response.status_code, response.headers.get("content-encoding", ""), raw)


def unread_calls(url: str, key: str, external_id: str) -> list[dict[str, Any]]:
    return [
        call
        for call in api(url, key, "unread-calls")["results"]
        if call["external_id"] == external_id
    ]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_a_zstd_answer_reaches_the_agent_and_is_recorded_with_its_answer_and_usage(
    server: tuple[str, str], upstream: Upstream, stream: bool
) -> None:
    """An agent whose HTTP client accepts what httpx accepts (``gzip, deflate, zstd``): the
    provider answers zstd, which the recorder read as nothing (no answer, no usage)."""
    url, key = server
    session = f"zstd-{stream}"
    answer = ask(url, key, session, "gzip, deflate, zstd", stream=stream)
    assert (answer.status, answer.encoding) == (200, "zstd")
    assert upstream.accepted[-1] == "gzip, deflate, zstd"
    assert ANSWER in DECODERS["zstd"](answer.raw).decode()
    [turn] = eventually(lambda: api(url, key, f"sessions/{session}/turns"), "the turn")
    assert turn["reported_input_tokens"] == max(1, len(json.dumps(QUESTION)) // 4)
    assert ANSWER in json.dumps(api(url, key, f"sessions/{session}/turns/0"))


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_the_openai_sdk_gets_an_encoding_it_asked_for_and_the_call_is_recorded(
    server: tuple[str, str], upstream: Upstream, stream: bool
) -> None:
    """The SDK asks for ``gzip, deflate``; the relay's own client would have asked for zstd
    too, and the SDK, which reads no zstd, would have got it."""
    url, key = server
    session = f"sdk-{stream}"
    client = OpenAI(
        base_url=f"{url}/proxy/openai/v1",
        api_key=PROVIDER_KEY,
        default_headers={"X-Ctxweb-Key": key, "X-Ctxweb-Session": session},
    )
    if stream:
        chunks = list(
            client.chat.completions.create(
                model="gpt-4o",
                messages=QUESTION,
                stream=True,
                stream_options={"include_usage": True},
            )
        )
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    else:
        whole = client.chat.completions.create(model="gpt-4o", messages=QUESTION)
        text = whole.choices[0].message.content or ""
    assert text == ANSWER
    sdk_accepts = {c.strip() for c in (upstream.accepted[-1] or "").split(",")}
    assert sdk_accepts <= {"gzip", "deflate"}, upstream.accepted[-1]
    assert upstream.sent[-1][0] in sdk_accepts
    [turn] = eventually(lambda: api(url, key, f"sessions/{session}/turns"), "the turn")
    assert turn["reported_input_tokens"] == max(1, len(json.dumps(QUESTION)) // 4)


@pytest.mark.parametrize(
    ("agent_accepts", "asked_upstream", "answered"),
    [
        ("gzip", "gzip", "gzip"),
        ("br, gzip;q=0.5", "gzip", "gzip"),
        ("br", "identity", ""),
        ("zstd;q=0, deflate", "deflate", "deflate"),
        ("*", "gzip, deflate, zstd", "zstd"),
        (None, "identity", ""),
    ],
)
def test_the_upstream_is_asked_only_for_encodings_the_agent_and_the_recorder_both_read(
    server: tuple[str, str],
    upstream: Upstream,
    agent_accepts: str | None,
    asked_upstream: str,
    answered: str,
) -> None:
    url, key = server
    session = f"accepts-{len(upstream.accepted)}"
    answer = ask(url, key, session, agent_accepts)
    assert answer.status == 200
    assert upstream.accepted[-1] == asked_upstream
    assert answer.encoding == answered
    content = json.loads(DECODERS[answer.encoding](answer.raw))
    assert content["choices"][0]["message"]["content"] == ANSWER
    [turn] = eventually(lambda: api(url, key, f"sessions/{session}/turns"), "the turn")
    assert turn["reported_input_tokens"] > 0


def test_an_answer_in_an_encoding_the_recorder_cannot_read_is_relayed_and_kept_unread(
    server: tuple[str, str], upstream: Upstream
) -> None:
    url, key = server
    upstream.forced = "br"
    answer = ask(url, key, "brotli", "br")
    assert (answer.status, answer.encoding) == (200, "br")
    assert answer.raw == BROTLI_LIKE  # as the upstream sent it
    [call] = eventually(lambda: unread_calls(url, key, "brotli"), "the unread call")
    assert call["content_encoding"] == "br"
    assert "'br'" in call["error"], call
    with pytest.raises(urllib.error.HTTPError) as missing:
        api(url, key, "sessions/brotli")
    assert missing.value.code == 404, "no turn was recorded, so no session"


@pytest.mark.parametrize("encoding", ["gzip", "zstd"])
def test_an_answer_cut_short_in_its_encoding_is_kept_unread_not_recorded_short(
    server: tuple[str, str], upstream: Upstream, encoding: str
) -> None:
    """A compressed answer whose end never came (its length honest, its content cut) would
    inflate to part of an answer: it is an unread call, not a turn with half an answer."""
    url, key = server
    whole = ENCODERS[encoding]
    ENCODERS[encoding] = lambda data: whole(data)[:-6]
    try:
        upstream.forced = encoding
        answer = ask(url, key, f"cut-{encoding}", encoding)
    finally:
        ENCODERS[encoding] = whole
    assert (answer.status, answer.encoding) == (200, encoding)
    [call] = eventually(lambda: unread_calls(url, key, f"cut-{encoding}"), "the unread call")
    assert "cut short" in call["error"], call
