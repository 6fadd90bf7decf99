"""One costly request never stalls the others: uvicorn serving the embedded shape answers the
health check while the costliest legal preview runs beside it.

The preview is ``llm4s-pipeline`` on 20 MB of keywords and varied words with no full stop, the
input that took LLM4S's digest patterns quadratic time and held the interpreter for minutes
(issue 17); linear now, it still takes seconds to parse, count and plan. The test checks order,
not speed: the health check must come back while the preview is still running.
"""

from __future__ import annotations

import json
import random
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.servers import LiveServer, create_key, embedded_env, live_server

pytestmark = pytest.mark.embedded_server

KEYWORDS = "error failed tool call result must decided chosen "


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, LiveServer]]:
    """A live server (uvicorn) in the embedded shape, an operator key, and the server (its
    output)."""
    env = embedded_env(tmp_path_factory.mktemp("responsive"))
    key = create_key(env)
    with live_server(env) as server:
        yield server.url, key, server


def test_the_health_check_answers_while_the_costliest_preview_runs(
    live: tuple[str, str, LiveServer],
) -> None:
    url, key, _ = live
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


def _request(url: str, key: str, method: str = "GET", payload: Any = None) -> int:
    request = urllib.request.Request(
        url,
        method=method,
        data=None if payload is None else json.dumps(payload).encode(),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            response.read()
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


def test_a_large_import_leaves_ingestion_and_reads_unaffected(
    live: tuple[str, str, LiveServer],
) -> None:
    """SQLite, one server process: a 3,000-turn transcript imports in the background (committed in
    chunks) while another session takes turns and the API is read; nothing waits for the
    import's write lock long enough to fail."""
    url, key, server = live
    messages: list[dict[str, Any]] = []
    for n in range(3_000):
        messages += [
            {"role": "user", "content": f"step {n}: read src/module_{n % 50}.py " + "x" * 150},
            {"role": "assistant", "content": f"done with step {n}"},
        ]
    data = json.dumps([{"id": "big-import", "messages": messages}]).encode()
    boundary = "ctxweb-test-boundary"
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="background"\r\n\r\ntrue\r\n'
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.json"\r\n'
            "Content-Type: application/json\r\n\r\n"
        ).encode()
        + data
        + f"\r\n--{boundary}--\r\n".encode()
    )
    request = urllib.request.Request(
        f"{url}/api/v1/import",
        data=body,
        method="POST",
        headers={
            "Authorization": f"Bearer {key}",
            "Content-Type": f"multipart/form-data; boundary={boundary}",
        },
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        assert response.status == 202
        job_url = url + json.loads(response.read())["url"]

    def job() -> dict[str, Any]:
        with urllib.request.urlopen(
            urllib.request.Request(job_url, headers={"Authorization": f"Bearer {key}"}), timeout=60
        ) as answer:
            return dict(json.loads(answer.read()))

    statuses: list[tuple[str, int]] = []
    during = 0
    conversation: list[dict[str, Any]] = []
    deadline = time.monotonic() + 300
    while job()["status"] in ("queued", "running"):
        assert time.monotonic() < deadline, "the import did not finish within 300 s"
        conversation += [
            {"role": "user", "content": f"question {during}"},
            {"role": "assistant", "content": f"answer {during}"},
        ]
        turn = {"format": "openai-chat", "request": {"model": "gpt-4o", "messages": conversation}}
        statuses.append(
            ("POST turns", _request(f"{url}/api/v1/sessions/beside/turns", key, "POST", turn))
        )
        statuses.append(("GET sessions", _request(f"{url}/api/v1/sessions", key)))
        statuses.append(("GET turns", _request(f"{url}/api/v1/sessions/beside/turns", key)))
        during += 1
    finished = job()
    assert finished["status"] == "succeeded", finished
    assert finished["sessions"][0]["turns"] == 3_000
    assert during >= 1, "the import finished before anything ran beside it"
    failed = [(n, what, status) for n, (what, status) in enumerate(statuses) if status >= 300]
    errors = [n for n, line in enumerate(server.lines) if "Traceback" in line or "ERROR" in line]
    shown = server.lines[errors[0] : errors[0] + 80] if errors else server.lines[-80:]
    assert not failed, (failed, "\n".join(shown))
