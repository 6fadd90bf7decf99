"""Loopback stand-ins for the APIs the real coding agents call (Claude Code: Anthropic Messages;
Codex: OpenAI Responses), scripted so that each prompt gets a few tool rounds and then a final
text, and the agents themselves (the pinned npm releases in ``agents/``), run headless.

The stand-ins answer as the providers do: streaming SSE event for event (Anthropic's
``message_start`` ... ``message_stop``; the Responses API's ``response.created`` ...
``response.completed``, output items carrying ``id`` and ``status``), or one JSON body. Which tool
a round calls is taken from the tools the agent advertised in that very request. Side calls (a
title, a quota check, ``count_tokens``, ``GET /models``) get short sensible answers so that no
agent waits. Everything received is kept (:attr:`AgentStandIn.received`) for assertions.

    with anthropic_agent_stand_in(workdir) as api:
        run_claude(...)
        api.main_calls()  # the conversation's model calls, as sent
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.support.providers import anthropic_events

ROOT = Path(__file__).resolve().parents[2]
AGENTS = ROOT / "agents"
CLAUDE = AGENTS / "node_modules" / ".bin" / "claude"
CODEX = AGENTS / "node_modules" / ".bin" / "codex"
#: What the scripted conversation ends with: the agents print it.
FINAL_TEXT = "All done: the notes are read and the task is finished (ctxweb-stand-in)."
#: The provider key the agents are given; it must reach the stand-in and be stored nowhere.
PROVIDER_KEY = "sk-test-provider-key-0123456789abcdef"
#: The file the scripted tool rounds read, in the agent's working directory.
NOTES = "notes.txt"
NOTES_TEXT = "The answer to the scripted question is 42.\n" + "".join(
    f"line {n}: building src/module_{n % 7}.py ... ok, 12 tests passed in 0.{n % 10}s\n"
    for n in range(300)
)  # about 5K tokens: enough for a compaction to save something


@dataclass
class Received:
    """One request as the stand-in received it."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    #: "main" (a call of the conversation, with tools) or "side" (title, quota, counting...).
    kind: str = "side"


@dataclass
class AgentStandIn:
    url: str
    workdir: Path
    #: Tool rounds before the final text, for each prompt the user gives.
    rounds: int = 2
    final_text: str = FINAL_TEXT
    received: list[Received] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: A streamed main call whose prompt holds :data:`STALL` gets its first text event, then
    #: nothing until ``unstall`` is set (its connection then closes short): ``stalled`` says it
    #: came. An agent's user pressing Esc mid-answer.
    stalled: threading.Event = field(default_factory=threading.Event)
    unstall: threading.Event = field(default_factory=threading.Event)

    def main_calls(self) -> list[Received]:
        return [r for r in self.received if r.kind == "main"]

    def side_calls(self) -> list[Received]:
        return [r for r in self.received if r.kind == "side"]


#: In a user's prompt: the answer stalls after its first text (:attr:`AgentStandIn.stalled`).
STALL = "Take your time"


def _stalls(request: dict[str, Any]) -> bool:
    return bool(request.get("stream")) and STALL in json.dumps(request.get("messages") or [])


# --- Anthropic Messages -------------------------------------------------------------------------


def _anthropic_tool_rounds(messages: list[dict[str, Any]]) -> int:
    """Tool results given since the user's last prompt (a user message with no tool result)."""
    rounds = 0
    for message in reversed(messages):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        blocks = content if isinstance(content, list) else []
        if any(isinstance(b, dict) and b.get("type") == "tool_result" for b in blocks):
            rounds += 1
        else:
            break
    return rounds


