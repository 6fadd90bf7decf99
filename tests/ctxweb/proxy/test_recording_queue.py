"""The queue between relaying a call and recording it (issue 33, item 3): written first, drained
by recorders in order per lane, bounded, durable across a crash, and a failure kept visible.

Service-level tests run the embedded shape's recorders (threads of this process) on the test
database; a live test kills a server between relaying a call's last event and queueing it, and
the server that replaces it records the call.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.utils import timezone

from ctxweb.accounts.models import Project
from ctxweb.contexts.models import PendingCall, Session, Turn, UnreadCall
from ctxweb.contexts.services import recording
from tests.support.servers import create_key, embedded_env, live_server

pytestmark = pytest.mark.django_db(transaction=True)

ANSWER = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "model": "gpt-4o",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "Done."}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 12, "completion_tokens": 2, "total_tokens": 14},
}


def request_for(history: list[str]) -> bytes:
    messages: list[dict[str, str]] = []
    for n, text in enumerate(history):
        messages.append({"role": "user", "content": text})
        if n < len(history) - 1:
            messages.append({"role": "assistant", "content": "Done."})
    return json.dumps({"model": "gpt-4o", "messages": messages}).encode()


def spool(
    project: Project,
    history: list[str],
    *,
    session: str | None,
    key_id: int = 1,
    answer: bytes | None = None,
    content_encoding: str = "",
    streamed: bool = False,
) -> recording.Spooled:
    """Spool a call as the relay does (what it is and its request, then its answer)."""
    whole = json.dumps(ANSWER).encode()
    spooled = recording.recording_spool(
        project_id=project.pk,
        key_id=key_id,
        format="openai-chat",
        streamed=streamed,
        session=session,
        original=(),
        events=[],
        content_encoding=content_encoding,
        headers=[("Content-Type", "application/json")],
        length=len(whole),
        request_body=request_for(history),
    )
    recording.answer_path(spooled.spool).write_bytes(whole if answer is None else answer)
    return spooled


def enqueue(
    project: Project, history: list[str], *, session: str | None = "queued", key_id: int = 1
) -> str:
    """Spool a call and queue it once its answer has gone back whole, as the relay does; its
    spool name."""
    spooled = spool(project, history, session=session, key_id=key_id)
    answered = recording.answer_path(spooled.spool).stat().st_size
    recording.recording_finish(spooled=spooled, answer_bytes=answered, complete=True)
    recording.recordings_queued()
    return spooled.spool


def left_by_a_dead_relay(name: str) -> None:
    """Name a process that is gone as the one that relayed the spooled call ``name``."""
    what = json.loads(recording.call_path(name).read_bytes())
    what["owner"] = f"{socket.gethostname()}:{dead_pid()}"
    recording.call_path(name).write_bytes(json.dumps(what).encode())


@pytest.fixture
def project(world: Any) -> Project:
    return world.project  # type: ignore[no-any-return]


def test_a_queued_call_is_recorded_and_its_files_removed(project: Project) -> None:
    name = enqueue(project, ["Build it."])
    recording.recordings_idle(30)
    session = Session.objects.get(project=project, external_id="queued")
    assert session.turns.count() == 1
    assert not PendingCall.objects.filter(spool=name).exists()
    assert not recording.request_path(name).exists()
    assert not recording.answer_path(name).exists()
    assert not recording.call_path(name).exists()


@pytest.mark.parametrize(
    "why",
    [
        "its caller left before the answer's end",
        "ctxweb stopped it: the provider's answer took over CTXWEB_PROXY_MAX_ANSWER_SECONDS (1s)",
    ],
)
def test_a_call_whose_answer_was_cut_is_recorded_and_its_turn_says_so(
    project: Project, caplog: pytest.LogCaptureFixture, why: str
) -> None:
    whole = json.dumps(ANSWER).encode()
    spooled = spool(project, ["Build it."], session=None, answer=whole[:10])
    with caplog.at_level("INFO", logger="ctxweb.contexts.services.recording"):
        recording.recording_finish(spooled=spooled, answer_bytes=10, complete=False, cut=why)
        recording.recordings_queued()
    recording.recordings_idle(30)
    [turn] = Turn.objects.filter(session__project=project)
    assert turn.response is None  # ten bytes of a JSON answer: nothing of it reads
    assert turn.message_count == 1
    message = (
        f"The answer was cut after 10 bytes: {why}. The request is recorded whole; the response"
        " is what the provider sent before the cut."
    )
    assert [e for e in turn.events if e["type"] == "interrupted"] == [
        {"type": "interrupted", "source": "proxy", "warning": True, "message": message}
    ]
    assert not PendingCall.objects.exists()
    assert not UnreadCall.objects.exists()
    assert not recording.request_path(spooled.spool).exists()
    assert not recording.answer_path(spooled.spool).exists()
    said = [r.getMessage() for r in caplog.records if "cut" in r.getMessage()]
    assert said == [
        "recording: a call (openai-chat, session (none named)) recorded with its answer cut: "
        + message
    ]
    # The agent's next call (its history, then a new message) joins the cut call's session.
    enqueue(project, ["Build it.", "Go on."], session=None)
    recording.recordings_idle(30)
    assert list(
        Turn.objects.filter(session__project=project).values_list("session_id", "index")
    ) == [(turn.session_id, 0), (turn.session_id, 1)]


def test_a_cut_compressed_answer_leaves_its_turn_without_a_response(project: Project) -> None:
    # Half a gzip stream does not inflate: the request is recorded, the answer said to be cut.
    squeezed = gzip.compress(json.dumps(ANSWER).encode() * 50)
    spooled = spool(
        project, ["Build it."], session="squeezed", answer=squeezed[:40], content_encoding="gzip"
    )
    recording.recording_finish(
        spooled=spooled, answer_bytes=40, complete=False, cut="its caller left before the end"
    )
    recording.recordings_queued()
    recording.recordings_idle(30)
    [turn] = Turn.objects.filter(session__external_id="squeezed")
    assert turn.response is None
    assert [e["type"] for e in turn.events] == ["interrupted"]
    assert "after 40 bytes: its caller left before the end" in turn.events[0]["message"]
    assert not UnreadCall.objects.exists()


@pytest.mark.parametrize("streamed", [False, True], ids=["declared length", "stream"])
def test_queueing_a_call_cut_after_a_big_answer_reads_no_more_than_its_tail(
    project: Project, monkeypatch: pytest.MonkeyPatch, streamed: bool
) -> None:
    # Whether a cut answer is whole after all is asked in the web process for every call cut
    # short: a caller that leaves after 40 MB must not make it read 40 MB.
    spooled = spool(project, ["Build it."], session="big-cut", answer=b"", streamed=streamed)
    os.truncate(recording.answer_path(spooled.spool), 40 * 1024 * 1024)
    monkeypatch.setattr(recording, "recordings_dispatch", lambda lane, again=False: None)
    tracemalloc.start()
    try:
        recording.recording_finish(
            spooled=spooled, answer_bytes=40 * 1024 * 1024, complete=False, cut="a test"
        )
        recording.recordings_queued()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * 1024 * 1024, peak
    [pending] = PendingCall.objects.filter(spool=spooled.spool)
    assert pending.call["cut"] is True  # not whole: neither its declared length nor a stream's end


def test_a_lanes_calls_are_recorded_in_the_order_they_were_queued(project: Project) -> None:
    history = ["Build it."]
    for n in range(6):
        enqueue(project, history)
        history = [*history, f"Step {n}."]
    recording.recordings_idle(60)
    session = Session.objects.get(project=project, external_id="queued")
    # one conversation growing call by call: each turn extends the one before
    assert session.turns.count() == 6
    assert UnreadCall.objects.filter(project=project).count() == 0


def test_two_recorders_never_hold_one_lane_and_a_dead_recorders_lease_ends(
    project: Project, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(recording, "recordings_dispatch", lambda lane: None)  # no recorder runs
    first = PendingCall.objects.get(spool=enqueue(project, ["One."])).pk
    enqueue(project, ["One.", "Two."])
    lane = PendingCall.objects.get(pk=first).lane
    held = recording._claim(lane)
    assert held is not None
    assert held.pk == first
    assert recording._claim(lane) is None  # the lane is held: not even the next call
    # the recorder died: once its lease is over, the call is taken up again
    settings.CTXWEB_RECORDING_LEASE = 60
    PendingCall.objects.filter(pk=first).update(claimed_at=timezone.now() - timedelta(seconds=120))
    again = recording._claim(lane)
    assert again is not None
    assert again.pk == first
    assert again.attempts == 2


def test_a_recorder_lets_other_lanes_go_after_its_slice(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    dispatched: list[str] = []
    monkeypatch.setattr(recording, "recordings_dispatch", dispatched.append)
    for n in range(3):
        enqueue(project, ["A", *[f"a{i}" for i in range(n)]], session="busy")
    enqueue(project, ["B"], session="quiet")
    busy = PendingCall.objects.filter(lane__endswith=":s:busy").first()
    assert busy is not None
    dispatched.clear()
    # a slice of no time: one call recorded, then the lane goes to the back of the queue
    assert recording.recordings_drain(busy.lane, seconds=0) == 1
    assert dispatched == [busy.lane]
    assert PendingCall.objects.filter(lane=busy.lane).count() == 2


def test_a_call_past_the_queues_bound_is_kept_visible_not_lost(
    project: Project, settings: Any
) -> None:
    settings.CTXWEB_RECORDING_PROJECT_BYTES = 10
    name = enqueue(project, ["Too much."], session="bounded")
    assert not PendingCall.objects.filter(spool=name).exists()
    unread = UnreadCall.objects.get(project=project)
    assert "CTXWEB_RECORDING_PROJECT_BYTES" in unread.error
    assert unread.external_id == "bounded"
    assert not recording.answer_path(name).exists()


def test_a_session_past_its_share_of_the_queue_leaves_the_projects_others_recorded(
    project: Project, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(recording, "recordings_dispatch", lambda lane: None)  # nothing drained
    first = enqueue(project, ["A first call."], session="bursting")
    size = PendingCall.objects.get(spool=first).size
    settings.CTXWEB_RECORDING_LANE_BYTES = size + 10  # room for the first call only
    second = enqueue(project, ["A second call."], session="bursting")
    other = enqueue(project, ["Another session's call."], session="quiet")
    assert not PendingCall.objects.filter(spool=second).exists()
    assert PendingCall.objects.filter(spool=other).exists()
    unread = UnreadCall.objects.get(project=project)
    assert "CTXWEB_RECORDING_LANE_BYTES" in unread.error
    assert unread.external_id == "bursting"


def test_a_call_that_keeps_failing_becomes_an_unread_call_with_its_error(
    project: Project, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.CTXWEB_RECORDING_ATTEMPTS = 2

    def broken(**call: Any) -> None:
        raise RuntimeError("the database went away")

    monkeypatch.setattr(recording, "proxy_record", broken)
    enqueue(project, ["Hello."], session="failing")
    recording.recordings_idle(30)
    unread = UnreadCall.objects.get(project=project)
    assert "recording failed 2 times" in unread.error
    assert "the database went away" in unread.error
    assert json.loads(bytes(unread.request_body))["messages"][0]["content"] == "Hello."


def recorders(parent: int) -> list[tuple[int, list[bytes]]]:
    """The recorder processes web process ``parent`` started: pid and command line each."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"record_calls" in argv and str(parent).encode() in argv:
            found.append((int(entry.name), argv))
    return found


def dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_the_sweep_records_a_whole_answer_its_dead_relay_left_and_drops_a_cut_one(
    project: Project,
) -> None:
    """A relay that dies leaves its call's files and no row: the sweep adds the row, then
    records the call when its answer had been relayed whole and drops it when not."""
    whole = spool(project, ["Kept."], session="crashed").spool
    cut = spool(project, ["Cut."], session="cut", answer=json.dumps(ANSWER).encode()[:20]).spool
    alive = spool(project, ["Still relaying."], session="alive").spool
    left_by_a_dead_relay(whole)
    left_by_a_dead_relay(cut)
    try:
        assert not PendingCall.objects.exists()
        counts = recording.recordings_sweep()
        assert (counts["recovered"], counts["dropped"]) == (1, 1)
        recording.recordings_idle(30)
        assert Session.objects.get(project=project, external_id="crashed").turns.count() == 1
        assert not recording.call_path(whole).exists()
        assert not Session.objects.filter(project=project, external_id="cut").exists()
        assert not recording.answer_path(cut).exists()
        assert not recording.call_path(cut).exists()
        # a call whose relaying process is alive (this one) is left to it
        assert recording.call_path(alive).exists()
        assert recording.answer_path(alive).exists()
    finally:
        recording._files_remove(alive)


