"""The event loop does not wait on the file system (issue 33): a relayed call's files are created
on the spooling threads, and log lines are written by a thread of their own. Under the hostile
load, a watchdog that looked at the loop whenever it was 30 ms late found it creating a call's
files (request, what the call is, its answer's file) in one look out of two, and writing a log
line in one out of nine: every caller and the health check waited with it. (The answer's chunks
are appended on the loop to its open file: a thread hop a chunk cost more CPU than it saved.)"""

from __future__ import annotations

import io
import json
import logging
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from ctxweb.accounts.services import api_key_create, project_create
from ctxweb.contexts.models import Turn
from ctxweb.contexts.services import recording
from ctxweb.logqueue import logs_off_the_loop
from ctxweb.proxy.relay import recording_idle
from tests.support.asgi import payload, proxied_chat, serve
from tests.support.providers import StandIn

WAIT = 30.0


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_a_relayed_calls_files_are_created_off_the_event_loop(
    stand_in: StandIn, settings: Any, monkeypatch: pytest.MonkeyPatch, stream: bool
) -> None:
    settings.CTXWEB_UPSTREAM_OPENAI = f"{stand_in.url}/v1"
    settings.CTXWEB_RATE_LIMIT = ""
    _, raw = api_key_create(project=project_create(name="off-the-loop"))
    spool = recording.spool_dir().resolve()
    opened: list[tuple[str, threading.Thread]] = []  # (file name, thread)
    real_open = io.open

    def watched_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if isinstance(file, (str, Path)) and Path(file).resolve().parent == spool:
            opened.append((Path(file).name, threading.current_thread()))
        return real_open(file, mode, *args, **kwargs)

    monkeypatch.setattr(io, "open", watched_open)
    loop_threads: list[threading.Thread] = []

    class Sent(list[dict[str, Any]]):
        def append(self, message: dict[str, Any]) -> None:  # send() runs on the loop
            if threading.current_thread() not in loop_threads:
                loop_threads.append(threading.current_thread())
            super().append(message)

    stand_in.then("Written elsewhere.")
    session = f"off-the-loop-{stream}"
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "Go."}], "stream": stream}
    status, _, messages = serve(
        proxied_chat(raw, session), [json.dumps(body).encode()], sent=Sent()
    )
    assert status == 200
    assert b"Writt" in payload(messages)
    recording_idle(close=True)
    [turn] = Turn.objects.filter(session__external_id=session)
    assert "Written elsewhere." in json.dumps(turn.response)
    created = {name.rsplit(".", 1)[-1] for name, _ in opened}
    assert {"request", "call-writing", "answer"} <= created, opened
    assert len(loop_threads) == 1
    on_the_loop = [name for name, thread in opened if thread in loop_threads]
    assert on_the_loop == [], f"files opened on the event loop: {on_the_loop}"


class Stuck(logging.Handler):
    """A log's output that writes nothing until it is let go (a disk or a pipe that waits)."""

    def __init__(self) -> None:
        super().__init__()
        self.go = threading.Event()
        self.written: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.go.wait(WAIT)
        self.written.append(record.getMessage())


def test_a_log_line_never_waits_for_its_output_and_what_is_dropped_is_said(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stuck = Stuck()
    monkeypatch.setattr(logging.getLogger(), "handlers", [stuck])
    log = logging.getLogger("ctxweb.test.offloop")
    back = logs_off_the_loop(size=3)
    try:
        log.warning("line 0")  # the writing thread takes it, and waits on the output
        deadline = time.monotonic() + WAIT
        while not _queue_empty():
            assert time.monotonic() < deadline, "the writing thread never took the first line"
            time.sleep(0.01)
        logged = threading.Thread(target=lambda: [log.warning("line %d", n) for n in range(1, 6)])
        logged.start()
        logged.join(WAIT)
        assert not logged.is_alive(), "logging waited for the output"
        assert stuck.written == []
        stuck.go.set()
        while len(stuck.written) < 4:
            assert time.monotonic() < deadline, stuck.written
            time.sleep(0.01)
        log.warning("line 6")
    finally:
        stuck.go.set()
        back()
    assert stuck.written == [
        "line 0",
        "line 1",
        "line 2",
        "line 3",
        "2 log records were dropped: the log's output did not keep up",
        "line 6",
    ]
    assert logging.getLogger().handlers == [stuck]  # as it was


def _queue_empty() -> bool:
    feeding = logging.getLogger().handlers[0]
    return bool(getattr(feeding, "queue", None) is not None and feeding.queue.empty())
