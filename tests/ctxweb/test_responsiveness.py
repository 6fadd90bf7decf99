"""One costly request never stalls the others: ``daphne`` serving the embedded shape answers the
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
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.servers import create_key, daphne, embedded_env

KEYWORDS = "error failed tool call result must decided chosen "


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """daphne in the embedded shape, and an operator key."""
    env = embedded_env(tmp_path_factory.mktemp("responsive"))
    key = create_key(env)
    with daphne(env) as server:
        yield server.url, key


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
