"""The development server (`make run`: runserver with DEBUG on) prints each log line once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from tests.support.servers import ROOT, embedded_env, free_port, manage


def test_the_development_server_prints_a_requests_log_line_once(tmp_path: Path) -> None:
    env = embedded_env(tmp_path, DEBUG="1")
    manage(env, "migrate", "--noinput")
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), "runserver", f"127.0.0.1:{port}", "--noreload"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/health", timeout=5):
                    break
            except (urllib.error.URLError, ConnectionError):
                assert server.poll() is None, server.communicate()[0]
                assert time.monotonic() < deadline, "the server did not answer"
                time.sleep(0.2)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/health?once", timeout=5):
            pass
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/no-such-page", timeout=5)
        except urllib.error.HTTPError as missing:
            status = missing.code
        assert status == 404
    finally:
        os.killpg(server.pid, signal.SIGINT)
        output = server.communicate(timeout=30)[0]
    lines = output.splitlines()
    assert sum('"GET /api/v1/health?once HTTP/1.1" 200' in line for line in lines) == 1, output
    assert "Traceback" not in output, output
    # Django's own loggers too (the request's warning)
    assert sum(line == "Not Found: /no-such-page" for line in lines) == 1, output
