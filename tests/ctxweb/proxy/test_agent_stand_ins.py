"""The scripted stand-ins of :mod:`tests.support.agents`, read by the providers' own SDKs: what
the real agents are tested against must be what the providers send (streamed event for event,
or whole; tool rounds, then the final text; Responses items with ``id`` and ``status``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.agents import FINAL_TEXT, NOTES, AgentStandIn, agent_stand_in

PROMPT = "Read notes.txt and tell me the answer."


@pytest.fixture
def stand_in(tmp_path: Path) -> Iterator[AgentStandIn]:
    with agent_stand_in(tmp_path) as api:
        yield api


@pytest.mark.parametrize("streamed", [True, False], ids=["streamed", "whole"])
def test_the_anthropic_stand_in_answers_tool_rounds_then_text_as_the_sdk_reads_them(
    stand_in: AgentStandIn, streamed: bool
) -> None:
    from anthropic import Anthropic

    client = Anthropic(base_url=stand_in.url, api_key="sk-test")
    tools = [{"name": "Read", "description": "read", "input_schema": {"type": "object"}}]
    messages: list[dict[str, Any]] = [{"role": "user", "content": PROMPT}]

    def ask() -> Any:
        call = {"model": "claude-x", "max_tokens": 100, "tools": tools, "messages": messages}
        if not streamed:
            return client.messages.create(**call)
        with client.messages.stream(**call) as stream:
            return stream.get_final_message()

    for _ in range(2):
        answer = ask()
        assert answer.stop_reason == "tool_use"
        use = answer.content[0]
        assert (use.type, use.name) == ("tool_use", "Read")
        assert use.input == {"file_path": str(stand_in.workdir / NOTES)}
        messages += [
            {"role": "assistant", "content": [use.model_dump()]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id}]},
        ]
    final = ask()
    assert (final.stop_reason, final.content[0].text) == ("end_turn", FINAL_TEXT)
    assert final.usage.input_tokens > 0
    assert [r.kind for r in stand_in.received] == ["main"] * 3
    assert "sk-test" in json.dumps(stand_in.received[0].headers)  # every header is kept


@pytest.mark.parametrize("streamed", [True, False], ids=["streamed", "whole"])
def test_the_responses_stand_in_calls_a_custom_tool_with_ids_and_statuses(
    stand_in: AgentStandIn, streamed: bool
) -> None:
    from openai import OpenAI

    client = OpenAI(base_url=f"{stand_in.url}/v1", api_key="sk-test")
    items: list[Any] = [{"role": "user", "content": PROMPT}]
    tools: list[Any] = [{"type": "custom", "name": "exec", "description": "JavaScript"}]

    def ask() -> Any:
        if not streamed:
            return client.responses.create(model="gpt-x", input=items, tools=tools)
        events = list(client.responses.create(model="gpt-x", input=items, tools=tools, stream=True))
        assert events[0].type == "response.created"
        assert events[-1].type == "response.completed"
        added = [e.item for e in events if e.type == "response.output_item.added"]
        assert [item.status for item in added] == ["in_progress"]
        return events[-1].response

    for _ in range(2):
        call = ask().output[0]
        assert (call.type, call.name, call.status) == ("custom_tool_call", "exec", "completed")
        assert call.id
        assert "tools.exec_command" in call.input
        items += [
            call.model_dump(),
            {"type": "custom_tool_call_output", "call_id": call.call_id, "output": "42"},
        ]
    final = ask()
    assert final.output_text == FINAL_TEXT
    assert final.output[0].id
    assert final.usage.input_tokens > 0
