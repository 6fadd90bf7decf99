"""CoPaw's memory compaction hook on ReMe's engine (CoPaw @ cc037e1, ReMe v0.3.0.9), as
``copaw-compact``.

Before each reasoning step: if ``count(system + summary)`` leaves room under the threshold
(``0.75 × max_input_length``), truncate the tool results of all but the last ``keep_n`` messages
(over 1,000 chars: 500 + ``<<<TRUNCATED>>>`` marker + 500), split the messages with ReMe's
``check_context`` (keep the newest within a 10 % reserve, pulling each kept result's tool_use in),
fall back to the largest balanced tail of ≤ 3 messages when the split orphans a call, and replace
the rest with a structured summary that is merged incrementally and prepended as a user message
wrapped in ``<previous-summary>`` (``docs/seed-strategies.md`` §5). Tokens: CoPaw's
``bytes/3.75`` estimate (its Qwen tokenizer is not shipped).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from compaction.messages.model import (
    MediaPart,
    Message,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from compaction.strategies.base import Draft, Param, Strategy
from compaction.summarizers import FactSummarizer, Summarizer
from compaction.tokens.estimators import copaw_message_tokens, copaw_text_tokens

__all__ = [
    "COMPACT_PROMPT",
    "SUMMARY_SUFFIX",
    "CopawCompact",
    "check_context",
    "format_msgs_to_str",
    "summary_message_text",
    "tool_ids_balanced",
    "truncate_tool_text",
]

TRUNCATE_OPEN = "<<<TRUNCATED>>>"
TRUNCATE_CLOSE = "<<<END_TRUNCATED>>>"
SUMMARY_OPEN = "<previous-summary>\n"
SUMMARY_SUFFIX = (
    "\n</previous-summary>\nThe above is a summary of our previous conversation.\nIf there is a"
    " new instruction from the user, do not continue executing the previous content;\nonly"
    " execute the user's new instruction."
)
COMPACT_PROMPT = (
    "Create a structured summary of the conversation above. Use this EXACT format:\n\n"
    "## Goal\n## Constraints & Preferences\n## Progress\n### Done\n### In Progress\n### Blocked\n"
    "## Key Decisions\n## Next Steps\n## Critical Context\n\nKeep each section concise. Preserve"
    " exact file paths, function names, and error messages."
)
FORMAT_THRESHOLD = 88_473


def summary_message_text(summary: str) -> str:
    """The user message ReMe prepends: the summary in ``<previous-summary>`` plus its note."""
    return SUMMARY_OPEN + summary + SUMMARY_SUFFIX


def _previous_summary(message: Message) -> str | None:
    text = message.text
    if message.role == "user" and text.startswith(SUMMARY_OPEN) and text.endswith(SUMMARY_SUFFIX):
        return text[len(SUMMARY_OPEN) : len(text) - len(SUMMARY_SUFFIX)]
    return None


def truncate_tool_text(text: str, path: str, threshold: int = 1000) -> str | None:
    """ReMe's ``ToolResultCompactor`` rewrite of one text, or None when it stays.

    Example:
        >>> out = truncate_tool_text("a" * 600 + "b" * 600, "tool_result/x.txt")
        >>> out.count("<<<TRUNCATED>>> (200 characters omitted) <<<END_TRUNCATED>>>")
        1
    """
    if not text or len(text) <= threshold:
        return None
    if TRUNCATE_OPEN in text and TRUNCATE_CLOSE in text:
        return None
    half = threshold // 2
    omitted = len(text) - threshold
    return (
        f"{text[:half]}\n\n{TRUNCATE_OPEN} ({omitted} characters omitted) {TRUNCATE_CLOSE}\n\n"
        f"{text[-half:]}\n\n[Full content saved to: {path}]"
    )


def _ids(messages: Sequence[Message], kind: type) -> set[str]:
    if kind is ToolCallPart:
        return {c.id for m in messages for c in m.tool_calls}
    return {r.tool_call_id for m in messages for r in m.tool_results}


def tool_ids_balanced(messages: Sequence[Message]) -> bool:
    """CoPaw's check: the set of tool_use ids equals the set of tool_result ids."""
    return _ids(messages, ToolCallPart) == _ids(messages, ToolResultPart)


