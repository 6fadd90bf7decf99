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


def operation_applied(
    url: str, key: str, session: str, strategy: str, params: dict[str, Any]
) -> dict[str, Any]:
    """``strategy`` applied to ``session`` through the API, waited for: the operation, which
    succeeded."""
    created = call_api(
        url, key, "POST", f"sessions/{session}/operations", {"strategy": strategy, "params": params}
    )
    operation: dict[str, Any] = wait(
        lambda: (lambda o: o if o["status"] in ("succeeded", "failed") else None)(
            call_api(url, key, "GET", f"operations/{created['id']}")
        ),
        "the operation",
    )
    assert operation["status"] == "succeeded", operation
    return operation


def build_calls(
    client: Any, stand_in: Any, *, calls: int = 4, after: Any = None
) -> list[dict[str, Any]]:
    """An ``openai`` agent's first ``calls`` calls: each answered with a ``build`` tool call
    (``stand_in`` says so), whose long output and a next user message the agent sends back in
    its next call; ``after(history)`` runs after each call. The history the agent holds."""
    history: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful coding agent."},
        {"role": "user", "content": "Build the project and fix what fails."},
    ]
    stand_in.then(*({"tool": "build", "arguments": {"step": n}} for n in range(calls)))
    for n in range(calls):
        answer = client.chat.completions.create(model="gpt-4o", messages=history)
        call = answer.choices[0].message.tool_calls[0]
        history += [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {
                            "name": call.function.name,
                            "arguments": call.function.arguments,
                        },
                    }
                ],
            },
            {"role": "tool", "tool_call_id": call.id, "content": f"build {n}\n{OUTPUT}"},
            {"role": "user", "content": f"Step {n + 1}: go on with the next part."},
        ]
        if after is not None:
            after(history)
    return history
