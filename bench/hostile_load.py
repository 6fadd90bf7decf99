"""The hostile benchmark's load, each part in its own process (``bench/hostile.py`` starts them
with ``--role``), so that no part's work delays another's measurement in one interpreter:

- ``callers``: well-behaved streaming callers (asyncio, httpx), each its own session, calling in
  a loop with a growing conversation, retrying a call that fails until it is read whole;
- ``health``: ``GET /api/v1/health`` every 50 ms on a new connection;
- ``watch``: the callers' sessions' turn counts through the API every 250 ms (when each call
  became visible);
- ``hostile``: hanging calls, clients that never read a huge answer, big managed calls, an OTLP
  flood and one gzip bomb.

Each role reads its settings as JSON from ``--config``, writes its results as JSON to ``--out``
and stops at the config's ``until`` (wall clock) or when the file ``stop`` exists.
"""

from __future__ import annotations

import asyncio
import gzip
import http.client
import json
import os
import resource
import socket
import threading
import time
import urllib.parse
from pathlib import Path
from typing import Any

import httpx
import uvloop
from hostile_upstream import ANSWER

SYSTEM = "You are a careful coding agent. " + "Follow the repository's conventions. " * 40
FIRST = "Build the project and fix what fails."
NEXT = "Go on with the next step of the build."
#: A tool output that compacts well (the managed session's history).
OUTPUT = "".join(f"line {n}: building src/module_{n % 7}.py ... ok\n" for n in range(600))


def conversation(calls: int) -> list[dict[str, Any]]:
    """The messages of a caller's ``calls``-th call: the same for every caller, one answer and
    one question longer each call."""
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": FIRST}]
    for _ in range(calls - 1):
        messages += [{"role": "assistant", "content": ANSWER}, {"role": "user", "content": NEXT}]
    return messages


def chat_body(messages: list[dict[str, Any]], *, model: str = "gpt-4o") -> bytes:
    return json.dumps(
        {
            "model": model,
            "messages": messages,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
    ).encode()


def managed_history(steps: int = 4) -> list[list[dict[str, Any]]]:
    """The managed session's calls: each a build step's tool call and long output more."""
    history: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": FIRST},
    ]
    calls = [list(history)]
    for n in range(steps - 1):
        call = {
            "id": f"call_{n}",
            "type": "function",
            "function": {"name": "build", "arguments": "{}"},
        }
        history += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": call["id"], "content": f"build {n}\n{OUTPUT}"},
            {"role": "user", "content": f"Step {n + 1}: go on with the next part."},
        ]
        calls.append(list(history))
    return calls


def _stopped(config: dict[str, Any]) -> bool:
    return time.time() >= config["until"] or Path(config["stop"]).exists()


# --- callers -------------------------------------------------------------------------------------


