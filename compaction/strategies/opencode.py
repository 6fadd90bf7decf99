"""OpenCode's prune (``sst/opencode`` ``session/compaction.ts``) as ``opencode-prune``, and its
overflow arithmetic (``session/overflow.ts``): :func:`usable` and :func:`is_overflow`.

The prune scans backwards; every user message counts a turn and nothing is touched until the
second-to-last one; the scan stops at a previous summary and at the first output already
compacted; completed tool outputs (not errors) of tools other than ``skill`` add their estimate
``round(len/4)`` and, once the running total is strictly over 40K, are marked; they are cleared
(OpenCode sends ``[Old tool result content cleared]`` for a compacted part) only if the marked
outputs add up to strictly more than 20K (``docs/seed-strategies.md`` §1a). BaseAgent copied it
as ``baseagent-prune``, without the protected tools and the summary stop.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from compaction.messages.model import Message, ToolResultPart
from compaction.regions import is_summary
from compaction.strategies.base import Draft, Param, Strategy
from compaction.strategies.outputs import with_result_text
from compaction.summarizers import Summarizer
from compaction.turns import is_user_turn_start

__all__ = [
    "COMPACTION_BUFFER",
    "OUTPUT_TOKEN_MAX",
    "PRUNE_MARKER",
    "PRUNE_MINIMUM",
    "PRUNE_PROTECT",
    "PRUNE_PROTECTED_TOOLS",
    "OpencodePrune",
    "is_overflow",
    "max_output_tokens",
    "opencode_estimate",
    "prune_targets",
    "usable",
]

PRUNE_MINIMUM = 20_000
PRUNE_PROTECT = 40_000
PRUNE_PROTECTED_TOOLS: tuple[str, ...] = ("skill",)
PRUNE_MARKER = "[Old tool result content cleared]"
COMPACTION_BUFFER = 20_000
OUTPUT_TOKEN_MAX = 32_000


def opencode_estimate(text: str) -> int:
    """OpenCode's ``Token.estimate``: ``max(0, Math.round(length / 4))``, length in UTF-16 units.

    Example:
        >>> opencode_estimate("abcdef"), opencode_estimate("x" * 200000)
        (2, 50000)
    """
    length = len(text.encode("utf-16-le", "surrogatepass")) // 2
    return max(0, math.floor(length / 4 + 0.5))


def prune_targets(
    messages: Sequence[Message],
    *,
    protect_tokens: int = PRUNE_PROTECT,
    minimum: int = PRUNE_MINIMUM,
    protected_tools: Sequence[str] = PRUNE_PROTECTED_TOOLS,
    protect_last_turns: int = 2,
) -> list[tuple[int, int]]:
    """The tool outputs OpenCode's ``prune`` compacts, as (message, part) indexes, in order.

    Example:
        >>> prune_targets([])
        []
    """
    names = {c.id: c.name for m in messages for c in m.tool_calls}
    total = pruned = turns = 0
    marked: list[tuple[int, int]] = []
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if is_user_turn_start(message):
            turns += 1
        if turns < protect_last_turns:
            continue
        if is_summary(message):
            break
        stop = False
        for j in range(len(message.parts) - 1, -1, -1):
            part = message.parts[j]
            if not isinstance(part, ToolResultPart) or part.is_error:
                continue
            if names.get(part.tool_call_id, "") in protected_tools:
                continue
            if part.text == PRUNE_MARKER:
                stop = True
                break
            estimate = opencode_estimate(part.text)
            total += estimate
            if total <= protect_tokens:
                continue
            pruned += estimate
            marked.append((i, j))
        if stop:
            break
    return sorted(marked) if pruned > minimum else []


def max_output_tokens(model_output: int, output_token_max: int = OUTPUT_TOKEN_MAX) -> int:
    """``ProviderTransform.maxOutputTokens``: ``min(limit.output, max) || max``."""
    return min(model_output, output_token_max) or output_token_max


def usable(
    context: int,
    max_output: int,
    *,
    input_limit: int = 0,
    reserved: int | None = None,
    output_token_max: int = OUTPUT_TOKEN_MAX,
) -> int:
    """OpenCode's ``usable``: the input tokens a model may take before compaction.

    ``reserved`` is ``cfg.compaction.reserved``; by default ``min(20000, max output)``.

    Example:
        >>> usable(100_000, 32_000, reserved=12_000)
        56000
    """
    if context == 0:
        return 0
    out = max_output_tokens(max_output, output_token_max)
    keep = reserved if reserved is not None else min(COMPACTION_BUFFER, out)
    if input_limit:
        return max(0, input_limit - keep)
    return max(0, context - out - keep)


def is_overflow(
    *,
    context: int,
    max_output: int,
    input_limit: int = 0,
    total: int = 0,
    input: int = 0,
    output: int = 0,
    cache_read: int = 0,
    cache_write: int = 0,
    reserved: int | None = None,
    auto: bool = True,
    output_token_max: int = OUTPUT_TOKEN_MAX,
) -> bool:
    """OpenCode's ``isOverflow``: the last call's usage reached :func:`usable`.

    Example:
        >>> is_overflow(context=100_000, max_output=32_000, input=75_000, output=5_000)
        True
    """
    if not auto or context == 0:
        return False
    count = total or input + output + cache_read + cache_write
    limit = usable(
        context,
        max_output,
        input_limit=input_limit,
        reserved=reserved,
        output_token_max=output_token_max,
    )
    return count >= limit


class OpencodePrune(Strategy):
    """``opencode-prune``: OpenCode's prune of old tool outputs (§1a)."""

    id = "opencode-prune"
    description = (
        "OpenCode's prune: clear completed tool outputs beyond 40K protected tokens (round(len/4))"
        " outside the last 2 user turns, never 'skill' outputs, stopping at a previous summary or"
        " an already cleared output, only if it saves more than 20K."
    )
    source = "OpenCode"
    params = (
        Param(
            "protect_tokens",
            "int",
            PRUNE_PROTECT,
            min=0,
            max=10_000_000,
            help="tool-output tokens protected, newest first (strictly over)",
        ),
        Param(
            "minimum_savings",
            "int",
            PRUNE_MINIMUM,
            min=0,
            max=10_000_000,
            help="prune only if it clears strictly more than this many tokens",
        ),
        Param(
            "protected_tools",
            "str-list",
            PRUNE_PROTECTED_TOOLS,
            help="tools whose outputs are never pruned",
        ),
        Param(
            "protect_last_turns",
            "int",
            2,
            min=0,
            max=1000,
            help="recent user messages whose outputs are never touched",
        ),
    )

    def run(self, draft: Draft, params: dict[str, Any], summarizer: Summarizer | None) -> None:
        targets = prune_targets(
            draft.messages,
            protect_tokens=params["protect_tokens"],
            minimum=params["minimum_savings"],
            protected_tools=params["protected_tools"],
            protect_last_turns=params["protect_last_turns"],
        )
        for position, part_index in targets:
            message = draft.messages[position]
            part = message.parts[part_index]
            assert isinstance(part, ToolResultPart)
            artifact = draft.keep("tool_result", part.text, f"tool output {part.tool_call_id}")
            draft.replace_message(
                position,
                with_result_text(message, part_index, PRUNE_MARKER),
                "clear",
                "old tool output compacted (OpenCode prune)",
                part_index=part_index,
                artifact_id=artifact.id,
            )