def _anthropic_tool(state: AgentStandIn, request: dict[str, Any], n: int) -> dict[str, Any]:
    """The tool call of round ``n``: one of the tools the request advertised."""
    names = {tool.get("name") for tool in request.get("tools") or []}
    notes = str(state.workdir / NOTES)
    wanted = [
        ("Read", {"file_path": notes}),
        ("Bash", {"command": f"cat {NOTES}", "description": "Show the notes"}),
        ("Glob", {"pattern": "*.txt"}),
        ("Grep", {"pattern": "answer", "path": str(state.workdir)}),
    ]
    offered = [(name, arguments) for name, arguments in wanted if name in names]
    if not offered:
        first = next(iter(request.get("tools") or []), {})
        offered = [(first.get("name", "Read"), {})]
    name, arguments = offered[n % len(offered)]
    return {
        "type": "tool_use",
        "id": f"toolu_stand_in_{len(state.received)}",
        "name": name,
        "input": arguments,
    }


def _anthropic_side_text(request: dict[str, Any]) -> str:
    system = json.dumps(request.get("system") or "") + json.dumps(request.get("messages") or [])
    if "isNewTopic" in system:
        return json.dumps({"isNewTopic": True, "title": "Reading the notes"})
    if "title" in system.lower():
        return json.dumps({"title": "Reading the notes"})
    return "OK"


def _anthropic_usage(request: dict[str, Any]) -> dict[str, Any]:
    size = len(json.dumps(request.get("messages") or [])) + len(
        json.dumps(request.get("system") or "")
    )
    return {
        "input_tokens": max(1, size // 4),
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": 1,
        "service_tier": "standard",
    }


def _anthropic_events(
    request: dict[str, Any], content: list[dict[str, Any]], stop: str, n: int
) -> Iterator[tuple[str, dict[str, Any]]]:
    return anthropic_events(
        request,
        content,
        stop,
        usage=_anthropic_usage(request),
        output_tokens=12,
        message_id=f"msg_stand_in_{n}",
        ping=True,
        repeat_usage=True,
    )


# --- OpenAI Responses ---------------------------------------------------------------------------


def _responses_tools(request: dict[str, Any]) -> list[dict[str, Any]]:
    """Every tool the request advertised: in ``tools`` and in ``additional_tools`` input items
    (namespaces flattened)."""
    found: list[dict[str, Any]] = []

    def add(tools: Any) -> None:
        for tool in tools or []:
            if not isinstance(tool, dict):
                continue
            if tool.get("type") == "namespace":
                add(tool.get("tools"))
            else:
                found.append(tool)

    add(request.get("tools"))
    for item in request.get("input") or []:
        if isinstance(item, dict) and item.get("type") == "additional_tools":
            add(item.get("tools"))
    return found


def _responses_tool_rounds(items: list[Any]) -> int:
    rounds = 0
    for item in reversed(items):
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "message")
        if kind in ("function_call_output", "custom_tool_call_output"):
            rounds += 1
        elif kind == "message" and item.get("role") == "user":
            break
    return rounds


def _responses_tool(state: AgentStandIn, request: dict[str, Any], n: int) -> dict[str, Any]:
    """Round ``n``'s call, to a tool the request advertised: Codex's custom (freeform) ``exec``
    (JavaScript that calls its nested tools) when offered, else a classic shell function."""
    tools = _responses_tools(request)
    functions = {t.get("name") for t in tools if t.get("type") == "function"}
    customs = {t.get("name") for t in tools if t.get("type") == "custom"}
    call_id = f"call_stand_in_{len(state.received)}"
    command = f"cat {NOTES}" if n % 2 == 0 else f"head -n 200 {NOTES}"
    if "exec" in customs:
        script = (
            f"const result = await tools.exec_command({{cmd: {json.dumps(command)}}});\n"
            "text(result);\n"
        )
        return {
            "type": "custom_tool_call",
            "id": f"ctc_stand_in_{len(state.received)}",
            "status": "completed",
            "call_id": call_id,
            "name": "exec",
            "input": script,
        }
    arguments: dict[str, Any] = {}
    name = next(iter(sorted(functions)), "shell")
    for candidate, candidate_arguments in (
        ("exec_command", {"cmd": command}),
        ("shell_command", {"command": command}),
        ("shell", {"command": ["bash", "-lc", command]}),
    ):
        if candidate in functions:
            name, arguments = candidate, candidate_arguments
            break
    return {
        "type": "function_call",
        "id": f"fc_stand_in_{len(state.received)}",
        "status": "completed",
        "call_id": call_id,
        "name": name,
        "arguments": json.dumps(arguments),
    }