class Connection:
    """One caller's kept-alive HTTP/1.1 connection, read with asyncio streams: a bare client
    costs the bench a fraction of what httpx does per call, and the bench shares the cores it
    measures."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        split = urllib.parse.urlsplit(url)
        self.host, self.port = split.hostname or "127.0.0.1", split.port or 80
        self.head = (
            f"POST {split.path}/chat/completions HTTP/1.1\r\nHost: {split.netloc}\r\n"
            "Content-Type: application/json\r\n"
            + "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        ).encode()
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None

    async def call(self, body: bytes) -> tuple[str, float]:
        """Send one streamed call; the answer's text and when ``[DONE]`` arrived."""
        if self.reader is None or self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        reader = self.reader
        self.writer.write(self.head + b"Content-Length: %d\r\n\r\n" % len(body) + body)
        status = (await reader.readline()).split(b" ", 2)
        if len(status) < 2:
            raise ConnectionError("the connection was closed")
        chunked, length = False, 0
        while (line := await reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"transfer-encoding":
                chunked = b"chunked" in value.lower()
            elif name.strip().lower() == b"content-length":
                length = int(value)
        if status[1] != b"200":
            if not chunked:
                await reader.readexactly(length)
            self.close()
            raise RuntimeError(f"status {status[1].decode()}")
        if not chunked:
            self.close()
            raise RuntimeError("not a stream")
        buffer, text, done_at = b"", [], 0.0
        while size := _chunk_size(await reader.readline()):
            buffer += await reader.readexactly(size)
            await reader.readexactly(2)
            *events, buffer = buffer.split(b"\n\n")
            for event in events:
                if event == b"data: [DONE]":
                    done_at = time.perf_counter()
                elif event.startswith(b"data: "):
                    for choice in json.loads(event[6:]).get("choices", []):
                        text.append(choice["delta"].get("content") or "")
        await reader.readline()  # the end of the chunked body
        if not done_at:
            raise RuntimeError("the answer was cut short")
        return "".join(text), done_at


def _chunk_size(line: bytes) -> int:
    try:
        return int(line.split(b";")[0], 16)
    except ValueError:  # the connection closed between chunks
        raise ConnectionError("the stream was cut short") from None


async def _caller(
    config: dict[str, Any], n: int, calls: list[list[float]], failures: dict[str, int]
) -> None:
    headers = {"Authorization": "Bearer sk-bench", **config.get("headers", {})}
    if config.get("session_prefix"):
        headers["X-Ctxweb-Session"] = f"{config['session_prefix']}{n:02d}"
    connection = Connection(config["url"], headers)
    k = 0
    while time.time() < config["until"]:
        k += 1
        body = chat_body(conversation(k))
        attempts = 0
        while True:  # a call that fails is sent again until it is read whole
            attempts += 1
            started = time.perf_counter()
            try:
                text, done_at = await asyncio.wait_for(connection.call(body), 30)
                if text != ANSWER:
                    raise RuntimeError("the answer was not the upstream's")
                break
            except (TimeoutError, OSError, EOFError, RuntimeError, ValueError) as error:
                connection.close()
                why = str(error) if isinstance(error, RuntimeError) else type(error).__name__
                failures[why] = failures.get(why, 0) + 1
                if time.time() > config["until"] + 60:
                    return  # never read whole: not a completed call
                await asyncio.sleep(0.2)
        calls.append([k, done_at - started, time.time(), attempts])
    connection.close()


async def _callers(config: dict[str, Any]) -> dict[str, Any]:
    results: dict[str, list[list[float]]] = {}
    failures: dict[str, int] = {}
    tasks = []
    for n in range(config["callers"]):
        calls: list[list[float]] = []
        results[f"{config.get('session_prefix', '')}{n:02d}"] = calls
        tasks.append(asyncio.create_task(_caller(config, n, calls, failures)))
    await asyncio.gather(*tasks)
    return {"calls": results, "failures": failures}


def callers(config: dict[str, Any]) -> dict[str, Any]:
    return uvloop.run(_callers(config))


# --- health --------------------------------------------------------------------------------------


def health(config: dict[str, Any]) -> dict[str, Any]:
    """Each check as ``[wall time, ms]`` (ms null: no answer, or not a 200)."""
    host, port = urllib.parse.urlsplit(config["url"]).netloc.split(":")
    checks: list[list[float | None]] = []
    while not _stopped(config):
        at = time.time()
        started = time.perf_counter()
        try:
            connection = http.client.HTTPConnection(host, int(port), timeout=10)
            connection.request("GET", "/api/v1/health")
            answer = connection.getresponse()
            answer.read()
            connection.close()
            ms: float | None = (time.perf_counter() - started) * 1000
            if answer.status != 200:
                ms = None
        except OSError:
            ms = None
        checks.append([at, ms])
        time.sleep(max(0.0, 0.05 - (time.perf_counter() - started)))
    return {"checks": checks}


# --- watch ---------------------------------------------------------------------------------------


def watch(config: dict[str, Any]) -> dict[str, Any]:
    """Each caller session's turn count as it changed: ``{session: [[wall time, count], ...]}``,
    the time taken when the answer saying it arrived."""
    seen: dict[str, list[list[float]]] = {}
    url = f"{config['url']}/api/v1/sessions?q={config['q']}&limit=500"
    headers = {"Authorization": f"Bearer {config['key']}"}
    with httpx.Client(timeout=10) as client:
        while not _stopped(config):
            started = time.perf_counter()
            try:
                answer = client.get(url, headers=headers)
                at = time.time()
                if answer.status_code == 200:
                    for session in answer.json()["results"]:
                        counts = seen.setdefault(session["external_id"], [])
                        if not counts or counts[-1][1] != session["turn_count"]:
                            counts.append([at, session["turn_count"]])
            except (httpx.HTTPError, ValueError, KeyError):
                pass
            time.sleep(max(0.0, 0.25 - (time.perf_counter() - started)))
    return {"counts": seen}


# --- the hostile traffic -------------------------------------------------------------------------


class Tally:
    """Counts and times of one kind of hostile call, from several threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.statuses: dict[str, int] = {}
        self.seconds: list[float] = []
        self.extra: dict[str, Any] = {}

    def add(self, status: str, seconds: float) -> None:
        with self.lock:
            self.statuses[status] = self.statuses.get(status, 0) + 1
            self.seconds.append(seconds)

    def result(self) -> dict[str, Any]:
        return {"statuses": self.statuses, "seconds": sorted(self.seconds), **self.extra}


def _hanging(config: dict[str, Any], model: str, tally: Tally) -> None:
    body = chat_body(conversation(1), model=model)
    headers = {"Authorization": "Bearer sk-bench", **config["headers"]}
    timeout = httpx.Timeout(config["hang_seconds"], connect=5.0)
    with httpx.Client(timeout=timeout) as client:
        while not _stopped(config):
            started = time.perf_counter()
            try:
                with client.stream(
                    "POST", config["proxy"] + "/chat/completions", content=body, headers=headers
                ) as answer:
                    for _ in answer.iter_raw():
                        pass
                status = f"{answer.status_code} ended"
            except httpx.TimeoutException:
                status = "left after the timeout"
            except httpx.HTTPError as error:
                status = type(error).__name__
                time.sleep(0.2)
            tally.add(status, time.perf_counter() - started)


def _unread(config: dict[str, Any], tally: Tally) -> None:
    """A client that asks for a huge answer and never reads it, for ``hold_seconds``."""
    split = urllib.parse.urlsplit(config["proxy"])
    body = chat_body(conversation(1), model="huge")
    head = (
        f"POST {split.path}/chat/completions HTTP/1.1\r\nHost: {split.netloc}\r\n"
        f"Authorization: Bearer sk-bench\r\nContent-Type: application/json\r\n"
        + "".join(f"{k}: {v}\r\n" for k, v in config["headers"].items())
        + f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    host, port = split.netloc.split(":")
    while not _stopped(config):
        started = time.perf_counter()
        try:
            with socket.socket() as sock:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                sock.connect((host, int(port)))
                sock.sendall(head + body)
                deadline = time.monotonic() + config["hold_seconds"]
                while time.monotonic() < deadline and not _stopped(config):
                    time.sleep(0.2)
            tally.add("held, never read", time.perf_counter() - started)
        except OSError as error:
            tally.add(type(error).__name__, time.perf_counter() - started)
            time.sleep(0.2)


def _big_managed(config: dict[str, Any], n: int, tally: Tally) -> None:
    history = json.dumps(managed_history()[-1]).encode()[:-1]
    filler = ("The build log of the whole monorepo, kept verbatim. " * 20 + "\\n").encode()
    big = filler * (config["big_mb"] * 1024 * 1024 // len(filler))
    headers = {
        "Authorization": "Bearer sk-bench",
        "Content-Type": "application/json",
        **config["headers"],
        "X-Ctxweb-Session": config["managed_session"],
        "X-Ctxweb-Managed": "1",
    }
    with httpx.Client(timeout=httpx.Timeout(300.0, connect=5.0)) as client:
        call = 0
        while not _stopped(config):
            call += 1
            unique = f"caller {n} call {call}: ".encode()
            body = (
                b'{"model": "gpt-4o", "messages": '
                + history
                + b', {"role": "user", "content": "'
                + unique
                + big
                + b'"}]}'
            )
            started = time.perf_counter()
            try:
                answer = client.post(
                    config["proxy"] + "/chat/completions", content=body, headers=headers
                )
                status = str(answer.status_code)
            except httpx.HTTPError as error:
                status = type(error).__name__
                time.sleep(0.2)
            tally.add(status, time.perf_counter() - started)


def _span(trace: str, span: int, call: int) -> dict[str, Any]:
    messages = [
        {"role": "system", "parts": [{"type": "text", "content": "You are terse."}]},
        {"role": "user", "parts": [{"type": "text", "content": f"Question {call}?"}]},
    ]
    attributes = {
        "gen_ai.operation.name": {"stringValue": "chat"},
        "gen_ai.request.model": {"stringValue": "gpt-4o"},
        "gen_ai.input.messages": {"stringValue": json.dumps(messages)},
        "gen_ai.usage.input_tokens": {"intValue": "40"},
        "gen_ai.usage.output_tokens": {"intValue": "5"},
    }
    return {
        "traceId": trace,
        "spanId": f"{span:016x}",
        "name": "chat gpt-4o",
        "startTimeUnixNano": str(time.time_ns()),
        "attributes": [{"key": k, "value": v} for k, v in attributes.items()],
    }


def _otlp(config: dict[str, Any], n: int, tally: Tally) -> None:
    headers = {"Authorization": f"Bearer {config['key']}", "Content-Type": "application/json"}
    session = {"key": "session.id", "value": {"stringValue": f"hostile-otlp-{n}"}}
    with httpx.Client(timeout=httpx.Timeout(60.0, connect=5.0)) as client:
        export = 0
        while not _stopped(config):
            export += 1
            trace = f"{n:08x}{export:024x}"
            spans = [_span(trace, export * 100 + s, export * 100 + s) for s in range(20)]
            document = {
                "resourceSpans": [
                    {
                        "resource": {"attributes": [session]},
                        "scopeSpans": [{"scope": {"name": "bench"}, "spans": spans}],
                    }
                ]
            }
            started = time.perf_counter()
            try:
                answer = client.post(
                    config["server"] + "/v1/traces", content=json.dumps(document), headers=headers
                )
                status = str(answer.status_code)
            except httpx.HTTPError as error:
                status = type(error).__name__
                time.sleep(0.2)
            tally.add(status, time.perf_counter() - started)


def _bomb(config: dict[str, Any], tally: Tally) -> None:
    """One gzip bomb: ``bomb_mb`` MB of empty spans, a few tens of KB compressed."""
    while time.time() < config["bomb_at"]:
        time.sleep(0.1)
    count = config["bomb_mb"] * 1024 * 1024 // 3
    spans = b"{}," * (count - 1) + b"{}"
    document = b'{"resourceSpans": [{"scopeSpans": [{"spans": [' + spans + b"]}]}]}"
    body = gzip.compress(document, compresslevel=9)
    tally.extra["compressed"] = len(body)
    headers = {
        "Authorization": f"Bearer {config['key']}",
        "Content-Type": "application/json",
        "Content-Encoding": "gzip",
    }
    started = time.perf_counter()
    try:
        answer = httpx.post(
            config["server"] + "/v1/traces", content=body, headers=headers, timeout=300
        )
        status = f"{answer.status_code} {answer.text[:120]}"
    except httpx.HTTPError as error:
        status = type(error).__name__
    tally.add(status, time.perf_counter() - started)


def hostile(config: dict[str, Any]) -> dict[str, Any]:
    kinds = {name: Tally() for name in ("hanging", "unread", "big_managed", "otlp", "bomb")}
    threads = []
    for n in range(config["hanging"]):
        model = "hang-headers" if n % 2 else "hang-silent"
        threads.append(threading.Thread(target=_hanging, args=(config, model, kinds["hanging"])))
    threads += [
        threading.Thread(target=_unread, args=(config, kinds["unread"]))
        for _ in range(config["unread"])
    ]
    threads += [
        threading.Thread(target=_big_managed, args=(config, n, kinds["big_managed"]))
        for n in range(config["big"])
    ]
    threads += [
        threading.Thread(target=_otlp, args=(config, n, kinds["otlp"]))
        for n in range(config["otlp"])
    ]
    threads.append(threading.Thread(target=_bomb, args=(config, kinds["bomb"])))
    for thread in threads:
        thread.daemon = True
        thread.start()
    for thread in threads:
        thread.join()
    return {name: tally.result() for name, tally in kinds.items()}


ROLES = {"callers": callers, "health": health, "watch": watch, "hostile": hostile}


def run_role(role: str, config_path: str, out: str) -> None:
    config = json.loads(Path(config_path).read_text())
    result = ROLES[role](config)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    result["cpu_seconds"] = usage.ru_utime + usage.ru_stime
    Path(out).write_text(json.dumps(result))
    os._exit(0)  # the hanging threads' sockets need not be closed politely