def check_context(
    messages: Sequence[Message],
    threshold: int,
    reserve: int,
    tokens: Callable[[Message], int] = copaw_message_tokens,
) -> tuple[list[int], list[int], bool]:
    """ReMe's ``context_check``: (indexes to compact, indexes to keep, valid).

    Example:
        >>> check_context([], 1000, 500)
        ([], [], True)
    """
    if not messages:
        return [], [], True
    counts = [tokens(m) for m in messages]
    if sum(counts) < threshold:
        return [], list(range(len(messages))), True
    use_loc: dict[str, int] = {}
    for i, m in enumerate(messages):
        for call in m.tool_calls:
            use_loc[call.id] = i
    keep: set[int] = set()
    acc = 0
    for i in range(len(messages) - 1, -1, -1):
        if i in keep:
            continue
        if acc + counts[i] > reserve:
            break
        deps = {
            use_loc[r.tool_call_id]
            for r in messages[i].tool_results
            if r.tool_call_id in use_loc
            and use_loc[r.tool_call_id] not in keep
            and use_loc[r.tool_call_id] != i
        }
        extra = sum(counts[d] for d in deps)
        if acc + counts[i] + extra > reserve:
            break
        keep |= {i, *deps}
        acc += counts[i] + extra
    kept = sorted(keep)
    compact = [i for i in range(len(messages)) if i not in keep]
    kept_messages = [messages[i] for i in kept]
    return compact, kept, tool_ids_balanced(kept_messages)


def format_msgs_to_str(
    messages: Sequence[Message],
    threshold: int = FORMAT_THRESHOLD,
    *,
    include_thinking: bool = False,
    count: Callable[[str], int] = copaw_text_tokens,
) -> str:
    """ReMe's ``format_msgs_to_str`` (v0.3.0.9): newest messages first kept within ``threshold``
    tokens (the newest always), each as ``{name}:`` and one tagged line per block, joined with
    blank lines in chronological order.

    Example:
        >>> format_msgs_to_str([Message("user", (TextPart("hi"),))])
        'user:\\n<text>hi</text>'
    """
    names = {c.id: c.name for m in messages for c in m.tool_calls}
    blocks: list[str] = []
    total = 0
    for message in reversed(messages):
        lines = [f"{message.name or message.role}:"]
        for part in message.parts:
            if isinstance(part, TextPart):
                lines.append(f"<text>{_cut(part.text)}</text>")
            elif isinstance(part, ReasoningPart) and include_thinking:
                lines.append(f"<thinking>{_cut(part.text)}</thinking>")
            elif isinstance(part, MediaPart):
                lines.append(f"<image>{part.url or ''}</image>")
            elif isinstance(part, ToolCallPart):
                lines.append(f"<tool_use>{part.name} params={_cut(part.arguments)}</tool_use>")
            elif isinstance(part, ToolResultPart) and part.text:
                name = names.get(part.tool_call_id, "")
                lines.append(f"<tool_result>{name} output={_cut(part.text)}</tool_result>")
        block = "\n".join(lines)
        tokens = count(block)
        if blocks and total + tokens > threshold:
            break
        blocks.append(block)
        total += tokens
    return "\n\n".join(reversed(blocks))


def _cut(text: str) -> str:
    return text if len(text) <= 2000 else text[:2000] + "..."