def _responses_usage(request: dict[str, Any]) -> dict[str, Any]:
    prompt = max(1, len(json.dumps(request.get("input") or [])) // 4)
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 12,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt + 12,
    }


def _responses_events(
    request: dict[str, Any], output: list[dict[str, Any]], n: int
) -> Iterator[dict[str, Any]]:
    response = {
        "id": f"resp_stand_in_{n}",
        "object": "response",
        "created_at": 1764200000,
        "status": "completed",
        "model": request.get("model", "gpt"),
        "output": output,
        "parallel_tool_calls": request.get("parallel_tool_calls", False),
        "tool_choice": request.get("tool_choice", "auto"),
        "tools": [],
        "usage": _responses_usage(request),
        "error": None,
        "incomplete_details": None,
    }
    sequence = iter(range(10_000))
    started = {**response, "status": "in_progress", "output": [], "usage": None}
    yield {"type": "response.created", "sequence_number": next(sequence), "response": started}
    yield {"type": "response.in_progress", "sequence_number": next(sequence), "response": started}
    for index, item in enumerate(output):
        kind = item["type"]
        if kind == "message":
            opened = {**item, "status": "in_progress", "content": []}
        elif kind == "function_call":
            opened = {**item, "status": "in_progress", "arguments": ""}
        else:
            opened = {**item, "status": "in_progress", "input": ""}
        yield {
            "type": "response.output_item.added",
            "sequence_number": next(sequence),
            "output_index": index,
            "item": opened,
        }
        if kind == "message":
            text = item["content"][0]["text"]
            part = {"type": "output_text", "text": "", "annotations": []}
            yield {
                "type": "response.content_part.added",
                "sequence_number": next(sequence),
                "item_id": item["id"],
                "output_index": index,
                "content_index": 0,
                "part": part,
            }
            for s in range(0, len(text), 12):
                yield {
                    "type": "response.output_text.delta",
                    "sequence_number": next(sequence),
                    "item_id": item["id"],
                    "output_index": index,
                    "content_index": 0,
                    "delta": text[s : s + 12],
                    "logprobs": [],
                }
            yield {
                "type": "response.output_text.done",
                "sequence_number": next(sequence),
                "item_id": item["id"],
                "output_index": index,
                "content_index": 0,
                "text": text,
                "logprobs": [],
            }
            yield {
                "type": "response.content_part.done",
                "sequence_number": next(sequence),
                "item_id": item["id"],
                "output_index": index,
                "content_index": 0,
                "part": {**part, "text": text},
            }
        elif kind == "function_call":
            arguments = item["arguments"]
            for s in range(0, len(arguments), 10):
                yield {
                    "type": "response.function_call_arguments.delta",
                    "sequence_number": next(sequence),
                    "item_id": item["id"],
                    "output_index": index,
                    "delta": arguments[s : s + 10],
                }
            yield {
                "type": "response.function_call_arguments.done",
                "sequence_number": next(sequence),
                "item_id": item["id"],
                "output_index": index,
                "arguments": arguments,
            }
        else:
            text = item["input"]
            for s in range(0, len(text), 10):
                yield {
                    "type": "response.custom_tool_call_input.delta",
                    "sequence_number": next(sequence),
                    "item_id": item["id"],
                    "output_index": index,
                    "delta": text[s : s + 10],
                }
            yield {
                "type": "response.custom_tool_call_input.done",
                "sequence_number": next(sequence),
                "item_id": item["id"],
                "output_index": index,
                "input": text,
            }
        yield {
            "type": "response.output_item.done",
            "sequence_number": next(sequence),
            "output_index": index,
            "item": item,
        }
    yield {"type": "response.completed", "sequence_number": next(sequence), "response": response}


