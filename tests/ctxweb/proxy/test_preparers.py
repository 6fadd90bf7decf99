"""Managed calls prepared in a preparer process (issue 33): the web process never parses a managed
call itself. An unmodified ``openai`` agent behind a live server with a preparer: its managed
session's calls are compacted once an operation is applied, and its later calls get the same
rewrite (which lives in the preparer). A preparer that is stopped never holds a call longer than
``CTXWEB_PROXY_PREPARE_SECONDS``: the call goes whole, with a warning on its turn; a preparer
that is killed is started again, and compacts the next operation's calls.

The failures the web process must survive (a preparer that never accepts, one that hangs up,
one that cannot prepare the call) are also shown in this process, on a socket of the test's."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from openai import OpenAI

from ctxweb.contexts.services import preparing
from ctxweb.contexts.services.proxying import Prepared
from tests.support.managed import build_calls, call_api, operation_applied, wait
from tests.support.providers import StandIn
from tests.support.servers import LiveServer, create_key, embedded_env, live_server

pytestmark = pytest.mark.embedded_server

SESSION = "prepared"
READY = re.compile(r"proxy: preparer ready \(pid (\d+)\)")


@pytest.fixture(scope="module")
def server(
    stand_in: StandIn, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[LiveServer, str]]:
    env = embedded_env(
        tmp_path_factory.mktemp("preparers"),
        CTXWEB_UPSTREAM_OPENAI=f"{stand_in.url}/v1",
        CTXWEB_RATE_LIMIT="",
        CTXWEB_RATE_LIMIT_COSTLY="",
        CTXWEB_PROXY_PREPARERS="1",
        CTXWEB_PROXY_PREPARE_SECONDS="3",
    )
    key = create_key(env, role="operator")
    with live_server(env) as running:
        yield running, key


def preparers(server: LiveServer) -> list[int]:
    """The pids of the preparers that said they are ready, the first started first."""
    return [int(pid) for pid in READY.findall(server.log)]


def preparer_after(server: LiveServer, known: int) -> int:
    """The pid of the preparer ready after the first ``known`` ones."""
    return int(wait(lambda: preparers(server)[known:][:1] or None, "a preparer ready")[0])


def compacted(url: str, key: str) -> None:
    """``ctxweb-auto`` applied to the session's latest turn."""
    params = {"target_tokens": 4000, "latest_turn": "outputs"}
    operation_applied(url, key, SESSION, "ctxweb-auto", params)


def recorded(url: str, key: str, turns: int) -> list[dict[str, Any]]:
    """The session's turns once ``turns`` are recorded (recording follows the answer)."""
    found = wait(
        lambda: (lambda t: t if len(t) == turns else None)(
            call_api(url, key, "GET", f"sessions/{SESSION}/turns")
        ),
        f"{turns} turns",
    )
    return list(found)


def test_a_preparer_process_prepares_managed_calls_and_is_started_again_when_killed(
    server: tuple[LiveServer, str], stand_in: StandIn
) -> None:
    running, key = server
    url = running.url
    first = preparer_after(running, 0)
    assert first != running.process.pid
    client = OpenAI(
        base_url=f"{url}/proxy/openai/v1",
        api_key="sk-provider",
        timeout=60,
        max_retries=0,
        default_headers={
            "X-Ctxweb-Key": key,
            "X-Ctxweb-Session": SESSION,
            "X-Ctxweb-Managed": "1",
        },
    )
    history: list[Any] = build_calls(client, stand_in)
    recorded(url, key, 4)
    compacted(url, key)

    def ask(question: str) -> list[dict[str, Any]]:
        """The agent's next call, its history grown by ``question``: what the provider got."""
        history.extend(
            [{"role": "assistant", "content": "ok"}, {"role": "user", "content": question}]
        )
        client.chat.completions.create(model="gpt-4o", messages=history)
        return list(stand_in.requests[-1]["messages"])

    managed = call_api(url, key, "GET", f"sessions/{SESSION}/context")["request"]["messages"]
    assert ask("What failed?")[: len(managed)] == managed
    recorded(url, key, 5)
    # The turn after: no operation since it, the rewrite the preparer remembers is what applies.
    again = ask("And now?")
    assert again[: len(managed)] == managed
    assert again[-1] == history[-1]
    turns = recorded(url, key, 6)
    assert any(e.get("type") == "managed" for e in turns[-1]["events"]), turns[-1]["events"]

    # Stopped, the preparer holds a call no longer than CTXWEB_PROXY_PREPARE_SECONDS: it goes
    # whole, and its turn says why.
    os.kill(first, signal.SIGSTOP)
    try:
        assert ask("Is it stuck?") == history
        turns = recorded(url, key, 7)
        warnings = [e["message"] for e in turns[-1]["events"] if e.get("type") == "warning"]
        assert any("CTXWEB_PROXY_PREPARE_SECONDS" in w for w in warnings), turns[-1]["events"]
    finally:
        os.kill(first, signal.SIGKILL)

    # Killed, it is started again, and prepares the calls of the next operation.
    second = preparer_after(running, 1)
    assert second != first
    compacted(url, key)
    managed = call_api(url, key, "GET", f"sessions/{SESSION}/context")["request"]["messages"]
    assert ask("What now?")[: len(managed)] == managed
    recorded(url, key, 8)
    assert ask("And then?")[: len(managed)] == managed
    assert "ended" in running.log  # the web process saw its preparer end, and lived on


