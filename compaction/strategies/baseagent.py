"""BaseAgent's strategies (PlatformNetwork/baseagent ``src/core/compaction.py``, ``truncate.py``).

``baseagent-prune`` clears old tool outputs (OpenCode's prune as BaseAgent copied it),
``baseagent-middle-out`` truncates each big tool output in the middle by bytes, and
``baseagent-compact`` prunes and, when still over 85% of the usable window, replaces the history
with one summary message. Defaults reproduce the seed exactly (``docs/seed-strategies.md`` §1):
BaseAgent's estimator floor(chars/4) decides, the comparisons are strict, every user message counts
as a turn, and the markers are byte for byte.
"""

from __future__ import annotations

from typing import Any

from compaction.messages.model import Message, TextPart
from compaction.strategies.base import Draft, Param, Strategy
from compaction.strategies.outputs import is_tool_message, tool_outputs, with_result_text
from compaction.summarizers import FactSummarizer, Summarizer
from compaction.tokens.estimators import baseagent_message_tokens, baseagent_text_tokens
from compaction.turns import is_user_turn_start

__all__ = [
    "COMPACTION_PROMPT",
    "PRUNE_MARKER",
    "SUMMARY_PREFIX",
    "BaseAgentCompact",
    "BaseAgentMiddleOut",
    "BaseAgentPrune",
    "middle_out_truncate",
    "prune_targets",
]

PRUNE_PROTECT = 40_000
PRUNE_MINIMUM = 20_000
PRUNE_MARKER = "[Old tool result content cleared]"
MODEL_CONTEXT_LIMIT = 200_000
OUTPUT_TOKEN_MAX = 32_000
AUTO_COMPACT_THRESHOLD = 0.85
MIDDLE_OUT_MAX_TOKENS = 2500

COMPACTION_PROMPT = """You are performing a CONTEXT CHECKPOINT COMPACTION. Create a handoff summary for another LLM that will resume the task.

Include:
- Current progress and key decisions made
- Important context, constraints, or user preferences
- What remains to be done (clear next steps)
- Any critical data, examples, or references needed to continue
- Which files were modified and how
- Any errors encountered and how they were resolved

Be concise, structured, and focused on helping the next LLM seamlessly continue the work. Use bullet points and clear sections."""  # noqa: E501

SUMMARY_PREFIX = (
    "Another language model started to solve this problem and produced a summary of its thinking"
    " process. You also have access to the state of the tools that were used. Use this to build"
    " on the work that has already been done and avoid duplicating work.\n\nHere is the summary"
    " from the previous context:\n\n"
)


def middle_out_truncate(text: str, max_tokens: int = MIDDLE_OUT_MAX_TOKENS) -> str:
    """BaseAgent's ``middle_out_truncate``: keep the first and last ``2*max_tokens`` bytes.

    Example:
        >>> middle_out_truncate("short")
        'short'
        >>> out = middle_out_truncate("a" * 40, max_tokens=4)
        >>> out
        'aaaaaaaa\\n\\n...6 tokens truncated...\\n\\naaaaaaaa'
    """
    raw = text.encode("utf-8")
    if not text or len(raw) // 4 <= max_tokens:
        return text
    max_bytes = max_tokens * 4
    head_bytes = max_bytes // 2
    tail_bytes = max_bytes - head_bytes
    head = raw[:head_bytes].decode("utf-8", errors="ignore")
    tail = raw[-tail_bytes:].decode("utf-8", errors="ignore") if tail_bytes else ""
    removed = (len(raw) - len(head.encode("utf-8")) - len(tail.encode("utf-8"))) // 4
    return f"{head}\n\n...{removed} tokens truncated...\n\n{tail}"


def prune_targets(
    messages: tuple[Message, ...] | list[Message],
    *,
    protect_tokens: int = PRUNE_PROTECT,
    minimum: int = PRUNE_MINIMUM,
    protect_last_turns: int = 2,
) -> list[tuple[int, int]]:
    """The tool outputs BaseAgent's ``prune_old_tool_outputs`` clears, as (message, part) indexes.

    Scans backwards; every user message counts a turn; while fewer than ``protect_last_turns``
    turns are seen nothing is touched; tool outputs add floor(chars/4) each and, once the running
    total is strictly over ``protect_tokens``, are marked whole; the scan stops at an output that
    already is the marker. Returns ``[]`` unless the marked outputs add up to strictly more than
    ``minimum``.
    """
    total = pruned = turns = 0
    marked: list[tuple[int, int]] = []
    stop = False
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if is_user_turn_start(message):
            turns += 1
        if turns < protect_last_turns:
            continue
        if not is_tool_message(message):
            continue
        for j in range(len(message.parts) - 1, -1, -1):
            part = message.parts[j]
            if part.kind != "tool_result":
                continue
            content = part.text
            if content == PRUNE_MARKER:
                stop = True
                break
            estimate = baseagent_text_tokens(content)
            total += estimate
            if total > protect_tokens:
                pruned += estimate
                marked.append((i, j))
        if stop:
            break
    if pruned <= minimum:
        return []
    return sorted(marked)


_PRUNE_PARAMS = (
    Param(
        "protect_tokens",
        "int",
        PRUNE_PROTECT,
        min=0,
        max=10_000_000,
        help="tool-output tokens (floor(chars/4)) protected, newest first (strictly over)",
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
        "protect_last_turns",
        "int",
        2,
        min=0,
        max=1000,
        help="recent user messages whose outputs are never touched (every user message counts)",
    ),
)


