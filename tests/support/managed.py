"""What the managed-mode tests share: a long tool output that compacts well, the REST API called
with a key over a live server, and waiting for what the recorder writes after the answer."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any

OUTPUT = "".join(f"line {n}: building src/module_{n % 7}.py ... ok\n" for n in range(600))


def call_api(url: str, key: str, method: str, path: str, body: Any = None) -> Any:
    request = urllib.request.Request(
        f"{url}/api/v1/{path}",
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())


def wait(check: Any, what: str) -> Any:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            value = check()
        except urllib.error.HTTPError as error:  # not recorded yet: recording follows the answer
            if error.code != 404:
                raise
            value = None
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"{what}: not within 60 s")
