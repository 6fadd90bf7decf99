"""Attribution of the request shapes the newest agents send (issue 36, as Claude Code 2.1.19x and
Codex 0.171 send them through the proxy; ``tests/ctxweb/proxy/test_agents_attribution.py`` runs
the agents themselves): tools inside namespaces and Codex's ``additional_tools``, an MCP server's
namespace, and Claude Code's untagged reminder sections in a system message."""

from __future__ import annotations

import json
from typing import Any

from compaction.attribution import context_items, instruction_blocks
from compaction.messages import parse
from compaction.regions import context_regions
from tests.support.messages import COUNTER

LONG = "Runs a command and returns its output, waiting for it to finish. " * 12


def _tool(name: str, description: str = "A tool.") -> dict[str, Any]:
    return {"type": "function", "name": name, "description": description, "parameters": {}}


def _responses(tools: list[Any] | None = None, items: list[Any] | None = None) -> dict[str, Any]:
    user = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Go."}]}
    body: dict[str, Any] = {"model": "gpt-5.1-codex", "input": [*(items or []), user]}
    if tools is not None:
        body["tools"] = tools
    return body


def _by_name(body: dict[str, Any], fmt: str = "openai-responses") -> dict[str, Any]:
    context = parse(fmt, body)
    attribution = context_items(context, COUNTER)
    regions = context_regions(context, COUNTER).regions
    for region, tokens in regions.items():  # the items add up, region by region
        assert sum(i.tokens for i in attribution.items if i.region == region) == tokens, region
    return {item.name: item for item in attribution.items}


def test_a_namespaced_tool_is_counted_with_the_tools_it_holds() -> None:
    inner = [_tool("lookup", LONG), _tool("search", LONG)]
    empty = parse(
        "openai-responses", _responses([{"type": "namespace", "name": "mcp__docs", "tools": []}])
    )
    full = parse(
        "openai-responses", _responses([{"type": "namespace", "name": "mcp__docs", "tools": inner}])
    )
    grown = context_regions(full, COUNTER).regions["tools"]
    assert grown - context_regions(empty, COUNTER).regions["tools"] > 2 * COUNTER.count_text(LONG)


def test_an_mcp_servers_namespace_is_split_into_its_tools_under_the_server() -> None:
    namespace = {
        "type": "namespace",
        "name": "mcp__tickets",
        "description": "Tools in the mcp__tickets namespace.",
        "tools": [_tool("lookup_ticket", LONG), _tool("search_runbooks")],
    }
    items = _by_name(_responses([_tool("exec_command"), namespace]))
    lookup = items["mcp__tickets__lookup_ticket"]
    assert lookup.group == "tickets"
    assert lookup.tokens >= COUNTER.count_text(LONG)
    assert items["mcp__tickets__search_runbooks"].group == "tickets"
    wrapper = items["mcp__tickets"]
    assert (wrapper.group, wrapper.kind) == ("tickets", "tool_definition")
    assert wrapper.tokens < 40  # the namespace's own description and keys
    assert items["exec_command"].group == "exec_command"


def test_codex_additional_tools_are_one_item_a_tool() -> None:
    item = {
        "type": "additional_tools",
        "role": "developer",
        "tools": [
            {
                "type": "namespace",
                "name": "functions",
                "description": "",
                "tools": [{"type": "custom", "name": "exec", "description": LONG}, _tool("wait")],
            },
            {
                "type": "namespace",
                "name": "clock",
                "description": "Time.",
                "tools": [_tool("sleep")],
            },
        ],
    }
    items = _by_name(_responses(items=[item]))
    assert items["functions.exec"].region == "tools"
    assert items["functions.exec"].tokens >= COUNTER.count_text(LONG)
    assert {"functions.wait", "clock.sleep"} <= items.keys()
    assert items["clock.sleep"].group == "clock.sleep"  # not an MCP server
    assert items["additional_tools"].tokens < 30


SYSTEM_MESSAGE = (
    "Available agent types for the Agent tool:\n"
    "- claude: Catch-all agent. (Tools: *)\n"
    "- Plan: Software architect agent. (Tools: Read)\n\n"
    "When you launch multiple agents, send them in one message.\n\n"
    "The following skills are available for use with the Skill tool:\n\n"
    "- verify: Verify that a change works.\n"
    "- claude-api: Reference for the Claude API.\n"
    "TRIGGER: whenever the prompt names Claude.\n"
    "- init: Initialize a new CLAUDE.md file\n\n"
    "UserPromptSubmit hook success: the deploy freeze starts on Friday."
)


def test_claude_codes_untagged_sections_are_instruction_blocks() -> None:
    blocks = instruction_blocks(SYSTEM_MESSAGE)
    found = {b.name: SYSTEM_MESSAGE[b.start : b.end] for b in blocks}
    assert found["agents list"].endswith("(Tools: Read)")
    assert found["skills list"].startswith("The following skills")
    assert found["skills list"].endswith("CLAUDE.md file")  # entries past the header's blank line
    assert found["hook output"] == (
        "UserPromptSubmit hook success: the deploy freeze starts on Friday."
    )
    assert next(b for b in blocks if b.name == "hook output").detail == "UserPromptSubmit"


def test_a_section_inside_a_reminder_is_the_reminders() -> None:
    text = (
        "<system-reminder>\nUserPromptSubmit hook success: hi\n</system-reminder>\n"
        "Then I said: PreToolUse hook success: not a line start"
    )
    blocks = instruction_blocks(text)
    assert [(b.name, b.detail) for b in blocks] == [("hook output", "UserPromptSubmit")]


def test_the_system_message_inside_messages_is_attributed_section_by_section() -> None:
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "system": "You are Claude Code.",
        "messages": [
            {"role": "user", "content": "Read notes.txt."},
            {"role": "system", "content": SYSTEM_MESSAGE},
        ],
    }
    items = _by_name(body, "anthropic-messages")
    for name in ("agents list", "skills list", "hook output"):
        assert items[name].kind == "instruction", name
        assert items[name].region == "system", name
    assert items["hook output"].tokens < 20
    assert json.dumps(body)  # the body stays as sent
