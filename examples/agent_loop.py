"""An agent loop that reports every model call to ctxweb and continues from its managed context.

The whole cycle, with the OpenAI Chat Completions request shape:

1. build a chat request (system prompt, tools, messages, max_tokens) and call the model;
2. post the request, the response and the usage to ``POST /api/v1/sessions/{id}/turns``;
3. run the tool the model asked for and append its (large) output;
4. when the context passes a share of the window, apply a strategy
   (``POST /api/v1/sessions/{id}/operations``, operator key) and follow it
   (``GET /api/v1/operations/{op}``) -- an operator could equally press Apply on the preview page;
5. fetch ``GET /api/v1/sessions/{id}/context`` (with ``If-None-Match``) and continue from it: the
   next posted turn starts with the managed context, so ctxweb marks it with the operation.

No network is needed: unless ``OPENAI_API_KEY`` is set, a tiny local function stands in for the
model. Run it against ``make run``::

    CTXWEB_API_KEY=<the key make run printed> python examples/agent_loop.py --steps 12

Only the standard library talks to ctxweb; the ``openai`` package is imported only for a real
model.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.request
from typing import Any

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file of the repository.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    }
]
SYSTEM = "You are a careful coding agent. Read files with read_file before you change anything."


class Ctxweb:
    """A minimal ctxweb REST client (urllib only)."""

    def __init__(self, base_url: str, key: str) -> None:
        self.base_url = base_url.rstrip("/")
        self.key = key

    def call(
        self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
    ) -> tuple[int, Any, dict[str, str]]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            f"{self.base_url}/api/v1/{path}",
            data=data,
            method=method,
            headers={
                "Authorization": f"Bearer {self.key}",
                "Content-Type": "application/json",
                "Accept": "application/json",
                **(headers or {}),
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                raw = response.read()
                return response.status, json.loads(raw) if raw else None, dict(response.headers)
        except urllib.error.HTTPError as error:
            raw = error.read()
            if error.code == 304:
                return 304, None, dict(error.headers)
            detail = json.loads(raw) if raw.startswith(b"{") else raw.decode(errors="replace")
            raise SystemExit(f"ctxweb {method} {path}: {error.code} {detail}") from None


# --- the model --------------------------------------------------------------------------------


def fake_model(request: dict[str, Any], step: int) -> dict[str, Any]:
    """A stand-in for the model: asks for a file, then another, now and then says something."""
    prompt = sum(len(json.dumps(m)) for m in request["messages"]) // 4
    last = request["messages"][-1]
    if last["role"] == "tool" and step % 3 == 2:
        message: dict[str, Any] = {
            "role": "assistant",
            "content": f"Read {last['tool_call_id']}; the totals module needs a fix.",
        }
        finish = "stop"
    else:
        path = f"src/app/module_{step}.py"
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"call_{step}",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": json.dumps({"path": path})},
                }
            ],
        }
        finish = "tool_calls"
    return {
        "id": f"chatcmpl-fake-{step}",
        "object": "chat.completion",
        "model": request["model"],
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": 20, "total_tokens": prompt + 20},
    }


def openai_model(request: dict[str, Any], step: int) -> dict[str, Any]:
    from openai import OpenAI  # only with OPENAI_API_KEY set

    completion = OpenAI().chat.completions.create(**request)
    return completion.model_dump(exclude_none=True)


def read_file(path: str, step: int) -> str:
    """The tool: a big, plausible file (what fills agents' windows)."""
    lines = [f"# {path}", "from decimal import Decimal", ""]
    for n in range(400):
        lines.append(f"def total_{step}_{n}(items):  # line {n}")
        lines.append(f"    return sum(Decimal(i.amount) for i in items if i.kind == {n})")
    return "\n".join(lines)


# --- the loop ---------------------------------------------------------------------------------


def wait_for(client: Ctxweb, operation_id: int, timeout: float = 120) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        _, operation, _ = client.call("GET", f"operations/{operation_id}")
        stage = operation["progress"].get("stage", "")
        print(f"    operation {operation_id}: {operation['status']} ({stage})")
        if operation["status"] in ("succeeded", "failed"):
            return dict(operation)
        time.sleep(0.5)
    raise SystemExit(f"operation {operation_id} did not finish in {timeout}s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=os.environ.get("CTXWEB_URL", "http://127.0.0.1:8000"))
    parser.add_argument("--key", default=os.environ.get("CTXWEB_API_KEY", ""))
    parser.add_argument(
        "--operator-key",
        default=os.environ.get("CTXWEB_OPERATOR_KEY", ""),
        help="applies the strategy (default: --key, when it is an operator key)",
    )
    parser.add_argument("--session", default=f"agent-loop-{int(time.time())}")
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--model", default=os.environ.get("OPENAI_MODEL", "gpt-4o-mini"))
    parser.add_argument("--window", type=int, default=32_000, help="context window to report")
    parser.add_argument("--apply-at", type=float, default=0.6, help="share of the window")
    parser.add_argument("--strategy", default="ctxweb-auto")
    parser.add_argument(
        "--params", default="", help="strategy parameters as JSON (ctxweb-auto: the window)"
    )
    args = parser.parse_args()
    if not args.key:
        parser.error("set CTXWEB_API_KEY (make run prints the demo project's key) or pass --key")
    params = json.loads(args.params) if args.params else {}
    if args.strategy == "ctxweb-auto" and not args.params:
        params = {"context_window": args.window}  # plan for this window, not the default
    client = Ctxweb(args.url, args.key)
    operator = Ctxweb(args.url, args.operator_key or args.key)
    model = openai_model if os.environ.get("OPENAI_API_KEY") else fake_model

    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Find why the invoice totals are off by a cent and fix it."},
    ]
    etag = ""
    for step in range(args.steps):
        request = {"model": args.model, "messages": messages, "tools": TOOLS, "max_tokens": 1024}
        response = model(request, step)
        status, turn, _ = client.call(
            "POST",
            f"sessions/{args.session}/turns",
            {
                "format": "openai-chat",
                "request": request,
                "response": response,
                "usage": response.get("usage"),
                "turn_id": f"{args.session}-{step}",
                "context_window": args.window,
            },
        )
        marks = ", ".join(e["type"] for e in turn["events"]) or "-"
        print(
            f"turn {turn['index']}: {turn['total_tokens']} tokens"
            f" ({turn['usage_ratio']:.0%} of the window) events: {marks}"
        )
        assistant = response["choices"][0]["message"]
        messages = [*messages, assistant]
        for call in assistant.get("tool_calls") or []:
            path = json.loads(call["function"]["arguments"])["path"]
            output = read_file(path, step)
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": output})
        if not assistant.get("tool_calls"):
            messages.append({"role": "user", "content": "Keep going: read the next module."})

        if turn["usage_ratio"] >= args.apply_at:
            print(f"  over {args.apply_at:.0%}: applying {args.strategy}")
            status, created, _ = operator.call(
                "POST",
                f"sessions/{args.session}/operations",
                {"strategy": args.strategy, "params": params},
            )
            operation = wait_for(operator, created["id"])
            if operation["status"] == "failed":
                print(f"  operation failed: {operation['error']}; continuing unchanged")
                continue
            result = operation["result"]
            print(
                f"  managed context v{result['version']}:"
                f" {result['tokens_before']} -> {result['tokens_after']} tokens"
            )
            # Continue from the managed context: it holds what this step's messages held, shorter.
            # (A tool result appended after the turn was posted is kept on top of it.)
            pending = messages[len(request["messages"]) + 1 :]
            status, context, headers = client.call(
                "GET", f"sessions/{args.session}/context", headers={"If-None-Match": etag}
            )
            if status == 200:
                etag = headers.get("ETag", "")
                messages = [*context["request"]["messages"], assistant, *pending]
                print(f"  continuing from {len(messages)} messages ({context['source']})")
    print(f"\nSee it at {args.url}/sessions/{args.session}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