def _prune(draft: Draft, params: dict[str, Any]) -> int:
    targets = prune_targets(
        draft.messages,
        protect_tokens=params["protect_tokens"],
        minimum=params["minimum_savings"],
        protect_last_turns=params["protect_last_turns"],
    )
    for position, part_index in targets:
        message = draft.messages[position]
        original = message.parts[part_index]
        assert original.kind == "tool_result"
        artifact = draft.keep("tool_result", original.text, f"tool output {original.tool_call_id}")
        draft.replace_message(
            position,
            with_result_text(message, part_index, PRUNE_MARKER),
            "clear",
            "old tool output cleared",
            part_index=part_index,
            artifact_id=artifact.id,
        )
    return len(targets)


class BaseAgentPrune(Strategy):
    """``baseagent-prune``: clear old tool outputs beyond 40K protected tokens (§1.3)."""

    id = "baseagent-prune"
    description = (
        "Clear old tool outputs beyond 40K protected tool tokens, outside the last 2 user turns,"
        " only if it saves more than 20K (BaseAgent's copy of OpenCode's prune)."
    )
    source = "BaseAgent, OpenCode"
    params = _PRUNE_PARAMS

    def run(self, draft: Draft, params: dict[str, Any], summarizer: Summarizer | None) -> None:
        _prune(draft, params)


class BaseAgentMiddleOut(Strategy):
    """``baseagent-middle-out``: byte-based middle-out truncation of each big output (§1.5)."""

    id = "baseagent-middle-out"
    description = (
        "Middle-out truncation of each tool output above 2,500 tokens (bytes/4), keeping the first"
        " and last 5,000 bytes around '...N tokens truncated...'."
    )
    source = "BaseAgent"
    params = (
        Param(
            "max_tokens",
            "int",
            MIDDLE_OUT_MAX_TOKENS,
            min=1,
            max=1_000_000,
            help="outputs whose floor(bytes/4) exceeds this are truncated",
        ),
    )

    def run(self, draft: Draft, params: dict[str, Any], summarizer: Summarizer | None) -> None:
        for position, part_index, part in list(tool_outputs(draft.messages)):
            text = part.text
            cut = middle_out_truncate(text, params["max_tokens"])
            if cut == text:
                continue
            artifact = draft.keep("tool_result", text, f"tool output {part.tool_call_id}")
            draft.replace_message(
                position,
                with_result_text(draft.messages[position], part_index, cut),
                "truncate",
                "middle-out truncated",
                part_index=part_index,
                artifact_id=artifact.id,
            )


def _system_estimate(draft: Draft) -> int:
    if not draft.system:
        return 0
    return baseagent_message_tokens(Message("system", draft.system))


def baseagent_total(draft: Draft) -> int:
    """BaseAgent's ``estimate_total_tokens`` over the system prompt and messages."""
    messages = (*draft.pinned, *draft.messages)  # system messages set aside are counted too
    return _system_estimate(draft) + sum(baseagent_message_tokens(m) for m in messages)


class BaseAgentCompact(Strategy):
    """``baseagent-compact``: prune, then one summary replacing the history (§1.4)."""

    id = "baseagent-compact"
    description = (
        "Prune old tool outputs, then if still above 85% of usable (200K - 32K): one summary; the"
        " context becomes the system prompt plus a user message with BaseAgent's summary prefix."
    )
    source = "BaseAgent"
    params = (
        *_PRUNE_PARAMS,
        Param(
            "context_limit",
            "int",
            MODEL_CONTEXT_LIMIT,
            min=1000,
            max=10_000_000,
            help="model context window (BaseAgent hard-codes 200,000)",
        ),
        Param(
            "output_reserve",
            "int",
            OUTPUT_TOKEN_MAX,
            min=0,
            max=1_000_000,
            help="output tokens reserved (BaseAgent hard-codes 32,000)",
        ),
        Param(
            "threshold",
            "float",
            AUTO_COMPACT_THRESHOLD,
            min=0.01,
            max=1.0,
            help="compact when the estimate is strictly above this fraction of usable",
        ),
        Param("force", "bool", False, help="compact even under the threshold (BaseAgent's force)"),
    )

    def check_together(self, params: dict[str, Any]) -> None:
        if params["output_reserve"] >= params["context_limit"]:
            from compaction.errors import StrategyError

            raise StrategyError("params.output_reserve", "must be below context_limit")

    def run(self, draft: Draft, params: dict[str, Any], summarizer: Summarizer | None) -> None:
        trigger = (params["context_limit"] - params["output_reserve"]) * params["threshold"]
        force = params["force"]
        if not force and not baseagent_total(draft) > trigger:
            return
        _prune(draft, params)
        if not baseagent_total(draft) > trigger and not force:
            return
        system_count = 0
        while system_count < len(draft.messages) and draft.messages[system_count].role in (
            "system",
            "developer",
        ):
            system_count += 1
        body = draft.messages[system_count:]
        if not body:
            return
        summary = (summarizer or FactSummarizer()).summarize(
            body, previous=None, prompt=COMPACTION_PROMPT
        )
        if not summary:
            draft.warn("baseagent-compact: the summarizer returned nothing; context left as pruned")
            return
        draft.drop(range(system_count, len(draft.messages)), "summarize-range", "summarized")
        message = Message("user", (TextPart(SUMMARY_PREFIX + summary),))
        draft.insert(system_count, message, "BaseAgent summary message")
        draft.warn(
            "baseagent-compact: everything but the system prompt was replaced by one summary;"
            " unlike Codex no user message is kept"
        )
