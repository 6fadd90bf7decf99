"""The telemetry receivers in processes of their own (:mod:`ctxweb.capturers`), against a live
embedded server as ``make run`` starts it: an export is stored by the capturer and answered as
before; a capturer stopped is not stood in for by the web process (503, Retry-After); one killed
is started again, and the request sent meanwhile waits for it."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ctxweb import capturers
from ctxweb.contexts.services import preparing
from tests.support.servers import (
    LiveServer,
    create_key,
    embedded_env,
    live_server,
    session_turns,
)

pytestmark = pytest.mark.embedded_server

SESSION = "captured"
READY = re.compile(r"capture: capturer ready \(pid (\d+)\)")
MESSAGES = json.dumps([{"role": "user", "parts": [{"type": "text", "content": "Why?"}]}])


def _serving(folder: Path, seconds: str) -> Iterator[tuple[LiveServer, str]]:
    env = embedded_env(
        folder, CTXWEB_RATE_LIMIT="", CTXWEB_RATE_LIMIT_COSTLY="", CTXWEB_CAPTURE_SECONDS=seconds
    )
    assert "CTXWEB_CAPTURE_PROCESSES" not in env  # the default: one capturer
    key = create_key(env, role="operator")
    with live_server(env) as running:
        yield running, key


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveServer, str]]:
    # long enough for a capturer to start again on a machine the test suite keeps busy
    yield from _serving(tmp_path_factory.mktemp("capturers"), "90")


@pytest.fixture(scope="module")
def impatient(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveServer, str]]:
    yield from _serving(tmp_path_factory.mktemp("impatient"), "2")


def capturers_ready(server: LiveServer, known: int = 0) -> int:
    """The pid of the capturer ready after the first ``known`` ones (waiting for it)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        pids = [int(pid) for pid in READY.findall(server.log)]
        if len(pids) > known:
            return pids[known]
        time.sleep(0.05)
    raise AssertionError(f"no capturer ready after {known}: {server.log[-3000:]}")


def gone(pid: int) -> None:
    """Wait until process ``pid`` has ended (gone, or a zombie its parent has not reaped)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return
        if state in ("Z", "X"):
            return
        time.sleep(0.01)
    raise AssertionError(f"process {pid} still running 30 s after SIGKILL")


def export(span_id: str, content: str = "Why?") -> bytes:
    messages = json.dumps([{"role": "user", "parts": [{"type": "text", "content": content}]}])
    attributes = {"gen_ai.request.model": "gpt-4o", "gen_ai.input.messages": messages}
    span = {
        "traceId": "5b8efff798038103d269b633813fc60c",
        "spanId": span_id,
        "name": "chat",
        "startTimeUnixNano": "1",
        "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attributes.items()],
    }
    return json.dumps(
        {
            "resourceSpans": [
                {
                    "resource": {
                        "attributes": [{"key": "session.id", "value": {"stringValue": SESSION}}]
                    },
                    "scopeSpans": [{"spans": [span]}],
                }
            ]
        }
    ).encode()


def post(url: str, key: str, body: bytes) -> tuple[int, Any, bytes]:
    request = urllib.request.Request(
        f"{url}/v1/traces",
        data=body,
        method="POST",
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read()


def turns(url: str, key: str) -> int:
    return session_turns(url, key, SESSION)


def test_an_export_is_stored_by_the_capturer_and_answered_as_before(
    server: tuple[LiveServer, str],
) -> None:
    running, key = server
    pid = capturers_ready(running)
    assert pid != running.process.pid
    status, _, answer = post(running.url, key, export("1111111111111111"))
    assert status == 200, answer
    assert json.loads(answer) == {}  # all accepted
    assert turns(running.url, key) >= 1
    # an export the receiver refuses names the field, from the capturer as from a thread
    status, _, answer = post(running.url, key, export("not-hex"))
    assert status == 400, answer
    assert b"spanId" in answer


def test_a_stopped_capturer_is_answered_for_with_503(
    impatient: tuple[LiveServer, str],
) -> None:
    running, key = impatient
    pid = capturers_ready(running)
    os.kill(pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        status, headers, answer = post(running.url, key, export("2222222222222222"))
        waited = time.monotonic() - started
        # the health check and the API did not wait for it
        with urllib.request.urlopen(f"{running.url}/api/v1/health", timeout=5) as health:
            assert health.status == 200
    finally:
        os.kill(pid, signal.SIGCONT)
    assert status == 503, answer
    assert headers.get("Retry-After") == "1"
    assert json.loads(answer)["code"] == 14  # OTLP's UNAVAILABLE: exporters send it again
    assert 1.5 < waited < 30  # CTXWEB_CAPTURE_SECONDS (2)
    # going again, it answers the next: at once on a quiet machine; on one the test suite keeps
    # busy, the request it held while stopped can take it past the 2 s again, and the exporter
    # sends it again after Retry-After, as OTLP exporters do
    deadline = time.monotonic() + 60
    while True:
        status, headers, answer = post(running.url, key, export("4444444444444444"))
        if status != 503 or time.monotonic() > deadline:
            break
        time.sleep(float(headers.get("Retry-After", "1")))
    assert status == 200, answer


def test_a_killed_capturer_is_started_again_and_answers_the_requests_sent_again(
    server: tuple[LiveServer, str],
) -> None:
    """A request sent while the capturer starts again waits for it in the socket's backlog, or
    is answered 503 when the dying capturer took it: sent again after ``Retry-After`` (as
    exporters do), it is stored once, by the capturer started again."""
    running, key = server
    capturers_ready(running)  # the first, before counting them
    known = len(READY.findall(running.log))
    pid = capturers_ready(running, known - 1)
    before = turns(running.url, key)
    os.kill(pid, signal.SIGKILL)
    gone(pid)
    deadline = time.monotonic() + 90
    while True:
        status, headers, answer = post(running.url, key, export("3333333333333333", "And now?"))
        if status != 503 or time.monotonic() > deadline:
            break
        time.sleep(float(headers.get("Retry-After") or 1))
    assert status == 200, answer
    assert capturers_ready(running, known) != pid
    assert turns(running.url, key) == before + 1


def test_a_capturer_that_closes_the_connection_is_answered_for_with_503(
    tmp_path: Path, settings: Any
) -> None:
    """In process: the web side of the exchange, against a capturer that dies holding a
    request (its connection closes with no answer)."""
    path = str(tmp_path / "0.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)
    got: list[Any] = []

    def die() -> None:
        conn, _ = listener.accept()
        with conn:
            got.append(preparing.frame_received(conn))

    thread = threading.Thread(target=die)
    thread.start()
    settings.CTXWEB_CAPTURE_SECONDS = 10
    saved = list(capturers._CAPTURERS)
    capturers._CAPTURERS[:] = [preparing.Preparer(0, path, listener)]
    try:
        import io

        status, headers, content = capturers.capture_elsewhere(
            {
                "REQUEST_METHOD": "POST",
                "PATH_INFO": "/v1/traces",
                "REMOTE_ADDR": "127.0.0.1",
                "wsgi.input": io.BytesIO(b"{}"),
                "wsgi.errors": None,
            }
        )
    finally:
        capturers._CAPTURERS[:] = saved
        thread.join(10)
        listener.close()
    assert status == 503
    assert (b"retry-after", b"1") in headers
    assert json.loads(content)["code"] == 14
    sent, body = got[0]
    assert body == b"{}"
    assert sent == {"REQUEST_METHOD": "POST", "PATH_INFO": "/v1/traces", "REMOTE_ADDR": "127.0.0.1"}
