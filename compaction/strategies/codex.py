"""Codex's compaction (openai/codex ``codex-rs/core/src/compact.rs``), as ``codex-compact``.

The new history is the initial context (system and developer messages, AGENTS.md and environment
context messages), then the most recent *real* user messages, newest first up to 20,000 approximate
tokens (``ceil(bytes/4)``) with the last one truncated to fit and put back in chronological order,
then one user message ``SUMMARY_PREFIX + "\\n" + summary`` (``docs/seed-strategies.md`` §1b).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from compaction.messages.model import Message, TextPart
from compaction.strategies.base import Draft, Param, Strategy
from compaction.summarizers import FactSummarizer, Summarizer
from compaction.tokens.estimators import codex_approx_tokens
from compaction.turns import is_user_turn_start

__all__ = [
    "COMPACT_PROMPT",
    "COMPACT_USER_MESSAGE_MAX_TOKENS",
    "SUMMARY_PREFIX",
    "CodexCompact",
    "build_compacted_history",
    "content_items_to_text",
    "is_session_prefix",
    "truncate_middle_tokens",
]

COMPACT_USER_MESSAGE_MAX_TOKENS = 20_000

COMPACT_PROMPT = (
    "You are performing a CONTEXT CHECKPOINT COMPACTION. Create a handoff summary for another LLM"
    " that will resume the task.\n\nInclude:\n- Goal / user objective\n- Current progress and key"
    " decisions made\n- Important context, constraints, or user preferences\n- What remains to be"
    " done (clear next steps)\n- Any critical data, examples, or references needed to continue\n\n"
    "Be concise, structured, and focused on helping the next LLM seamlessly continue the work.\n"
)

SUMMARY_PREFIX = (
    "Another language model started to solve this problem and produced a summary of its thinking"
    " process. You also have access to the state of the tools that were used by that language"
    " model. Use this to build on the work that has already been done and avoid duplicating work."
    " Here is the summary produced by the other language model, use the information in this"
    " summary to  assist with your own analysis:"
)

_PREFIX_MARKERS = (
    "# agents.md instructions",
    "<user_instructions>",
    "<environment_context>",
)


def content_items_to_text(texts: Sequence[str]) -> str | None:
    """Codex's ``content_items_to_text``: non-empty texts joined with newlines; None if none.

    Example:
        >>> content_items_to_text(["hello", "", "world"])
        'hello\\nworld'
    """
    kept = [t for t in texts if t]
    return "\n".join(kept) if kept else None


def is_session_prefix(text: str) -> bool:
    """Whether a user message is AGENTS.md instructions or environment context (not the user)."""
    head = text.lstrip().lower()
    return head.startswith(_PREFIX_MARKERS)


def truncate_middle_tokens(text: str, max_tokens: int) -> str:
    """Keep the head and tail of ``text`` within ``max_tokens*4`` bytes, with Codex's marker
    ``…{N} tokens truncated…`` in the middle (N in approximate tokens of what was removed)."""
    raw = text.encode("utf-8")
    budget = max(max_tokens, 0) * 4
    if len(raw) <= budget:
        return text
    head = raw[: budget // 2].decode("utf-8", errors="ignore")
    tail = (
        raw[len(raw) - (budget - budget // 2) :].decode("utf-8", errors="ignore") if budget else ""
    )
    removed = len(raw) - len(head.encode("utf-8")) - len(tail.encode("utf-8"))
    return f"{head}…{-(-removed // 4)} tokens truncated…{tail}"


def build_compacted_history(
    user_messages: Sequence[str], summary_text: str, max_tokens: int
) -> list[str]:
    """Codex's ``build_compacted_history_with_limit`` on texts: the kept user messages (the oldest
    kept one possibly truncated) in order, then the summary text.

    Example:
        >>> out = build_compacted_history(["word " * 200], "SUMMARY", 16)
        >>> len(out), "tokens truncated" in out[0], out[1]
        (2, True, 'SUMMARY')
    """
    selected: list[str] = []
    remaining = max_tokens
    for text in reversed(user_messages):
        if remaining <= 0:
            break
        tokens = codex_approx_tokens(text)
        if tokens <= remaining:
            selected.append(text)
            remaining -= tokens
        else:
            selected.append(truncate_middle_tokens(text, remaining))
            break
    selected.reverse()
    return [*selected, summary_text or "(no summary available)"]


class CodexCompact(Strategy):
    """``codex-compact``: summary plus up to 20K tokens of the most recent real user messages."""

    id = "codex-compact"
    description = (
        "Replace the history with the most recent real user messages (up to 20K approximate tokens,"
        " the oldest kept one truncated) and a user summary message with Codex's prefix."
    )
    source = "Codex"
    params = (
        Param(
            "max_user_tokens",
            "int",
            COMPACT_USER_MESSAGE_MAX_TOKENS,
            min=0,
            max=1_000_000,
            help="approximate tokens (ceil(bytes/4)) of recent user messages kept",
        ),
    )

    def run(self, draft: Draft, params: dict[str, Any], summarizer: Summarizer | None) -> None:
        messages = draft.messages
        prefix_positions: list[int] = []
        user_positions: list[int] = []
        user_texts: list[str] = []
        for i, message in enumerate(messages):
            if message.role in ("system", "developer"):
                prefix_positions.append(i)
                continue
            if not is_user_turn_start(message):
                continue
            text = content_items_to_text([p.text for p in message.parts if isinstance(p, TextPart)])
            if text is None:
                continue
            if is_session_prefix(text):
                prefix_positions.append(i)
            elif not text.startswith(SUMMARY_PREFIX):
                user_positions.append(i)
                user_texts.append(text)
        summary = (summarizer or FactSummarizer()).summarize(
            [m for i, m in enumerate(messages) if i not in set(prefix_positions)],
            previous=None,
            prompt=COMPACT_PROMPT,
        )
        summary_text = f"{SUMMARY_PREFIX}\n{summary}" if summary else ""
        kept = build_compacted_history(user_texts, summary_text, params["max_user_tokens"])
        kept_users = kept[:-1]
        first_kept = len(user_positions) - len(kept_users)
        keep_positions = set(prefix_positions)
        for offset, text in enumerate(kept_users):
            position = user_positions[first_kept + offset]
            keep_positions.add(position)
            if text != user_texts[first_kept + offset]:
                artifact = draft.keep("message", user_texts[first_kept + offset], "user message")
                draft.replace_message(
                    position,
                    Message("user", (TextPart(text),)),
                    "truncate",
                    "oldest kept user message truncated to the 20K budget",
                    artifact_id=artifact.id,
                )
            elif len(messages[position].parts) != 1:
                draft.replace_message(
                    position,
                    Message("user", (TextPart(text),)),
                    "truncate",
                    "user message reduced to its text",
                )
        draft.drop(
            [i for i in range(len(draft.messages)) if i not in keep_positions],
            "summarize-range",
            "summarized",
        )
        draft.insert(len(draft.messages), Message("user", (TextPart(kept[-1]),)), "Codex summary")
        draft.warn(
            "codex-compact: Heads up: Long conversations and multiple compactions can cause the"
            " model to be less accurate."
        )
