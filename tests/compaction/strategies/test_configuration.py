"""Configuration is not conversation: no strategy summarizes, moves or removes tool definitions,
system or developer instructions or any other configuration item, wherever the format puts them
(Codex's ``additional_tools`` item and developer messages, Claude Code's system messages inside
``messages``), and every plan still renders as a valid request with its tool pairs intact."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from compaction.messages import Context, parse, render
from compaction.strategies import STRATEGIES, get_strategy
from compaction.turns import is_configuration, orphans
from tests.support.messages import COUNTER

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "agents"

#: Settings that make each strategy act on a small context (its own parameters only).
AGGRESSIVE = {
    "protect_tokens": 100,
    "minimum_savings": 0,
    "protect_last_turns": 1,
    "max_tokens": 200,
    "context_limit": 20_000,
    "output_reserve": 1_000,
    "threshold": 0.1,
    "force": True,
    "max_user_tokens": 100,
    "context_window": 6_000,
    "message_threshold": 2,
    "token_percent": 10,
    "keep_messages": 2,
    "budget": 500,
    "max_input_length": 6_000,
    "keep_n": 1,
    "tool_result_threshold": 50,
    "keep_recent": 1,
    "trigger": 1_000,
    "keep": 1,
    "target_tokens": 3_000,
    "externalize_bytes": 1_024,
    "compact_bytes": 512,
}


def _params(strategy_id: str) -> dict[str, Any]:
    names = {p.name for p in get_strategy(strategy_id).params}
    params = {k: v for k, v in AGGRESSIVE.items() if k in names}
    if strategy_id == "llm4s-pipeline":
        params.pop("max_tokens", None)
        params["budget"] = 2_000
    if strategy_id == "picoclaw-trim":
        params["max_tokens"] = 500
    return params


def _codex_like() -> Context:
    """A Responses conversation as Codex's default model sends it: tools inside ``input``,
    developer messages, custom calls with big outputs."""
    items: list[dict[str, Any]] = [
        {
            "type": "additional_tools",
            "tools": [{"type": "custom", "name": "exec", "description": "Run a command. " * 40}],
        },
        {"type": "message", "role": "developer", "content": "sandbox: workspace-write " * 30},
        {"type": "message", "role": "user", "content": "AGENTS.md: keep tests green " * 20},
    ]
    for i in range(8):
        items += [
            {"type": "message", "role": "user", "content": f"step {i}: fix src/mod{i}.py"},
            {"type": "custom_tool_call", "call_id": f"c{i}", "name": "exec", "input": f"cat {i}"},
            {
                "type": "custom_tool_call_output",
                "call_id": f"c{i}",
                "output": f"ERROR in src/mod{i}.py line {i}\n" + "log line\n" * 300,
            },
            {"type": "message", "role": "assistant", "content": f"fixed {i}"},
        ]
        if i == 3:
            items.append({"type": "message", "role": "developer", "content": "approval: never"})
    return parse("openai-responses", {"model": "gpt-5", "input": items})


def _claude_like() -> Context:
    messages: list[dict[str, Any]] = [
        {
            "role": "user",
            "content": [{"type": "text", "text": "<system-reminder>CLAUDE.md</system-reminder>"}],
        },
        {"role": "system", "content": "Available agent types for the Agent tool: " * 30},
    ]
    for i in range(8):
        messages += [
            {"role": "user", "content": f"step {i}: read src/mod{i}.py"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": f"t{i}", "name": "Read", "input": {"i": i}}],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": f"t{i}", "content": "x = 1\n" * 400}
                ],
            },
            {"role": "assistant", "content": f"read {i}"},
        ]
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1_000,
        "system": [{"type": "text", "text": "You are Claude Code."}],
        "tools": [{"name": "Read", "description": "Read a file.", "input_schema": {}}],
        "messages": messages,
    }
    return parse("anthropic-messages", body)


def _real(agent: str) -> Context | None:
    paths = sorted((FIXTURES / agent).glob("*last-call*.json"))
    if not paths:
        return None
    recorded = json.loads(paths[-1].read_text())
    fmt = "openai-responses" if agent == "codex" else "anthropic-messages"
    return parse(fmt, recorded.get("body", recorded))


CONTEXTS = {"codex-like": _codex_like, "claude-like": _claude_like}


def _check(context: Context, strategy_id: str) -> bool:
    plan = get_strategy(strategy_id).plan(context, _params(strategy_id), counter=COUNTER)
    configuration = [m for m in context.messages if is_configuration(m)]
    kept = [m for m in plan.context.messages if is_configuration(m)]
    # every configuration message, unchanged and in its order, and nothing new made to look so
    assert [id(m) for m in kept if any(m is c for c in configuration)] == [
        id(m) for m in configuration
    ]
    assert plan.context.tools == context.tools
    assert plan.context.system[: len(context.system)] == context.system
    assert orphans(plan.context.messages).ok
    for edit in plan.edits:
        if edit.kind != "insert-summary" and edit.message_index >= 0:
            assert not is_configuration(context.messages[edit.message_index]), edit
    render(plan.context)  # a valid request of its format
    return plan.tokens_saved > 0


@pytest.mark.parametrize("name", sorted(CONTEXTS))
def test_no_strategy_touches_configuration(name: str) -> None:
    context = CONTEXTS[name]()
    acted = {sid for sid in STRATEGIES if _check(context, sid)}
    # the test means something: the strategies that cut history did act on this context
    assert {"ctxweb-auto", "codex-compact", "picoclaw-summarize", "baseagent-compact"} <= acted


@pytest.mark.parametrize("agent", ["codex", "claude-code"])
def test_no_strategy_touches_what_the_real_clis_configure(agent: str) -> None:
    context = _real(agent)
    if context is None:
        pytest.skip(f"no recorded {agent} request in tests/fixtures/agents")
    for strategy_id in STRATEGIES:
        _check(context, strategy_id)


def test_a_summary_lands_after_the_leading_configuration() -> None:
    plan = get_strategy("codex-compact").plan(
        _codex_like(), _params("codex-compact"), counter=COUNTER
    )
    roles = [m.role for m in plan.context.messages]
    assert roles[:2] == ["developer", "developer"]  # the tools item, the sandbox note
    rendered = render(plan.context)["input"]
    assert rendered[0]["type"] == "additional_tools"
