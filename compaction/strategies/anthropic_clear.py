"""Anthropic's context editing ``clear_tool_uses_20250919``, as ``anthropic-clear-tool-uses``.

Documented behaviour: once the prompt's input tokens exceed ``trigger`` (default 100,000), the
oldest tool results are cleared in chronological order, keeping the ``keep`` most recent tool uses
(default 3); ``clear_at_least`` makes the edit all-or-nothing below that many cleared tokens;
``exclude_tools`` are never cleared; ``clear_tool_inputs`` clears the call arguments too. The API
does its clearing server-side and shows no placeholder, so ctxweb writes
``[cleared to save context]`` (recognized by :mod:`compaction.regions`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from compaction.messages.model import ToolCallPart
from compaction.regions import ANTHROPIC_CLEARED_MARKER
from compaction.strategies.base import Draft, Param, Strategy
from compaction.strategies.outputs import tool_outputs, with_result_text
from compaction.summarizers import Summarizer
from compaction.turns import tool_pairs

__all__ = ["CLEARED_INPUT", "AnthropicClearToolUses"]

CLEARED_INPUT = "{}"


class AnthropicClearToolUses(Strategy):
    """``anthropic-clear-tool-uses``: past a trigger, clear the oldest tool results."""

    id = "anthropic-clear-tool-uses"
    description = (
        "Past a trigger in input tokens, clear the oldest tool results, keeping the most recent"
        " few tool uses; optional clear-at-least, excluded tools and clearing of tool inputs"
        " (Anthropic's clear_tool_uses_20250919)."
    )
    source = "Anthropic context editing"
    params = (
        Param(
            "trigger",
            "int",
            100_000,
            min=0,
            max=10_000_000,
            help="clear once input tokens exceed this",
        ),
        Param("keep", "int", 3, min=0, max=10_000, help="most recent tool uses kept"),
        Param(
            "clear_at_least",
            "int",
            0,
            min=0,
            max=10_000_000,
            help="clear nothing unless at least this many tokens would be cleared",
        ),
        Param("exclude_tools", "str-list", (), help="tool names never cleared"),
        Param("clear_tool_inputs", "bool", False, help="also clear the cleared calls' arguments"),
    )

    def run(self, draft: Draft, params: dict[str, Any], summarizer: Summarizer | None) -> None:
        if not draft.total_tokens() > params["trigger"]:
            return
        excluded = set(params["exclude_tools"])
        names = {call.id: call.name for m in draft.messages for call in m.tool_calls}
        uses = [
            (i, j, part)
            for i, j, part in tool_outputs(draft.messages)
            if names.get(part.tool_call_id) not in excluded
        ]
        keep = params["keep"]
        candidates = uses[: max(0, len(uses) - keep)]
        candidates = [u for u in candidates if u[2].text != ANTHROPIC_CLEARED_MARKER]
        if not candidates:
            return
        saved = sum(
            draft.counter.count_part(part) - draft.text_tokens(ANTHROPIC_CLEARED_MARKER)
            for _, _, part in candidates
        )
        if saved < params["clear_at_least"]:
            draft.warn(
                f"anthropic-clear-tool-uses: only {saved} tokens could be cleared, under"
                f" clear_at_least {params['clear_at_least']}; nothing cleared"
            )
            return
        cleared_ids = set()
        for position, part_index, part in candidates:
            artifact = draft.keep("tool_result", part.text, f"tool output {part.tool_call_id}")
            draft.replace_message(
                position,
                with_result_text(draft.messages[position], part_index, ANTHROPIC_CLEARED_MARKER),
                "clear",
                "tool result cleared",
                part_index=part_index,
                artifact_id=artifact.id,
            )
            cleared_ids.add(part.tool_call_id)
        if not params["clear_tool_inputs"]:
            return
        calls = {p.id: p for p in tool_pairs(draft.messages)}
        for call_id in sorted(cleared_ids & set(calls)):
            position = calls[call_id].call_index
            message = draft.messages[position]
            parts = list(message.parts)
            for k, item in enumerate(parts):
                if isinstance(item, ToolCallPart) and item.id == call_id:
                    if item.arguments == CLEARED_INPUT:
                        continue
                    artifact = draft.keep("tool_call", item.arguments, f"tool input {call_id}")
                    parts[k] = replace(item, arguments=CLEARED_INPUT)
                    draft.replace_message(
                        position,
                        replace(message, parts=tuple(parts)),
                        "clear",
                        "tool input cleared",
                        part_index=k,
                        artifact_id=artifact.id,
                    )
                    message = draft.messages[position]
