"""One costly request never stalls the others: ``daphne`` serving the embedded shape answers the
health check while the costliest legal preview runs beside it.

The preview is ``llm4s-pipeline`` on 20 MB of keywords and varied words with no full stop, the
input that took LLM4S's digest patterns quadratic time and held the interpreter for minutes
(issue 17); linear now, it still takes seconds to parse, count and plan. The test checks order,
not speed: the health check must come back while the preview is still running.
"""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
KEYWORDS = "error failed tool call result must decided chosen "


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(url, operator key) of daphne on the embedded shape with its own data folder."""
    data = tmp_path_factory.mktemp("responsive")
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "REDIS_URL") and not k.startswith(("CTXWEB_", "DJANGO_"))
    }
    env.update(CTXWEB_DATA_DIR=str(data), DJANGO_SETTINGS_MODULE="ctxweb.settings", DEBUG="0")
    script = (
        "import io; from django.core.management import call_command; out = io.StringIO(); "
        "call_command('migrate', verbosity=0); call_command('create_project', 'p'); "
        "call_command('create_api_key', project='p', role='operator', stdout=out); "
        "print(out.getvalue().strip().splitlines()[-1])"
    )
    made = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert made.returncode == 0, made.stderr
    key = made.stdout.strip().splitlines()[-1]
    port = _free_port()
    log = (data / "daphne.log").open("wb")
    daphne = str(Path(sys.executable).with_name("daphne"))
    server = subprocess.Popen(
        [daphne, "-b", "127.0.0.1", "-p", str(port), "ctxweb.asgi:application"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/api/v1/health", timeout=2):
                    break
            except OSError:
                assert server.poll() is None, (data / "daphne.log").read_text()[-3000:]
                assert time.monotonic() < deadline, "daphne did not start within 60 s"
                time.sleep(0.2)
        yield url, key
    finally:
        server.terminate()
        server.wait(timeout=15)
        log.close()


def test_the_health_check_answers_while_the_costliest_preview_runs(
    live: tuple[str, str],
) -> None:
    url, key = live
    rng = random.Random(17)
    vocabulary = [*KEYWORDS.split(), *(f"w{n}" for n in range(5_000))]
    words = " ".join(rng.choices(vocabulary, k=1_000_000))  # about 6 MB, no full stop
    body = {
        "format": "openai-chat",
        "request": {
            "model": "gpt-4o",
            "messages": [
                {"role": "user", "content": words},
                {"role": "assistant", "content": words[::-1]},
                {"role": "user", "content": words.upper()},
                {"role": "assistant", "content": "ok"},
                {"role": "user", "content": "go on"},
            ],
        },
        "strategy": "llm4s-pipeline",
        "params": {"context_window": 2000},
    }
    preview: dict[str, Any] = {}

    def run_preview() -> None:
        request = urllib.request.Request(
            f"{url}/api/v1/preview",
            data=json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=300) as response:
                preview["status"] = response.status
        except urllib.error.HTTPError as error:
            preview["status"] = error.code
            preview["body"] = error.read()[:2000]

    runner = threading.Thread(target=run_preview)
    runner.start()
    time.sleep(1.0)  # the body is sent and the server is planning
    assert runner.is_alive(), f"the preview finished before the health check was sent: {preview}"
    with urllib.request.urlopen(f"{url}/api/v1/health", timeout=300) as response:
        assert response.status == 200
    answered_first = runner.is_alive()
    runner.join(300)
    assert preview.get("status") in (200, 422), preview  # planned, or stopped at its budget
    assert answered_first, "the health check waited for the preview to finish"