# --- a live server killed between relaying a call and queueing it -------------------------------

EVENTS: list[dict[str, Any]] = [
    {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "Do"}}]},
    {"choices": [{"index": 0, "delta": {"content": "ne."}, "finish_reason": "stop"}]},
    {"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11}},
]


class HoldingUpstream(BaseHTTPRequestHandler):
    """Streams a whole chat completion, ``[DONE]`` included, then holds the stream open (as an
    upstream slow to close it): the relay has relayed every event but not reached the end."""

    protocol_version = "HTTP/1.1"
    release = threading.Event()

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        for event in EVENTS:
            base = {"id": "c1", "object": "chat.completion.chunk", "model": "gpt-4o"}
            self._chunk(f"data: {json.dumps({**base, **event})}\n\n".encode())
        self._chunk(b"data: [DONE]\n\n")
        self.release.wait(60)
        self._chunk(b"")

    def _chunk(self, data: bytes) -> None:
        try:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()
        except OSError:
            pass


@pytest.fixture
def holding_upstream() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), HoldingUpstream)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        HoldingUpstream.release.set()
        server.shutdown()
        HoldingUpstream.release.clear()


def wait(
    check: Callable[[], Any], what: str, seconds: float = 60, detail: Callable[[], str] = str
) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.2)
    pytest.fail(f"{what}: not within {seconds}s\n{detail()}")


