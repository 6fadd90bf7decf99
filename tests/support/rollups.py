"""A hand-made coding session for the attribution rollups' tests (issue 36): files read, a log, a
file read again after a drop, through the Anthropic Messages format; ingest in process; every
rollup row of a session without ids (to compare two ways of making them)."""

from __future__ import annotations

from typing import Any

from ctxweb.contexts.models import (
    AttributionDay,
    AttributionItem,
    AttributionLabel,
    Session,
    ToolUse,
    Turn,
)
from ctxweb.contexts.selectors import attribution as attribution_selectors
from ctxweb.contexts.services import turn_ingest, turn_request_parse
from tests.support.world import World

APP = "def main() -> None:\n    print('hello from app')\n" * 20
LIB = "def helper(value: int) -> int:\n    return value * 2  # doubles the value given\n" * 15
LOG = "\n".join(
    f"2026-11-27 12:00:{i:02d} INFO worker {i} finished its batch of jobs" for i in range(30)
)
TOOLS = [
    {"name": "Read", "description": "Read a file.", "input_schema": {"type": "object"}},
    {"name": "Bash", "description": "Run a command.", "input_schema": {"type": "object"}},
    {
        "name": "mcp__github__get_issue",
        "description": "Get an issue from GitHub.",
        "input_schema": {"type": "object"},
    },
]


def user(value: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": value}]}


def assistant(value: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "text", "text": value}]}


def call(call_id: str, name: str, arguments: dict[str, Any], output: str) -> list[dict[str, Any]]:
    use = {"type": "tool_use", "id": call_id, "name": name, "input": arguments}
    result = {"type": "tool_result", "tool_use_id": call_id, "content": output}
    return [
        {"role": "assistant", "content": [use]},
        {"role": "user", "content": [result]},
    ]


ASK = user("Fix the bug in app.py.")
READ_APP = call("r1", "Read", {"file_path": "/repo/app.py"}, APP)
BASH = call("b1", "Bash", {"command": "cat worker.log"}, LOG)
READ_LIB = call("r2", "Read", {"file_path": "/repo/lib.py"}, LIB)
READ_APP_AGAIN = call("r3", "Read", {"file_path": "/repo/app.py"}, APP)
#: Three turns: app.py read; then the log and lib.py (the answer names lib.py); then a third
#: turn that dropped app.py's first read and reads app.py again.
TURN_0 = [ASK, *READ_APP]
TURN_1 = [*TURN_0, *BASH, *READ_LIB, assistant("lib.py doubles the value.")]
TURN_2 = [ASK, *BASH, *READ_LIB, assistant("lib.py doubles the value."), *READ_APP_AGAIN]


def body(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 4096,
        "system": [{"type": "text", "text": "You are a coding agent."}],
        "tools": TOOLS,
        "messages": messages,
    }


def ingest(world: World, external_id: str, messages: list[dict[str, Any]], **extra: Any) -> Turn:
    request = body(messages)
    context = turn_request_parse(
        project=world.project,
        external_id=external_id,
        format="anthropic-messages",
        request=request,
    )
    return turn_ingest(
        project=world.project, external_id=external_id, context=context, **extra
    ).turn


def snapshot(session: Session) -> dict[str, Any]:
    """Every rollup row of a session, without ids (to compare a rebuild with live rollups)."""
    items = sorted(
        AttributionItem.objects.filter(session=session).values_list(
            "key",
            "group",
            "tokens_now",
            "tokens_peak",
            "introduced",
            "count",
            "first_turn",
        )
    )
    live = {
        key: attribution_selectors._held(row, session.turn_count)
        for key, row in ((r.key, r) for r in AttributionItem.objects.filter(session=session))
    }
    uses = sorted(
        ToolUse.objects.filter(session=session).values_list(
            "turn", "position", "kind", "tool", "name", "tokens", "referenced"
        )
    )
    days = sorted(
        AttributionDay.objects.filter(session=session).values_list(
            "day", "turns", "tokens", "region_tool_results", "reported", "peak_fill", "compactions"
        )
    )
    labels = sorted(
        AttributionLabel.objects.filter(session=session).values_list(
            "category", "label", "tokens_now", "accrued", "present", "since"
        )
    )
    return {"items": items, "held": live, "uses": uses, "days": days, "labels": labels}
