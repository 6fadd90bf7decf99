"""Loopback stand-ins for the providers' APIs, for the real ``openai`` and ``anthropic`` SDKs (and
what instruments or proxies them) to call: OpenAI chat completions and Anthropic messages,
streaming (SSE) and not, answering a scripted tool call or text, with usage.

    with openai_stand_in() as api:
        client = OpenAI(base_url=api.url + "/v1", api_key="sk-test")
        ...
        api.requests  # what the SDK sent
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class StandIn:
    url: str
    #: What each call answers, in turn: a string is a text reply; a dict ``{"tool": name,
    #: "arguments": {...}}`` is one tool call. When the script runs out, it answers "done".
    script: list[Any] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    calls: int = 0
    #: Answer every call with this status and an error body (200: answer normally).
    status: int = 200
    #: Seconds each call takes before its first byte (a model thinking).
    delay: float = 0.0
    #: Seconds a stream stays open after its last event (an upstream slow to end it).
    linger: float = 0.0

    def then(self, *replies: Any) -> None:
        """Answer the next calls with ``replies``, whatever was scripted before."""
        del self.script[self.calls :]
        self.script += ["done"] * (self.calls - len(self.script)) + list(replies)

    def next_reply(self) -> Any:
        reply = self.script[self.calls] if self.calls < len(self.script) else "done"
        self.calls += 1
        return reply


def _usage(request: dict[str, Any]) -> dict[str, int]:
    prompt = max(1, len(json.dumps(request.get("messages", []))) // 4)
    return {"prompt_tokens": prompt, "completion_tokens": 7, "total_tokens": prompt + 7}


def _message(reply: Any, n: int) -> tuple[dict[str, Any], str]:
    if isinstance(reply, dict):
        call = {
            "id": f"call_{n}",
            "type": "function",
            "function": {"name": reply["tool"], "arguments": json.dumps(reply["arguments"])},
        }
        return {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"
    return {"role": "assistant", "content": reply}, "stop"


def _chunks(
    request: dict[str, Any], message: dict[str, Any], finish: str
) -> Iterator[dict[str, Any]]:
    base = {
        "id": "chatcmpl-s",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": request["model"],
    }
    yield {**base, "choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}]}
    if message.get("tool_calls"):
        call = message["tool_calls"][0]
        head = {
            "index": 0,
            "id": call["id"],
            "type": "function",
            "function": {"name": call["function"]["name"], "arguments": ""},
        }
        yield {
            **base,
            "choices": [{"index": 0, "delta": {"tool_calls": [head]}, "finish_reason": None}],
        }
        arguments = call["function"]["arguments"]
        for start in range(0, len(arguments), 8):
            piece = {"index": 0, "function": {"arguments": arguments[start : start + 8]}}
            yield {
                **base,
                "choices": [{"index": 0, "delta": {"tool_calls": [piece]}, "finish_reason": None}],
            }
    else:
        text = message["content"]
        for start in range(0, len(text), 5):
            yield {
                **base,
                "choices": [
                    {
                        "index": 0,
                        "delta": {"content": text[start : start + 5]},
                        "finish_reason": None,
                    }
                ],
            }
    yield {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}
    if (request.get("stream_options") or {}).get("include_usage"):
        yield {**base, "choices": [], "usage": _usage(request)}


def _anthropic_content(reply: Any, n: int) -> tuple[list[dict[str, Any]], str]:
    if isinstance(reply, dict):
        use = {
            "type": "tool_use",
            "id": f"toolu_{n}",
            "name": reply["tool"],
            "input": reply["arguments"],
        }
        return [use], "tool_use"
    return [{"type": "text", "text": reply}], "end_turn"


def anthropic_events(
    request: dict[str, Any],
    content: list[dict[str, Any]],
    stop: str,
    *,
    usage: dict[str, Any] | None = None,
    output_tokens: int = 7,
    message_id: str = "msg_s",
    ping: bool = False,
    repeat_usage: bool = False,
) -> Iterator[tuple[str, dict[str, Any]]]:
    """The stream Anthropic sends for ``content`` (text and tool_use blocks), as (event, data):
    the message's start (``usage``, by default a quarter of the messages' JSON), each block's
    start, its deltas in small pieces and its stop, the stop reason with ``output_tokens``, and
    the message's stop (with the start's usage again when ``repeat_usage``, as Anthropic's newer
    streams do). Every stand-in that speaks Messages streams with it."""
    if usage is None:
        usage = {
            "input_tokens": max(1, len(json.dumps(request.get("messages", []))) // 4),
            "output_tokens": 1,
        }
    start = {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": request.get("model", "claude"),
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage,
    }
    yield "message_start", {"type": "message_start", "message": start}
    if ping:
        yield "ping", {"type": "ping"}
    for i, block in enumerate(content):
        if block["type"] == "text":
            first: dict[str, Any] = {"type": "text", "text": ""}
            pieces = [
                ("text_delta", "text", block["text"][s : s + 8])
                for s in range(0, len(block["text"]), 8)
            ]
        else:
            first = {**block, "input": {}}
            raw = json.dumps(block["input"])
            pieces = [
                ("input_json_delta", "partial_json", raw[s : s + 8]) for s in range(0, len(raw), 8)
            ]
        yield (
            "content_block_start",
            {"type": "content_block_start", "index": i, "content_block": first},
        )
        for kind, key, piece in pieces:
            yield (
                "content_block_delta",
                {"type": "content_block_delta", "index": i, "delta": {"type": kind, key: piece}},
            )
        yield "content_block_stop", {"type": "content_block_stop", "index": i}
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": None},
            "usage": {**(usage if repeat_usage else {}), "output_tokens": output_tokens},
        },
    )
    yield "message_stop", {"type": "message_stop"}


#: The paths the stand-in answers model calls on (POST only).
MODEL_CALLS = ("/v1/chat/completions", "/v1/responses", "/v1/messages")


def _unreadable(request: Any) -> str | None:
    """Why the stand-in cannot answer ``request`` (a 400, as the providers refuse it), or None."""
    if not isinstance(request, dict):
        return "the body must be a JSON object"
    if not isinstance(request.get("model"), str):
        return "model: a string is required"
    if request.get("stream_options") is not None and not isinstance(
        request["stream_options"], dict
    ):
        return "stream_options: an object is expected"
    return None


def _handler(state: StandIn) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # As providers' servers do: a stream's small writes go out at once.
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            self._drain()
            state.headers.append({k.lower(): v for k, v in self.headers.items()})
            if self.path.rstrip("/") == "/v1/models":
                self._json(200, {"object": "list", "data": [{"id": "gpt-4o", "object": "model"}]})
            elif self.path.rstrip("/") in MODEL_CALLS:
                self._method_refused()
            else:
                self.send_error(404)

        def _not_allowed(self) -> None:
            """405 naming POST, as an HTTP API answers a method it does not serve (the
            handler's own answer to a method without a ``do_`` is a 501, a server error)."""
            self._drain()
            self._method_refused()

        def _method_refused(self) -> None:
            body = json.dumps(
                {"error": {"type": "invalid_request_error", "message": "method not allowed"}}
            ).encode()
            self.send_response(405)
            self.send_header("Allow", "POST")
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _drain(self) -> None:
            """Read a body the answer does not need: left unread on a kept-alive connection, it
            would be read as the next request."""
            length = self.headers.get("Content-Length", "0").strip()
            if length.isdigit() and int(length):
                self.rfile.read(int(length))

        do_PUT = do_PATCH = do_DELETE = do_OPTIONS = do_TRACE = do_QUERY = _not_allowed

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            try:
                request = json.loads(self.rfile.read(length) or b"{}")
            except (ValueError, RecursionError):
                request = None
            state.requests.append(request)
            state.headers.append({k.lower(): v for k, v in self.headers.items()})
            problem = _unreadable(request)
            if problem is not None:  # as the providers answer it (not a dropped connection)
                self._refuse(problem)
                return
            if state.delay:
                time.sleep(state.delay)
            if state.status != 200:
                self._json(
                    state.status, {"error": {"type": "server_error", "message": "upstream says no"}}
                )
                return
            if self.path.rstrip("/") == "/v1/messages":
                self._anthropic(request)
                return
            if self.path.rstrip("/") == "/v1/responses":
                self._responses(request)
                return
            if self.path.rstrip("/") != "/v1/chat/completions":
                self.send_error(404)
                return
            message, finish = _message(state.next_reply(), state.calls)
            if request.get("stream"):
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for chunk in _chunks(request, message, finish):
                    self._chunk(f"data: {json.dumps(chunk)}\n\n".encode())
                self._chunk(b"data: [DONE]\n\n")
                self._end()
                return
            body = json.dumps(
                {
                    "id": f"chatcmpl-{state.calls}",
                    "object": "chat.completion",
                    "created": 1,
                    "model": request["model"],
                    "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                    "usage": _usage(request),
                }
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _refuse(self, message: str) -> None:
            if self.path.rstrip("/") == "/v1/messages":
                error = {"type": "invalid_request_error", "message": message}
                self._json(400, {"type": "error", "error": error})
                return
            self._json(
                400,
                {
                    "error": {
                        "message": message,
                        "type": "invalid_request_error",
                        "param": None,
                        "code": None,
                    }
                },
            )

        def _json(self, status: int, payload: dict[str, Any]) -> None:
            body = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _anthropic(self, request: dict[str, Any]) -> None:
            content, stop = _anthropic_content(state.next_reply(), state.calls)
            if request.get("stream"):
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for name, event in anthropic_events(request, content, stop):
                    self._chunk(f"event: {name}\ndata: {json.dumps(event)}\n\n".encode())
                self._end()
                return
            usage = {
                "input_tokens": max(1, len(json.dumps(request.get("messages", []))) // 4),
                "output_tokens": 7,
            }
            self._json(
                200,
                {
                    "id": f"msg_{state.calls}",
                    "type": "message",
                    "role": "assistant",
                    "model": request["model"],
                    "content": content,
                    "stop_reason": stop,
                    "stop_sequence": None,
                    "usage": usage,
                },
            )

        def _responses(self, request: dict[str, Any]) -> None:
            reply = state.next_reply()
            text = reply if isinstance(reply, str) else json.dumps(reply)
            items = request.get("input")
            prompt = max(1, len(json.dumps(items)) // 4)
            response = {
                "id": f"resp_{state.calls}",
                "object": "response",
                "created_at": 1,
                "model": request["model"],
                "status": "completed",
                "output": [
                    {
                        "type": "message",
                        "id": f"msg_{state.calls}",
                        "role": "assistant",
                        "status": "completed",
                        "content": [{"type": "output_text", "text": text, "annotations": []}],
                    }
                ],
                "usage": {
                    "input_tokens": prompt,
                    "input_tokens_details": {"cached_tokens": 0},
                    "output_tokens": 7,
                    "output_tokens_details": {"reasoning_tokens": 0},
                    "total_tokens": prompt + 7,
                },
            }
            if not request.get("stream"):
                self._json(200, response)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            started = {**response, "status": "in_progress", "output": []}
            events = [
                {"type": "response.created", "sequence_number": 0, "response": started},
                {
                    "type": "response.output_item.added",
                    "sequence_number": 1,
                    "output_index": 0,
                    "item": {**response["output"][0], "status": "in_progress", "content": []},
                },
                {
                    "type": "response.content_part.added",
                    "sequence_number": 1,
                    "item_id": f"msg_{state.calls}",
                    "output_index": 0,
                    "content_index": 0,
                    "part": {"type": "output_text", "text": "", "annotations": []},
                },
                {
                    "type": "response.output_text.delta",
                    "sequence_number": 1,
                    "item_id": f"msg_{state.calls}",
                    "output_index": 0,
                    "content_index": 0,
                    "delta": text,
                },
                {"type": "response.completed", "sequence_number": 2, "response": response},
            ]
            for event in events:
                self._chunk(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode())
            self._end()

        def _end(self) -> None:
            """A stream's end (its zero-length chunk), ``linger`` seconds after its last event."""
            if state.linger:
                time.sleep(state.linger)
            self._chunk(b"")

        def _chunk(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

    return Handler


class _Server(ThreadingHTTPServer):
    request_queue_size = 128  # many callers at once (the benchmarks' 16), none reset

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that drops a kept-alive connection is no error worth a traceback."""
        import sys

        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@contextmanager
def provider_stand_in(script: list[Any] | None = None) -> Iterator[StandIn]:
    """An OpenAI chat completions and Anthropic messages server on a free loopback port."""
    state = StandIn("", list(script or []))
    server = _Server(("127.0.0.1", 0), _handler(state))
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


openai_stand_in = provider_stand_in