@pytest.mark.slow
def test_a_call_relayed_whole_before_the_server_was_killed_is_recorded_by_the_next_one(
    tmp_path: Path, holding_upstream: str
) -> None:
    env = embedded_env(tmp_path, CTXWEB_UPSTREAM_OPENAI=holding_upstream)
    key = create_key(env, role="operator")
    payload = {
        "model": "gpt-4o",
        "stream": True,
        "messages": [{"role": "user", "content": "Build it."}],
    }
    headers = {"X-Ctxweb-Key": key, "X-Ctxweb-Session": "killed", "Authorization": "Bearer sk"}
    with live_server(env) as first:
        port = first.port
        assert port is not None
        with httpx.stream(
            "POST",
            f"{first.url}/proxy/openai/v1/chat/completions",
            json=payload,
            headers=headers,
            timeout=30,
        ) as answer:
            received = b""
            for chunk in answer.iter_raw():
                received += chunk
                if b"[DONE]" in received:
                    break
            # every event is relayed; the upstream holds its stream open: kill the server now,
            # and its recorders (which would go on recording what waits: the machine is gone)
            os.killpg(first.process.pid, signal.SIGKILL)
            for pid, _ in recorders(first.process.pid):
                os.kill(pid, signal.SIGKILL)
            first.process.wait(timeout=30)
    spooled = list((tmp_path / "recordings").glob("*.answer"))
    assert spooled, "the answer was written first"
    assert b"[DONE]" in spooled[0].read_bytes()
    with live_server(env, port=port) as second:
        found = wait(
            lambda: (
                lambda r: r.json() if r.status_code == 200 and r.json()["turn_count"] else None
            )(
                httpx.get(
                    f"{second.url}/api/v1/sessions/killed",
                    headers={"Authorization": f"Bearer {key}"},
                    timeout=30,
                )
            ),
            "the killed server's call recorded by its successor",
            detail=lambda: second.output,
        )
        assert found["turn_count"] == 1
    assert not list((tmp_path / "recordings").glob("*.answer"))


def test_the_recorder_process_records_every_lane_then_ends_when_told(
    project: Project, settings: Any
) -> None:
    """``manage.py record_calls`` (the embedded shape's recorder process), run to completion:
    nothing is dispatched to it, it finds the waiting lanes by itself."""
    from django.core.management import call_command

    settings.CTXWEB_RECORDER = "process"
    enqueue(project, ["Hello."], session="one")
    enqueue(project, ["Hello.", "Again."], session="one")
    enqueue(project, ["Hello."], session="two")
    assert PendingCall.objects.count() == 3
    out = io.StringIO()
    call_command("record_calls", once=True, stdout=out)
    assert not PendingCall.objects.exists()
    assert Session.objects.get(project=project, external_id="one").turns.count() == 2
    assert Session.objects.get(project=project, external_id="two").turns.count() == 1
    assert out.getvalue().strip() == "3 calls recorded"


