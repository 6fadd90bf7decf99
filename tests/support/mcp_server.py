"""A small MCP server over stdio for the agents' tests: what a user's MCP server is to Claude Code
and Codex, with two tools whose definitions the agents send to the model as the server's.

Run as ``python -m tests.support.mcp_server <name>`` (or the file's path). It speaks JSON-RPC 2.0,
one message a line (MCP's stdio transport): ``initialize``, ``tools/list``, ``tools/call``,
``ping``, ``resources/list`` and ``prompts/list`` (empty); notifications are taken silently and
any other request gets "method not found".
"""

from __future__ import annotations

import json
import sys
from typing import Any

#: The tools every instance offers; long descriptions, as real servers' are, so that their
#: definitions weigh in the context.
TOOLS = [
    {
        "name": "lookup_ticket",
        "description": (
            "Look up a ticket in the team's tracker by its number and return its title, state, "
            "assignee, labels and the last ten comments. Use it whenever the user mentions a "
            "ticket number. " * 4
        ).strip(),
        "inputSchema": {
            "type": "object",
            "properties": {"number": {"type": "integer", "description": "The ticket's number"}},
            "required": ["number"],
        },
    },
    {
        "name": "search_runbooks",
        "description": (
            "Search the operations runbooks for a phrase and return the matching sections with "
            "their headings, most relevant first. " * 4
        ).strip(),
        "inputSchema": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What to look for"},
                "limit": {"type": "integer", "description": "At most this many sections"},
            },
            "required": ["query"],
        },
    },
]


def answer(request: dict[str, Any], name: str) -> dict[str, Any] | None:
    """The response to one JSON-RPC message (``None`` for a notification)."""
    if "id" not in request:
        return None
    method = request.get("method")
    result: Any
    if method == "initialize":
        params = request.get("params") or {}
        result = {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": name, "version": "1.0.0"},
        }
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "tools/call":
        text = f"{name}: nothing found for {json.dumps(request.get('params', {}).get('arguments'))}"
        result = {"content": [{"type": "text", "text": text}], "isError": False}
    elif method == "ping":
        result = {}
    elif method in ("resources/list", "prompts/list", "resources/templates/list"):
        key = {"resources/list": "resources", "prompts/list": "prompts"}.get(
            method, "resourceTemplates"
        )
        result = {key: []}
    else:
        return {
            "jsonrpc": "2.0",
            "id": request["id"],
            "error": {"code": -32601, "message": f"method not found: {method}"},
        }
    return {"jsonrpc": "2.0", "id": request["id"], "result": result}


def main() -> None:
    name = sys.argv[1] if len(sys.argv) > 1 else "tickets"
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            request = json.loads(line)
        except ValueError:
            continue
        response = answer(request, name)
        if response is not None:
            sys.stdout.write(json.dumps(response) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