# --- the web process's side, on a socket of the test's --------------------------------------------


@pytest.fixture
def listener(monkeypatch: pytest.MonkeyPatch, settings: Any) -> Iterator[socket.socket]:
    """The socket of this process's one preparer, which the test answers (or not)."""
    settings.CTXWEB_PROXY_PREPARE_SECONDS = 0.5
    folder = tempfile.mkdtemp(prefix="ctxweb-test-")
    path = str(Path(folder) / "0.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(8)
    monkeypatch.setattr(preparing, "_PREPARERS", [preparing.Preparer(0, path, server)])
    yield server
    server.close()
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    os.rmdir(folder)


def answering(server: socket.socket, answer: Callable[[socket.socket], None]) -> threading.Thread:
    """A thread that takes the next call on ``server`` whole, then answers it with ``answer``."""

    def take() -> None:
        conn, _ = server.accept()
        with conn:
            call, body = preparing.frame_received(conn)
            assert (call["session"], body) == ("named", BODY)
            answer(conn)

    thread = threading.Thread(target=take, daemon=True)
    thread.start()
    return thread


BODY = b'{"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}'


def prepared_elsewhere() -> Prepared:
    return asyncio.run(
        preparing.proxy_prepare_elsewhere(
            project_id=7, key_id=3, format="openai-chat", body=BODY, session="named", managed=True
        )
    )


def warned(prepared: Prepared) -> str:
    """The warning on a call sent unchanged (its body and named session as they came)."""
    assert prepared.body is BODY
    assert (prepared.session, prepared.original) == ("named", ())
    [event] = prepared.events
    assert (event["type"], event["source"]) == ("warning", "proxy"), event
    return str(event["message"])


def test_a_call_whose_preparer_never_answers_goes_whole_after_the_bounded_wait(
    listener: socket.socket,
) -> None:
    assert "within CTXWEB_PROXY_PREPARE_SECONDS (0.5s)" in warned(prepared_elsewhere())


def test_a_call_whose_preparer_hangs_up_goes_whole(listener: socket.socket) -> None:
    thread = answering(listener, lambda conn: None)
    assert "the preparer could not prepare it" in warned(prepared_elsewhere())
    thread.join(5)


def test_a_call_its_preparer_could_not_prepare_goes_whole(listener: socket.socket) -> None:
    thread = answering(
        listener, lambda conn: preparing.frame_send(conn, {"error": "OperationalError"}, b"")
    )
    assert "OperationalError" in warned(prepared_elsewhere())
    thread.join(5)


def test_a_preparer_that_is_not_listening_sends_the_call_whole(listener: socket.socket) -> None:
    listener.close()
    with contextlib.suppress(FileNotFoundError):
        os.unlink(preparing._PREPARERS[0].path)
    assert "the preparer could not prepare it" in warned(prepared_elsewhere())


def test_the_preparers_answer_is_what_is_relayed(listener: socket.socket) -> None:
    answer = {
        "session": "named/side",
        "original": ["a", "b"],
        "events": [{"type": "managed", "source": "proxy", "operation": 4}],
        "rewritten": True,
    }

    def rewritten(conn: socket.socket) -> None:
        preparing.frame_send(conn, answer, b"{}")

    thread = answering(listener, rewritten)
    prepared = prepared_elsewhere()
    thread.join(5)
    assert (prepared.body, prepared.session, prepared.original, prepared.events) == (
        b"{}",
        "named/side",
        ("a", "b"),
        answer["events"],
    )


def test_a_broken_answer_sends_the_call_whole(listener: socket.socket) -> None:
    thread = answering(listener, lambda conn: preparing.frame_send(conn, {"session": "x"}, b""))
    assert "its answer is broken" in warned(prepared_elsewhere())
    thread.join(5)


def test_the_socket_folders_of_killed_web_processes_are_removed_at_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A web process killed leaves its preparers' socket folder behind (nothing runs at its
    end); the next one to start removes those of processes that no longer exist, and only
    those that hold nothing but sockets."""
    monkeypatch.setattr(preparing.tempfile, "gettempdir", lambda: str(tmp_path))
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()

    def folder(pid: int, *names: str) -> Path:
        made = tmp_path / f"{preparing.FOLDER_PREFIX}{pid}-{len(list(tmp_path.iterdir()))}"
        made.mkdir()
        for name in names:
            (made / name).write_bytes(b"")
        return made

    killed = folder(ended.pid, "0.sock", "1.sock")
    running = folder(os.getpid(), "0.sock")
    unknown = folder(ended.pid, "0.sock", "notes.txt")
    other = tmp_path / "ctxweb-something-else"
    other.mkdir()
    preparing._folders_of_ended_processes_remove()
    assert not killed.exists()
    assert running.exists()
    assert unknown.exists()
    assert other.exists()