def test_the_proxys_memory_is_forgotten_after_its_time(project: Project) -> None:
    from ctxweb.contexts.models import ProxyConversation, ProxyMainCalls
    from ctxweb.contexts.services import proxying

    now = timezone.now()
    old = now - timedelta(seconds=proxying.RECENT_SECONDS + 60)
    stale = proxying._prefix_digests(("m1",))[-1]
    fresh = proxying._prefix_digests(("m2",))[-1]
    ProxyConversation.objects.create(key_id=1, digest=stale, external_id="old", remembered_at=old)
    ProxyConversation.objects.create(key_id=1, digest=fresh, external_id="new", remembered_at=now)
    ProxyMainCalls.objects.create(
        key_id=1, external_id="s", tools=True, system="x", remembered_at=old
    )
    # a conversation an hour old is not joined any more, even before the sweep forgets it
    assert proxying._joined(1, ("m1", "next")) is None
    assert proxying._joined(1, ("m2", "next")) == "new"
    assert proxying._joined(2, ("m2", "next")) is None  # another key's
    assert proxying.proxy_memory_expire() == 1
    assert list(ProxyConversation.objects.values_list("digest", flat=True)) == [fresh]
    assert ProxyMainCalls.objects.count() == 1  # main calls are kept for a day


def test_the_small_calls_recorder_leaves_a_lane_whose_next_call_is_big(
    project: Project, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A big call (seconds to record when it is tens of MB) never holds back the small lanes:
    the first recorder process records small calls only, and leaves big ones to the others,
    which take big lanes first."""
    monkeypatch.setattr(recording, "recordings_dispatch", lambda lane: None)
    settings.CTXWEB_RECORDING_BIG_BYTES = 2000
    enqueue(project, ["Build it. " + "x" * 4000], session="big")
    enqueue(project, ["Build it. " + "x" * 4000, "Small after it."], session="big")
    enqueue(project, ["Hello."], session="small")
    enqueue(project, ["Hello.", "Again."], session="small")
    big = PendingCall.objects.filter(lane__endswith=":s:big").first()
    small = PendingCall.objects.filter(lane__endswith=":s:small").first()
    assert big is not None
    assert small is not None
    assert recording.lanes_waiting(small_only=True) == [small.lane]
    assert recording.lanes_waiting() == [big.lane, small.lane]
    assert recording.recordings_drain(big.lane, small_only=True) == 0
    assert recording.recorder_loop(once=True, small_only=True) == 2
    assert Session.objects.get(project=project, external_id="small").turns.count() == 2
    assert not Session.objects.filter(project=project, external_id="big").exists()
    assert PendingCall.objects.filter(lane=big.lane, state=PendingCall.PENDING).count() == 2
    # another recorder takes the big call alone, then the small one behind it, in order
    held = recording._claim_batch(big.lane)
    assert [c.pk for c in held] == [big.pk]
    recording._release(held)
    assert PendingCall.objects.get(pk=big.pk).attempts == 0  # given back: not an attempt
    assert recording.recorder_loop(once=True) == 2
    turns = Session.objects.get(project=project, external_id="big").turns.order_by("index")
    assert [t.message_count for t in turns] == [1, 3]


def test_a_lanes_small_calls_are_claimed_together_and_a_failure_holds_the_rest(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(recording, "recordings_dispatch", lambda lane: None)
    history = ["One."]
    for n in range(4):
        enqueue(project, history, session="batched")
        history = [*history, f"Next {n}."]
    lane = PendingCall.objects.get(spool=enqueue(project, history, session="batched")).lane
    claimed = recording._claim_batch(lane)
    assert len(claimed) == 5
    assert recording._claim_batch(lane) == []  # held by this recorder
    recording._release(claimed)
    real = recording.proxy_record
    failed: list[int] = []

    def failing_once(**call: Any) -> Any:
        if len(json.loads(call["request_body"])["messages"]) == 5 and not failed:
            failed.append(1)
            raise RuntimeError("the database went away")
        return real(**call)

    monkeypatch.setattr(recording, "proxy_record", failing_once)
    assert recording.recordings_drain(lane, seconds=30) == 5
    assert failed == [1]
    # the failed third call was tried again before the fourth and fifth: one conversation
    turns = Session.objects.get(project=project, external_id="batched").turns.order_by("index")
    assert [t.message_count for t in turns] == [1, 3, 5, 7, 9]
    assert not UnreadCall.objects.exists()


def test_a_turns_messages_are_counted_before_its_transaction_opens(
    project: Project, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite's write transaction locks the whole database: a 24 MB message counted inside it
    held every other recorder and the relay's queueing for seconds."""
    from django.db import connection

    from ctxweb.contexts.services import ingest

    monkeypatch.setattr(recording, "recordings_dispatch", lambda lane: None)
    settings.CTXWEB_RECORDING_BIG_BYTES = 100  # these calls are big (small ones: one transaction)
    real = ingest._guessed_plan
    planned: list[bool] = []

    def watched(*args: Any) -> Any:
        planned.append(connection.in_atomic_block)
        return real(*args)

    monkeypatch.setattr(ingest, "_guessed_plan", watched)
    enqueue(project, ["One."], session="planned")
    enqueue(project, ["One.", "Two."], session="planned")
    assert recording.recorder_loop(once=True) == 2
    assert planned == [False]  # the second turn's plan, from the first one's messages


def test_a_servers_recorder_processes_run_at_a_lower_priority(tmp_path: Path) -> None:
    """The embedded shape's two recorder processes: the first records small calls only; both
    run niced by CTXWEB_BACKGROUND_NICE below the web process."""
    env = embedded_env(tmp_path, CTXWEB_BACKGROUND_NICE="7")

    def nice(pid: int) -> int:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[16])

    with live_server(env) as server:
        web = nice(server.process.pid)
        # each lowers its priority as it starts: waited for (never: the test fails)
        running = wait(
            lambda: (
                lambda r: r if len(r) == 2 and all(nice(pid) == web + 7 for pid, _ in r) else None
            )(recorders(server.process.pid)),
            "two recorder processes, niced by 7",
            detail=lambda: f"{recorders(server.process.pid)}\n{server.output}",
        )
        assert sorted(b"--small-only" in argv for _, argv in running) == [False, True]


