"""The ``ContextManager`` pipeline's record (``docs/seed-strategies.md`` §3.2): its step names, the
reported steps and result, its configuration and its working state over items.
"""

from __future__ import annotations

from dataclasses import dataclass

from compaction.messages.model import Message
from compaction.strategies.llm4s._history_compressor import (
    DEFAULT_MAX_BLOCKS,
    DEFAULT_SUMMARY_TARGET,
)
from compaction.strategies.llm4s._token_counter import _Item
from compaction.strategies.llm4s._token_window import DEFAULT_HEADROOM
from compaction.strategies.llm4s._tool_output_compressor import EXTERNALIZE_BYTES, INLINE_BYTES

STEP_NAMES = ("ToolDeterministicCompaction", "HistoryCompression", "LLMHistorySqueeze")


@dataclass(frozen=True)
class PipelineStep:
    """One reported step of the pipeline."""

    name: str
    tokens_before: int
    tokens_after: int
    applied: bool


@dataclass(frozen=True)
class ManagedConversation:
    """What :func:`manage_context` returns: the messages and the four steps, in order."""

    messages: tuple[Message, ...]
    original_tokens: int
    final_tokens: int
    steps: tuple[PipelineStep, ...]


@dataclass(frozen=True)
class _Config:
    budget: int
    headroom: float = DEFAULT_HEADROOM
    max_blocks: int = DEFAULT_MAX_BLOCKS
    summary_target: int = DEFAULT_SUMMARY_TARGET
    deterministic: bool = True
    llm: bool = True
    externalize_bytes: int = EXTERNALIZE_BYTES
    inline_bytes: int = INLINE_BYTES
    keep_tool_pairs: bool = False
    no_growth: bool = False
    digest_in_place: bool = False


@dataclass
class _Run:
    """The pipeline's working state over items, with what each position became."""

    items: list[_Item]
    steps: list[PipelineStep]
    outputs: dict[tuple[int, int], tuple[str, str, str]]  # (pos, part) -> (old, new, action)
    digested: list[int]
    trimmed: list[int]
    notes: list[str]
