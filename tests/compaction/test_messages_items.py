"""Every item a provider API accepts is stored as what it is: calls pair with their outputs, tool
definitions sent inside the conversation count as tools, and what no adapter knows (a role, an
item type) is kept verbatim in a region of its own, counted, and never raises."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from compaction.messages import parse, render
from compaction.messages.model import ToolCallPart, ToolResultPart
from compaction.regions import context_regions, region_of_part
from compaction.turns import is_configuration, orphans
from tests.support.messages import COUNTER

RESPONSES = "openai-responses"
ANTHROPIC = "anthropic-messages"
CHAT = "openai-chat"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "agents"

ADDITIONAL_TOOLS = {
    "type": "additional_tools",
    "tools": [
        {
            "type": "namespace",
            "name": "github",
            "tools": [{"type": "function", "name": "search", "parameters": {"type": "object"}}],
        },
        {"type": "custom", "name": "exec", "description": "Run a shell command."},
    ],
}
USER = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix it"}]}

# (the item, the region its tokens go to, whether it is configuration)
RESPONSES_ITEMS: list[tuple[dict[str, Any], str, bool]] = [
    (ADDITIONAL_TOOLS, "tools", True),
    ({"type": "mcp_list_tools", "server_label": "gh", "tools": [{"name": "s"}]}, "tools", True),
    ({"type": "message", "role": "developer", "content": "sandbox: read-only"}, "system", True),
    ({"type": "message", "role": "system", "content": "Be brief."}, "system", True),
    ({"type": "message", "role": "critic", "content": "hmm"}, "other", True),
    ({"type": "custom_tool_call", "call_id": "c1", "name": "exec", "input": "ls"}, "tool_calls", 0),
    (
        {"type": "custom_tool_call_output", "call_id": "c1", "output": "a.py\nb.py"},
        "tool_results",
        False,
    ),
    (
        {
            "type": "custom_tool_call_output",
            "call_id": "c1",
            "output": [{"type": "input_text", "text": "a.py"}],
        },
        "tool_results",
        False,
    ),
    (
        {
            "type": "local_shell_call",
            "id": "lsh_1",
            "call_id": "c2",
            "status": "completed",
            "action": {"type": "exec", "command": ["ls", "-la"], "env": {}},
        },
        "tool_calls",
        False,
    ),
    ({"type": "local_shell_call_output", "call_id": "c2", "output": "total 0"}, "tool_results", 0),
    (
        {"type": "shell_call", "call_id": "c3", "action": {"commands": ["ls"]}},
        "tool_calls",
        False,
    ),
    (
        {"type": "shell_call_output", "call_id": "c3", "output": [{"stdout": "x", "stderr": ""}]},
        "tool_results",
        False,
    ),
    (
        {"type": "apply_patch_call", "call_id": "c4", "operation": {"type": "update_file"}},
        "tool_calls",
        False,
    ),
    ({"type": "apply_patch_call_output", "call_id": "c4", "output": "done"}, "tool_results", 0),
    (
        {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"query": "q"}},
        "tool_calls",
        False,
    ),
    (
        {"type": "mcp_call", "name": "search", "arguments": "{}", "output": "[]"},
        "tool_calls",
        False,
    ),
    ({"type": "compaction", "encrypted_content": "gAAAA"}, "summary", False),
    (
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "Look first."}]},
        "reasoning",
        False,
    ),
    ({"type": "image_generation_call", "result": None}, "tool_calls", False),
    ({"type": "item_reference", "id": "msg_1"}, "other", False),
    ({"type": "from_the_future", "payload": {"x": 1}}, "other", False),
]


@pytest.mark.parametrize(("item", "region", "configuration"), RESPONSES_ITEMS)
def test_every_responses_item_is_stored_as_what_it_is_and_renders_back(
    item: dict[str, Any], region: str, configuration: bool
) -> None:
    body = {"model": "gpt-5", "input": [USER, item]}
    context = parse(RESPONSES, body)
    assert render(context) == body
    message = context.messages[1]
    assert {region_of_part(message, p) for p in message.parts} == {region}
    assert context_regions(context, COUNTER).regions[region] > 0
    assert is_configuration(message) is bool(configuration)


def test_custom_and_shell_calls_pair_with_their_outputs() -> None:
    pairs = [RESPONSES_ITEMS[i][0] for i in (5, 6, 8, 9, 10, 11, 12, 13)]
    context = parse(RESPONSES, {"input": [USER, *pairs]})
    assert orphans(context.messages).ok
    kinds = [type(m.parts[0]) for m in context.messages[1:]]
    assert kinds == [ToolCallPart, ToolResultPart] * 4
    call = context.messages[1].parts[0]
    assert isinstance(call, ToolCallPart)
    assert (call.id, call.name, call.arguments) == ("c1", "exec", "ls")


def test_a_shell_call_without_a_name_renders_without_one() -> None:
    item = RESPONSES_ITEMS[8][0]
    context = parse(RESPONSES, {"input": [item]})
    call = context.messages[0].parts[0]
    assert isinstance(call, ToolCallPart)
    assert call.name == "local_shell"
    assert json.loads(call.arguments) == item["action"]
    assert "name" not in render(context)["input"][0]


def test_a_cleared_custom_output_renders_as_a_valid_output() -> None:
    context = parse(RESPONSES, {"input": [RESPONSES_ITEMS[5][0], RESPONSES_ITEMS[7][0]]})
    result = context.messages[1].parts[0]
    assert isinstance(result, ToolResultPart)
    from dataclasses import replace

    from compaction.messages.model import TextPart

    cleared = replace(result, content=(TextPart("[cleared]"),))
    message = replace(context.messages[1], parts=(cleared,))
    out = render(replace(context, messages=(context.messages[0], message)))["input"][1]
    assert out["type"] == "custom_tool_call_output"
    assert out["call_id"] == "c1"
    assert out["output"] in ("[cleared]", [{"type": "input_text", "text": "[cleared]"}])


def test_anthropic_system_messages_stay_in_their_place() -> None:
    body = {
        "model": "claude",
        "max_tokens": 100,
        "system": "You are Claude Code.",
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "system", "content": "Available agent types: ..."},
            {"role": "assistant", "content": "hello"},
        ],
    }
    context = parse(ANTHROPIC, body)
    assert [m.role for m in context.messages] == ["user", "system", "assistant"]
    assert is_configuration(context.messages[1])
    assert render(context) == body
    regions = context_regions(context, COUNTER).regions
    assert regions["system"] > COUNTER.count_text("You are Claude Code.")


@pytest.mark.parametrize(
    ("fmt", "body", "key"),
    [
        (ANTHROPIC, {"messages": [{"role": "user", "content": "a"}, {"role": "critic"}]}, 1),
        (CHAT, {"messages": [{"role": "user", "content": "a"}, {"role": "robot", "x": 1}]}, 1),
    ],
)
def test_a_role_no_adapter_knows_is_kept_verbatim_in_other(
    fmt: str, body: dict[str, Any], key: int
) -> None:
    context = parse(fmt, body)
    assert render(context) == body
    message = context.messages[key]
    assert is_configuration(message)
    assert region_of_part(message, message.parts[0]) == "other"
    assert context_regions(context, COUNTER).regions["other"] > 0


@pytest.mark.parametrize(
    ("block", "region"),
    [
        (
            {"type": "server_tool_use", "id": "s1", "name": "web_search", "input": {"q": "x"}},
            "tool_calls",
        ),
        (
            {"type": "web_search_tool_result", "tool_use_id": "s1", "content": [{"url": "u"}]},
            "tool_results",
        ),
        ({"type": "mcp_tool_use", "id": "m1", "name": "s", "server_name": "gh", "input": {}}, 0),
        ({"type": "container_upload", "file_id": "f1"}, "other"),
    ],
)
def test_anthropic_server_tools_and_unknown_blocks_are_counted_where_they_belong(
    block: dict[str, Any], region: str | int
) -> None:
    body = {
        "messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": [block]}]
    }
    context = parse(ANTHROPIC, body)
    assert render(context) == body
    message = context.messages[1]
    assert region_of_part(message, message.parts[0]) == (region or "tool_calls")


def _fixtures() -> list[Path]:
    return sorted(FIXTURES.glob("*/*.json"))


@pytest.mark.parametrize("path", _fixtures(), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_what_the_real_clis_send_is_read_whole(path: Path) -> None:
    recorded = json.loads(path.read_text())
    body = recorded.get("body", recorded)
    fmt = RESPONSES if path.parent.name.startswith("codex") else ANTHROPIC
    context = parse(fmt, body)
    assert render(context) == body
    totals = context_regions(context, COUNTER)
    assert totals.regions["system"] > 0
    assert totals.regions["other"] == 0
    if body.get("tools") or fmt == RESPONSES:
        assert totals.regions["tools"] > 0
    assert orphans(context.messages).ok
    for message in context.messages:
        for part in message.parts:
            if part.extra.get("ctxweb:raw") is not None:
                assert is_configuration(message), "only configuration items stay verbatim"


def test_an_item_read_back_with_its_keys_reordered_is_still_the_item_sent() -> None:
    """PostgreSQL's jsonb gives a kept item back with its keys in its own order: the item still
    renders as sent and keeps its identity (it is not taken for a strategy's rewrite)."""
    from compaction.messages import message_from_dict, message_identity, message_to_dict

    item = {"type": "from_the_future", "payload": {"b": 1, "a": 2}, "id": "x"}
    context = parse(RESPONSES, {"input": [USER, item]})
    stored = json.loads(json.dumps(message_to_dict(context.messages[1])))
    raw = stored["parts"][0]["extra"]["ctxweb:raw"]
    stored["parts"][0]["extra"]["ctxweb:raw"] = dict(sorted(raw.items(), key=lambda kv: kv[0]))
    read_back = message_from_dict(stored)
    assert message_identity(read_back) == message_identity(context.messages[1])
    rendered = render(replace_messages(context, (context.messages[0], read_back)))
    assert rendered["input"][1] == item


def replace_messages(context: Any, messages: tuple[Any, ...]) -> Any:
    from dataclasses import replace

    return replace(context, messages=messages)
