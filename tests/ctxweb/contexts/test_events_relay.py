"""The relay of live events from the embedded shape's other processes to its web process
(:mod:`ctxweb.contexts.events_relay`); end to end, with a recorder process and a browser, in
``tests/ctxweb/front/test_browser_live_recorded.py``."""

from __future__ import annotations

import json
import logging
import os
import queue
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from ctxweb.contexts import events_relay as relay

pytestmark = pytest.mark.skipif(not hasattr(socket, "AF_UNIX"), reason="Unix sockets only")


@pytest.fixture
def listening(tmp_path: Path) -> Any:
    """A reader of the relay on a socket of the test's own: the events it delivered."""
    path = str(tmp_path / "events.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    listener.bind(path)
    delivered: queue.Queue[tuple[str, dict[str, Any], str]] = queue.Queue()
    reader = threading.Thread(
        target=relay._read,
        args=(listener, lambda *event: delivered.put(event)),
        daemon=True,
    )
    reader.start()
    yield path, delivered
    listener.close()


def test_an_event_sent_is_delivered_as_published(listening: Any) -> None:
    path, delivered = listening
    event = {"type": "turn.created", "turn": {"index": 3, "regions": {"system": 12}}}
    assert relay.relay_send(path, "session-7", event, "session.event")
    assert delivered.get(timeout=5) == ("session-7", event, "session.event")
    assert relay.relay_send(path, "user-2", {"type": "access.changed"}, "access.changed")
    assert delivered.get(timeout=5) == ("user-2", {"type": "access.changed"}, "access.changed")


def test_broken_or_misdirected_datagrams_are_dropped_and_the_reader_goes_on(
    listening: Any, caplog: pytest.LogCaptureFixture
) -> None:
    path, delivered = listening
    sender = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    for data in (
        b"not json",
        b"[]",
        json.dumps({"group": "session-1", "kind": "session.event"}).encode(),  # no event
        json.dumps({"group": "session-1", "kind": "other.kind", "event": {}}).encode(),
        # a kind sent to another kind's groups
        json.dumps({"group": "user-1", "kind": "session.event", "event": {}}).encode(),
        json.dumps({"group": "session-1", "kind": "session.event", "event": []}).encode(),
    ):
        sender.sendto(data, path)
    with caplog.at_level(logging.WARNING, logger="ctxweb.contexts.events_relay"):
        assert relay.relay_send(path, "session-1", {"type": "turn.created"}, "session.event")
        assert delivered.get(timeout=5) == ("session-1", {"type": "turn.created"}, "session.event")
    assert delivered.empty()
    assert caplog.text.count("a broken event was dropped") == 6


def test_an_event_nobody_can_take_is_dropped_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="ctxweb.contexts.events_relay"):
        # the web process is gone
        assert not relay.relay_send(str(tmp_path / "gone.sock"), "session-1", {}, "session.event")
        # too large for one datagram
        huge = {"type": "turn.created", "text": "x" * relay.DATAGRAM_MAX}
        assert not relay.relay_send(str(tmp_path / "gone.sock"), "session-1", huge, "session.event")
    assert "FileNotFoundError" in caplog.text
    assert "dropped" in caplog.text


def test_a_started_process_sends_its_events_to_the_listener_and_the_listener_keeps_its_own(
    tmp_path: Path,
) -> None:
    """A process started by the listening one inherits ``CTXWEB_LIVE_EVENTS`` and publishes
    through it (``ctxweb.contexts.events``); the listening process itself publishes to its own
    layer."""
    got: queue.Queue[tuple[str, dict[str, Any], str]] = queue.Queue()
    script = (
        "import django, os; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'ctxweb.settings'); "
        "django.setup(); from ctxweb.contexts import events; "
        "print(events.publish(41, {'type': 'turn.created', 'turn': {'index': 0}}))"
    )
    saved = os.environ.get(relay.ENVIRON)
    listening, relay._LISTENING = relay._LISTENING, None
    try:
        path = relay.relay_start(lambda *event: got.put(event))
        assert path is not None
        assert os.environ[relay.ENVIRON] == path
        assert relay.relay_target() is None  # the listener publishes to its own layer
        assert relay.relay_start(lambda *event: None) is None  # once a process
        env = {
            name: value
            for name, value in os.environ.items()
            if not name.startswith(("CTXWEB_", "DATABASE_URL", "REDIS_URL"))
        }
        env.update(
            {
                relay.ENVIRON: path,
                "CTXWEB_DATA_DIR": str(tmp_path / "data"),
                "DJANGO_SETTINGS_MODULE": "ctxweb.settings",
            }
        )
        done = subprocess.run(
            [sys.executable, "-c", script],
            env=env,
            cwd=Path(__file__).resolve().parents[3],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "True"
        assert got.get(timeout=10) == (
            "session-41",
            {"type": "turn.created", "turn": {"index": 0}},
            "session.event",
        )
    finally:
        relay._LISTENING = listening
        if saved is None:
            os.environ.pop(relay.ENVIRON, None)
        else:
            os.environ[relay.ENVIRON] = saved