def test_a_recorder_whose_web_process_is_gone_records_what_waits_then_ends(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A killed server's recorders go on while it is started again (seconds under load): the
    queue does not stall; they end once nothing waits."""
    monkeypatch.setattr(recording, "recordings_dispatch", lambda lane: None)
    enqueue(project, ["Hello."], session="orphaned")
    enqueue(project, ["Hello.", "Again."], session="orphaned")
    gone = dead_pid()
    assert os.getppid() != gone
    assert recording.recorder_loop(parent=gone) == 2
    assert Session.objects.get(project=project, external_id="orphaned").turns.count() == 2
    assert not PendingCall.objects.exists()


def test_a_small_calls_turn_and_its_queue_row_go_in_one_transaction(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite's write lock taken once per small call; and no turn is left without the rest of
    its recording (a failure after the turn's insert rolls the turn back: the call is kept as
    an unread call, not recorded half)."""
    from ctxweb.contexts.services import proxying

    monkeypatch.setattr(recording, "recordings_dispatch", lambda lane: None)
    enqueue(project, ["Hello."], session="whole")

    def broken(*args: Any) -> None:
        raise RuntimeError("the disk is full")

    monkeypatch.setattr(proxying, "_remember_sql", broken)
    assert recording.recorder_loop(once=True) == 1
    assert not Session.objects.filter(project=project, external_id="whole", turns__isnull=False)
    unread = UnreadCall.objects.get(project=project)
    assert "the disk is full" in unread.error
    assert not PendingCall.objects.exists()


def test_calls_finished_together_are_queued_in_one_statement_in_order(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The web process queues the calls waiting on a shard together: one insert (SQLite's
    write lock taken once, beside every other writer), the lane's order kept."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    monkeypatch.setattr(recording, "recordings_dispatch", lambda lane: None)
    history = ["One."]
    spooled = []
    for n in range(3):
        spooled.append(spool(project, history, session="together"))
        history = [*history, f"Next {n}."]
    calls = [
        {
            "project_id": s.project_id,
            "key_id": s.key_id,
            "spool": s.spool,
            "call": s.call,
            "request_bytes": s.request_bytes,
            "answer_bytes": recording.answer_path(s.spool).stat().st_size,
            "complete": True,
        }
        for s in spooled
    ]
    with CaptureQueriesContext(connection) as queries:
        assert recording.recordings_queue(calls) == [True, True, True]
    inserts = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("INSERT")]
    assert len(inserts) == 1
    rows = list(PendingCall.objects.order_by("pk").values_list("spool", flat=True))
    assert rows == [s.spool for s in spooled]
    assert recording.recorder_loop(once=True) == 3
    turns = Session.objects.get(project=project, external_id="together").turns.order_by("index")
    assert [t.message_count for t in turns] == [1, 3, 5]


def test_a_sweep_between_a_calls_recording_and_its_files_removal_does_not_take_it_up_again(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A recorder that has recorded a call removes what the call is with its row: a sweep
    that lists the spool folder right then (its relay dead) no longer queues it again."""
    monkeypatch.setattr(recording, "recordings_dispatch", lambda lane: None)
    name = enqueue(project, ["Hello."], session="once")
    left_by_a_dead_relay(name)
    remove = recording._files_remove

    def swept_first(spool: str) -> None:
        recording._adopt_unqueued()  # the sweep of another recorder, at the worst moment
        remove(spool)

    monkeypatch.setattr(recording, "_files_remove", swept_first)
    assert recording.recorder_loop(once=True) == 1
    assert not PendingCall.objects.exists()
    assert Session.objects.get(project=project, external_id="once").turns.count() == 1


def test_two_sweeps_at_once_queue_a_call_a_dead_relay_left_once(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both recorders of a web process sweep as they start: each lists the spool folder, finds
    the call a killed relay left without its row and queues it. One row a call: the second
    sweep's is refused, and the call is one turn, with no false unread call ("the recording's
    files are gone", once the first row's recording removed them), as the hostile benchmark
    saw for every call in flight at the kill."""
    monkeypatch.setattr(recording, "recordings_dispatch", lambda lane: None)
    name = spool(project, ["Hello."], session="crashed").spool
    left_by_a_dead_relay(name)
    gone = recording._holder_gone
    other_sweeps: list[bool] = []

    def another_sweep_meanwhile(pending: Any, **how: Any) -> bool:
        if not other_sweeps:  # after this sweep listed the queue, before it adds the row
            other_sweeps.append(True)
            recording._adopt_unqueued()
        return gone(pending, **how)

    monkeypatch.setattr(recording, "_holder_gone", another_sweep_meanwhile)
    counts = recording.recordings_sweep()
    assert other_sweeps
    assert list(PendingCall.objects.values_list("spool", flat=True)) == [name]
    assert counts["recovered"] == 1
    assert recording.recorder_loop(once=True) == 1
    assert Session.objects.get(project=project, external_id="crashed").turns.count() == 1
    assert not UnreadCall.objects.exists()
    assert not PendingCall.objects.exists()


def test_the_migration_to_one_row_a_call_drops_rows_queued_twice(project: Project) -> None:
    """A database where a call was queued twice before the constraint: the migration keeps the
    first row of each call and adds the constraint."""
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    before = [("contexts", "0014_session_attributed_turns")]
    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes()  # 0015_pending_call_spool_unique and on
    executor.migrate(before)
    try:
        old = executor.loader.project_state(before).apps.get_model("contexts", "PendingCall")
        fields = {"project_id": project.pk, "key_id": 1, "lane": "l", "owner": "h:1"}
        first = old.objects.create(spool="twice", **fields)
        old.objects.create(spool="twice", **fields)
        other = old.objects.create(spool="once", **fields)
    finally:
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(latest)
    assert sorted(PendingCall.objects.values_list("pk", flat=True)) == [first.pk, other.pk]