class CopawCompact(Strategy):
    """``copaw-compact``: truncate old tool results, split by reserve, structured summary."""

    id = "copaw-compact"
    description = (
        "Truncate tool results outside the last n messages (ReMe's <<<TRUNCATED>>> markers), split"
        " the messages by a 10% reserve keeping tool pairs, and replace the older part with a"
        " structured summary (Goal, Constraints & Preferences, Progress, Key Decisions, Next"
        " Steps, Critical Context), merged with the previous one."
    )
    source = "CoPaw / ReMe"
    params = (
        Param(
            "max_input_length",
            "int",
            131_072,
            min=1000,
            max=10_000_000,
            help="the window CoPaw assumes",
        ),
        Param(
            "compact_ratio",
            "float",
            0.75,
            min=0.3,
            max=0.9,
            help="compact when tokens reach this fraction of max_input_length",
        ),
        Param(
            "reserve_ratio",
            "float",
            0.1,
            min=0.05,
            max=0.3,
            help="recent tokens kept verbatim, as a fraction of max_input_length",
        ),
        Param("enable_tool_result_compact", "bool", True, help="truncate old tool results"),
        Param(
            "keep_n",
            "int",
            3,
            min=1,
            max=10,
            help="last messages whose tool results are never truncated",
        ),
        Param(
            "tool_result_threshold",
            "int",
            1000,
            min=10,
            max=1_000_000,
            help="tool result texts longer than this many chars are truncated",
        ),
        Param(
            "keep_recent",
            "int",
            3,
            min=0,
            max=100,
            help="COPAW_MEMORY_COMPACT_KEEP_RECENT: fallback tail when the split is invalid",
        ),
    )

    def run(self, draft: Draft, params: dict[str, Any], summarizer: Summarizer | None) -> None:
        window = params["max_input_length"]
        threshold = int(window * params["compact_ratio"])
        reserve = int(window * params["reserve_ratio"])
        positions = [
            i for i, m in enumerate(draft.messages) if m.role not in ("system", "developer")
        ]
        previous: str | None = None
        summary_position: int | None = None
        if positions and (found := _previous_summary(draft.messages[positions[0]])) is not None:
            previous, summary_position = found, positions.pop(0)
        system_text = "\n".join(
            [p.text for p in draft.system if isinstance(p, TextPart)]
            + [
                m.text
                for m in (*draft.pinned, *draft.messages)
                if m.role in ("system", "developer")
            ]
        )
        left = threshold - copaw_text_tokens(system_text + (previous or ""))
        if left <= 0:
            draft.warn(
                "copaw-compact: the system prompt and summary already exceed the compaction"
                " threshold; nothing is compacted (CoPaw suggests /clear)"
            )
            return
        if params["enable_tool_result_compact"] and params["keep_n"] > 0:
            for position in positions[: -params["keep_n"]]:
                self._truncate_results(draft, position, params["tool_result_threshold"])
        messages = [draft.messages[p] for p in positions]
        compact, _, valid = check_context(messages, left, reserve)
        if not compact:
            return
        if not valid:
            k = params["keep_recent"]
            while k > 0 and not tool_ids_balanced(messages[-k:]):
                k -= 1
            compact = list(range(len(messages) - k)) if k > 0 else list(range(len(messages)))
            draft.warn(
                "copaw-compact: the reserve split left a tool call without its result; fell back"
                f" to keeping the last {k} messages"
            )
        if not compact:
            return
        compacted = set(compact)
        if max(compact) > min(
            (i for i in range(len(messages)) if i not in compacted), default=len(messages)
        ):
            draft.warn(
                "copaw-compact: a kept tool result pulled in its far-back tool_use, so kept and"
                " compacted messages interleave"
            )
        to_compact = [messages[i] for i in compact]
        summary = (summarizer or FactSummarizer()).summarize(
            to_compact, previous=previous, prompt=COMPACT_PROMPT
        )
        if not summary:
            draft.warn("copaw-compact: the summary is empty; ReMe replaces the previous one anyway")
        doomed = [positions[i] for i in compact]
        if summary_position is not None:
            doomed.append(summary_position)
        first_body = positions[0] if positions else len(draft.messages)
        if summary_position is not None:
            first_body = min(first_body, summary_position)
        before = sum(1 for d in doomed if d < first_body)
        draft.drop(sorted(doomed), "summarize-range", "compacted into the summary")
        draft.insert(
            first_body - before,
            Message("user", (TextPart(summary_message_text(summary)),)),
            "ReMe summary (<previous-summary>)",
        )

    def _truncate_results(self, draft: Draft, position: int, threshold: int) -> None:
        message = draft.messages[position]
        parts = list(message.parts)
        changed: list[tuple[int, str]] = []
        for j, part in enumerate(parts):
            if not isinstance(part, ToolResultPart):
                continue
            content = list(part.content)
            for k, item in enumerate(content):
                if not isinstance(item, TextPart):
                    continue
                if truncate_tool_text(item.text, "", threshold) is None:
                    continue
                artifact = draft.keep("tool_result", item.text, f"tool output {part.tool_call_id}")
                cut = truncate_tool_text(item.text, f"tool_result/{artifact.id}.txt", threshold)
                assert cut is not None
                content[k] = replace(item, text=cut)
                changed.append((j, artifact.id))
            parts[j] = replace(part, content=tuple(content))
        for j, artifact_id in changed:
            draft.replace_message(
                position,
                replace(message, parts=tuple(parts)),
                "truncate",
                "tool result truncated (ReMe)",
                part_index=j,
                artifact_id=artifact_id,
            )
            message = draft.messages[position]