# --- the server ---------------------------------------------------------------------------------


def _handler(state: AgentStandIn) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _receive(self) -> Received:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode(errors="replace")
            received = Received(
                self.command,
                self.path,
                {name.lower(): value for name, value in self.headers.items()},
                body,
            )
            with state.lock:
                state.received.append(received)
            return received

        def do_HEAD(self) -> None:
            self._receive()
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_GET(self) -> None:
            received = self._receive()
            path = received.path.split("?")[0].rstrip("/")
            if path.endswith("/models"):
                self._json(200, {"object": "list", "data": [], "models": []})
            else:
                self._json(404, {"error": {"type": "not_found_error", "message": path}})

        def do_POST(self) -> None:
            received = self._receive()
            path = received.path.split("?")[0].rstrip("/")
            request = received.body if isinstance(received.body, dict) else {}
            if path.endswith("/messages/count_tokens"):
                self._json(200, {"input_tokens": _anthropic_usage(request)["input_tokens"]})
            elif path.endswith("/messages"):
                self._anthropic(received, request)
            elif path.endswith("/responses"):
                self._responses(received, request)
            else:
                self._json(404, {"error": {"type": "not_found_error", "message": path}})

        def _anthropic(self, received: Received, request: dict[str, Any]) -> None:
            n = len(state.received)
            if request.get("tools"):
                received.kind = "main"
                done = _anthropic_tool_rounds(request.get("messages") or [])
                if done < state.rounds:
                    content = [_anthropic_tool(state, request, done)]
                    stop = "tool_use"
                else:
                    content, stop = [{"type": "text", "text": state.final_text}], "end_turn"
            else:
                content = [{"type": "text", "text": _anthropic_side_text(request)}]
                stop = "end_turn"
            if request.get("stream"):
                self._stream(
                    (
                        f"event: {name}\ndata: {json.dumps(event)}\n\n"
                        for name, event in _anthropic_events(request, content, stop, n)
                    ),
                    stall=received.kind == "main" and _stalls(request),
                )
                return
            usage = _anthropic_usage(request)
            self._json(
                200,
                {
                    "id": f"msg_stand_in_{n}",
                    "type": "message",
                    "role": "assistant",
                    "model": request.get("model", "claude"),
                    "content": content,
                    "stop_reason": stop,
                    "stop_sequence": None,
                    "usage": {**usage, "output_tokens": 12},
                },
            )

        def _responses(self, received: Received, request: dict[str, Any]) -> None:
            n = len(state.received)
            if _responses_tools(request):
                received.kind = "main"
                done = _responses_tool_rounds(request.get("input") or [])
                if done < state.rounds:
                    output = [_responses_tool(state, request, done)]
                else:
                    output = [_responses_message(state.final_text, n)]
            else:
                output = [_responses_message("Reading the notes", n)]
            events = list(_responses_events(request, output, n))
            if request.get("stream"):
                self._stream(
                    f"event: {event['type']}\ndata: {json.dumps(event)}\n\n" for event in events
                )
                return
            self._json(200, events[-1]["response"])

        def _json(self, status: int, payload: Any) -> None:
            body = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("request-id", "req_stand_in")
            self.end_headers()
            self.wfile.write(body)

        def _stream(self, events: Iterator[str], *, stall: bool = False) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("request-id", "req_stand_in")
            self.end_headers()
            for event in events:
                data = event.encode()
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()
                if stall and event.startswith("event: content_block_delta"):
                    state.stalled.set()
                    state.unstall.wait(120)
                    self.close_connection = True  # the stream ends short
                    return
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

    return Handler


