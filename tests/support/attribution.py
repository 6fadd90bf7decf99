"""A small session for the attribution pages' tests: four tool calls (a file read twice, an MCP
tool, a tool with a hostile name) posted through the REST ingest, and readers of their CSV."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from rest_framework.test import APIClient

HOSTILE = "<script>alert(1)</script>"
SOURCE = "def main() -> None:\n    print('hello')\n" * 20


def tool(name: str) -> dict[str, Any]:
    return {"name": name, "description": f"The {name} tool.", "input_schema": {"type": "object"}}


TOOLS = [tool("Read"), tool("mcp__github__get_issue"), tool(HOSTILE)]
ASK = {"role": "user", "content": "Fix app.py, then check the issue."}


def call(call_id: str, name: str, args: dict[str, Any], output: str) -> list[dict[str, Any]]:
    use = {"type": "tool_use", "id": call_id, "name": name, "input": args}
    result = {"type": "tool_result", "tool_use_id": call_id, "content": output}
    return [{"role": "assistant", "content": [use]}, {"role": "user", "content": [result]}]


def body(*messages: dict[str, Any], model: str = "claude-sonnet-4-5") -> dict[str, Any]:
    request = {
        "model": model,
        "max_tokens": 1024,
        "system": "You are a coding agent.",
        "tools": TOOLS,
        "messages": list(messages),
    }
    return {"format": "anthropic-messages", "request": request}


def post(client: APIClient, external_id: str, data: dict[str, Any]) -> None:
    response = client.post(
        f"/api/v1/sessions/{external_id}/turns",
        data=json.dumps(data),
        content_type="application/json",
    )
    assert response.status_code == 201, response.content


def four_turns(
    client: APIClient, external_id: str = "s1", model: str = "claude-sonnet-4-5"
) -> None:
    """Read app.py, call an MCP tool and the hostile tool, then read app.py again."""
    steps = [
        call("r1", "Read", {"file_path": "/repo/app.py"}, SOURCE),
        call("g1", "mcp__github__get_issue", {"number": 7}, "Issue 7: the build is red. " * 30),
        call("h1", HOSTILE, {"q": HOSTILE}, f"{HOSTILE} output " * 40),
        call("r2", "Read", {"file_path": "/repo/app.py"}, SOURCE),
    ]
    messages: list[dict[str, Any]] = [ASK]
    for step in steps:
        messages.extend(step)
        post(client, external_id, body(*messages, model=model))


def rows_of(content: bytes) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(content.decode())))


def as_text(value: Any) -> str:
    if isinstance(value, list):
        return " ".join(str(v) for v in value)
    text = "" if value is None else str(value)
    return "'" + text if text.startswith(("=", "+", "-", "@", "\t", "\r")) else text