def _responses_message(text: str, n: int) -> dict[str, Any]:
    return {
        "type": "message",
        "id": f"msg_stand_in_{n}",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@contextmanager
def agent_stand_in(workdir: Path, *, rounds: int = 2) -> Iterator[AgentStandIn]:
    """Anthropic Messages and OpenAI Responses, scripted, on a free loopback port (under
    ``/v1/``)."""
    state = AgentStandIn("", workdir, rounds=rounds)
    server = _Server(("127.0.0.1", 0), _handler(state))
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


# --- a tap: what the agent itself sent -----------------------------------------------------------


@dataclass
class Tap:
    """A loopback relay between an agent and ctxweb that keeps what the agent sent (managed mode
    changes what goes on: the tap shows what it replaced)."""

    url: str
    target: str
    sent: list[Received] = field(default_factory=list)


def _tap_handler(tap: Tap) -> type[BaseHTTPRequestHandler]:
    import http.client
    from urllib.parse import urlsplit

    target = urlsplit(tap.target)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _relay(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode(errors="replace")
            headers = {name.lower(): value for name, value in self.headers.items()}
            tap.sent.append(Received(self.command, self.path, headers, body))
            upstream = http.client.HTTPConnection(target.hostname, target.port, timeout=120)
            try:
                outgoing = {k: v for k, v in self.headers.items() if k.lower() != "host"}
                outgoing["Host"] = target.netloc
                upstream.request(self.command, self.path, body=raw or None, headers=outgoing)
                answer = upstream.getresponse()
                self.send_response(answer.status)
                for name, value in answer.getheaders():
                    if name.lower() not in ("transfer-encoding", "content-length", "connection"):
                        self.send_header(name, value)
                if self.command == "HEAD":
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                while chunk := answer.read1(65536):
                    self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            finally:
                upstream.close()

        do_GET = do_POST = do_HEAD = do_PUT = do_DELETE = _relay

    return Handler


@contextmanager
def tap(target: str) -> Iterator[Tap]:
    """A tap in front of ``target`` (``http://host:port``) on a free loopback port."""
    state = Tap("", target.rstrip("/"))
    server = _Server(("127.0.0.1", 0), _tap_handler(state))
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


# --- the agents ---------------------------------------------------------------------------------

MISSING = (
    "the coding agents are not installed (agents/node_modules is missing): run"
    " `make install-agents` (npm ci --prefix agents)"
)


def require_agents() -> None:
    """Skip when the pinned agents are not installed; under ``CI=true`` fail instead."""
    import pytest

    if CLAUDE.exists() and CODEX.exists() and shutil.which("node"):
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"{MISSING} (CI=true: these tests must run)")
    pytest.skip(MISSING)


@dataclass
class AgentRun:
    """One headless run of an agent: how it ended and what it printed."""

    command: list[str]
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def _environment(home: Path, **extra: str) -> dict[str, str]:
    """Nothing of the machine's: its own HOME (configuration, credentials, history) and only
    what a shell needs besides."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "TERM": "dumb",
        "LANG": "C.UTF-8",
        "TMPDIR": str(home / "tmp"),
    }
    (home / "tmp").mkdir(parents=True, exist_ok=True)
    return env | extra


def _run(command: list[str], workdir: Path, env: Mapping[str, str], timeout: float) -> AgentRun:
    import time

    started = time.monotonic()
    try:
        done = subprocess.run(
            command,
            cwd=workdir,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            start_new_session=True,
        )
    except subprocess.TimeoutExpired as expired:
        out = expired.stdout or ""
        err = expired.stderr or ""
        return AgentRun(
            command,
            -1,
            out if isinstance(out, str) else out.decode(errors="replace"),
            (err if isinstance(err, str) else err.decode(errors="replace"))
            + f"\n[timed out after {timeout:.0f}s]",
            time.monotonic() - started,
        )
    return AgentRun(command, done.returncode, done.stdout, done.stderr, time.monotonic() - started)


def run_claude(
    *args: str,
    home: Path,
    workdir: Path,
    base_url: str,
    ctxweb_key: str | None,
    headers: Mapping[str, str] | None = None,
    timeout: float = 120,
) -> AgentRun:
    """``claude`` with ``args`` (e.g. ``-p "..."``), configured as ctxweb's Connect page says:
    ``ANTHROPIC_BASE_URL`` and ``ANTHROPIC_CUSTOM_HEADERS`` (one ``Name: value`` a line: the
    ctxweb key, then ``headers``)."""
    command, env = claude_command(
        *args, home=home, base_url=base_url, ctxweb_key=ctxweb_key, headers=headers
    )
    return _run(command, workdir, env, timeout)


def claude_command(
    *args: str,
    home: Path,
    base_url: str,
    ctxweb_key: str | None,
    headers: Mapping[str, str] | None = None,
) -> tuple[list[str], dict[str, str]]:
    """:func:`run_claude`'s command and environment, for a test that runs it itself."""
    lines = [f"X-Ctxweb-Key: {ctxweb_key}"] if ctxweb_key is not None else []
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    env = _environment(
        home,
        CLAUDE_CONFIG_DIR=str(home / ".claude"),
        ANTHROPIC_BASE_URL=base_url,
        ANTHROPIC_API_KEY=PROVIDER_KEY,
        ANTHROPIC_CUSTOM_HEADERS="\n".join(lines),
        # Never update itself (from an npm install it would install globally); it changes
        # nothing the CLI sends.
        DISABLE_AUTOUPDATER="1",
    )
    return [str(CLAUDE), *args], env


def codex_configure(
    home: Path, base_url: str, headers: Mapping[str, str], extra_config: str = ""
) -> Path:
    """``$CODEX_HOME/config.toml`` as ctxweb's Connect page says (a model provider whose base
    URL is ctxweb's, the ctxweb key read from ``CTXWEB_API_KEY`` by ``env_http_headers``, other
    headers in ``http_headers``), then ``extra_config`` (more TOML tables, such as an MCP
    server's); the ``CODEX_HOME`` folder."""
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    pairs = ", ".join(
        f"{json.dumps(name)} = {json.dumps(value)}" for name, value in headers.items()
    )
    (codex_home / "config.toml").write_text(
        'model_provider = "ctxweb"\ncheck_for_update_on_startup = false\n\n'
        "[model_providers.ctxweb]\n"
        'name = "OpenAI through ctxweb"\n'
        f"base_url = {json.dumps(base_url)}\n"
        'env_key = "OPENAI_API_KEY"\n'
        'wire_api = "responses"\n'
        'env_http_headers = { "X-Ctxweb-Key" = "CTXWEB_API_KEY" }\n'
        f"http_headers = {{ {pairs} }}\n" + (f"\n{extra_config}" if extra_config else "")
    )
    return codex_home


def run_codex(
    *args: str,
    home: Path,
    workdir: Path,
    base_url: str,
    ctxweb_key: str | None,
    headers: Mapping[str, str] | None = None,
    timeout: float = 120,
    extra_config: str = "",
) -> AgentRun:
    """``codex`` with ``args`` (e.g. ``exec "..."``), its configuration rewritten first (so
    that a later run may change the headers; ``extra_config``: see :func:`codex_configure`)."""
    codex_home = codex_configure(home, base_url, headers or {}, extra_config)
    env = _environment(home, CODEX_HOME=str(codex_home), OPENAI_API_KEY=PROVIDER_KEY)
    if ctxweb_key is not None:
        env["CTXWEB_API_KEY"] = ctxweb_key
    return _run([str(CODEX), *args], workdir, env, timeout)


def scrubbed(value: Any) -> Any:
    """``value`` with the provider key replaced by ``sk-test`` (for fixtures)."""
    return json.loads(json.dumps(value).replace(PROVIDER_KEY, "sk-test"))


def versions() -> dict[str, str]:
    """The installed agents' versions, as their package files say."""
    found = {}
    for name in ("@anthropic-ai/claude-code", "@openai/codex"):
        package = AGENTS / "node_modules" / name / "package.json"
        if package.exists():
            found[name] = json.loads(package.read_text())["version"]
    return found


# --- fixtures: `python -m tests.support.agents` --------------------------------------------------


def _capture(out: Path) -> None:
    """Run both agents through a live ctxweb's proxy against the stand-ins and write the raw
    request bodies the stand-ins received to ``out/claude-code``, ``out/codex`` (Codex's
    default model) and ``out/codex-gpt-5.1-codex`` (a model of classic function tools)."""
    import tempfile

    from tests.support.servers import create_key, embedded_env, live_server

    with tempfile.TemporaryDirectory() as scratch, agent_stand_in(Path(scratch) / "work") as api:
        root = Path(scratch)
        workdir = root / "work"
        workdir.mkdir()
        # Short notes: the fixtures show shapes, the tool outputs need not be long.
        (workdir / NOTES).write_text(NOTES_TEXT.splitlines(keepends=True)[0])
        env = embedded_env(
            root / "data",
            CTXWEB_UPSTREAM_ANTHROPIC=f"{api.url}/v1",
            CTXWEB_UPSTREAM_OPENAI=f"{api.url}/v1",
            CTXWEB_RATE_LIMIT="",
            CTXWEB_RATE_LIMIT_COSTLY="",
        )
        key = create_key(env, role="operator")
        with live_server(env) as server:
            prompt = "Read notes.txt and tell me the answer."
            for agent, runs in (
                ("claude-code", [("-p", prompt), ("-p", "--continue", "Now list the files.")]),
                *(
                    (
                        folder,
                        [
                            ("exec", "--skip-git-repo-check", *model, prompt),
                            (
                                "exec",
                                "--skip-git-repo-check",
                                *model,
                                "resume",
                                "--last",
                                "Now list the files.",
                            ),
                        ],
                    )
                    for folder, model in (
                        ("codex", ()),
                        ("codex-gpt-5.1-codex", ("-m", "gpt-5.1-codex")),
                    )
                ),
            ):
                home = root / agent
                home.mkdir()
                kept: list[tuple[str, Received]] = []
                for number, args in enumerate(runs, 1):
                    first = len(api.received)
                    if agent == "claude-code":
                        run = run_claude(
                            *args,
                            home=home,
                            workdir=workdir,
                            base_url=f"{server.url}/proxy/anthropic",
                            ctxweb_key=key,
                        )
                    else:
                        run = run_codex(
                            *args,
                            home=home,
                            workdir=workdir,
                            base_url=f"{server.url}/proxy/openai/v1",
                            ctxweb_key=key,
                        )
                    print(agent, args, "exit", run.returncode, f"{run.seconds:.1f}s")
                    if run.returncode != 0:
                        print(run.output[-3000:])
                    calls = api.received[first:]
                    mains = [r for r in calls if r.kind == "main"]
                    stage = "prompt" if number == 1 else "continued"
                    sides = [r for r in calls if r.kind == "side"]
                    kept += [(f"run{number}-side-call-{n}", r) for n, r in enumerate(sides, 1)]
                    if mains:
                        kept.append((f"run{number}-{stage}-first-call", mains[0]))
                        kept.append((f"run{number}-{stage}-last-call-with-tool-results", mains[-1]))
                folder = out / agent
                folder.mkdir(parents=True, exist_ok=True)
                for old in folder.glob("*.json"):
                    old.unlink()
                for name, received in kept:
                    record = {
                        "method": received.method,
                        "path": received.path,
                        "headers": {k: v for k, v in received.headers.items() if k != "host"},
                        "body": received.body,
                    }
                    text = json.dumps(scrubbed(record), indent=1, ensure_ascii=False)
                    text = text.replace(str(root), "/tmp/ctxweb-agents")
                    (folder / f"{name}.json").write_text(text + "\n")
                    print(" ", name, received.method, received.path, len(text))


if __name__ == "__main__":
    import sys

    _capture(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "tests" / "fixtures" / "agents")
