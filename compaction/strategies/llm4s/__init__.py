"""LLM4S's context pipeline (PR #228, ``org.llm4s.context``), as ``llm4s-pipeline``.

``ContextManager.manageContext(conversation, budget)`` with ``ContextConfig.default``
(``docs/seed-strategies.md`` §3), in four steps that always run in this order:

1. **ToolDeterministicCompaction** (:func:`compress_tool_output`): every tool output over 8 KB
   (UTF-8) is externalized behind ``[EXTERNALIZED: content_<sha256> | TYPE | summary]``; one over
   2 KB is compressed inline by content type (JSON/YAML, log, error, binary, text).
2. **HistoryCompression** (:func:`compress_to_digest`), only when the conversation's count is over
   the budget: the last 5 semantic blocks (:func:`semantic_blocks`) stay; each older block becomes
   a system message ``[HISTORY_SUMMARY]\\n<regex digest>``, consolidated into one past 400 tokens.
3. **LLMHistorySqueeze**, only when still over budget and a summarizer is given: each digest is
   rewritten by the summarizer with LLM4S's own prompt, and (quirk) moved to the end.
4. **FinalTokenTrim** (:func:`trim_to_budget`): unless the count is within ``budget × 0.92``, keep
   the first message if it is a digest, then the newest messages that fit, stopping at the first
   that does not.

Tokens are LLM4S's ``ConversationTokenCounter`` through the plan's counter: text tokens + 4 per
message, name + arguments + 10 per tool call, ``"tool_call_id:" + id`` per tool message, + 10 per
conversation. As in LLM4S, where the system prompt is injected at send time, the conversation is
the history: a top-level system prompt and the leading system or developer messages stay as they
are and do not count against the budget. Quirks are reproduced by default; the ones that hurt
(orphaned tool pairs, text compression that grows, the squeezed digest moving to the end) each
have an option, and a warning says when they fire. Externalized outputs are kept as artifacts
whose id is the same sha256 as the ``content_`` key.
"""

from __future__ import annotations

from compaction.strategies.llm4s._context_manager import manage_context
from compaction.strategies.llm4s._history_compressor import DEFAULT_MAX_BLOCKS as DEFAULT_MAX_BLOCKS
from compaction.strategies.llm4s._history_compressor import (
    DEFAULT_SUMMARY_TARGET as DEFAULT_SUMMARY_TARGET,
)
from compaction.strategies.llm4s._history_compressor import (
    HISTORY_SUMMARY,
    block_digest,
    compress_to_digest,
)
from compaction.strategies.llm4s._llm_compressor import DIGEST_PROMPT
from compaction.strategies.llm4s._pipeline_state import STEP_NAMES as STEP_NAMES
from compaction.strategies.llm4s._pipeline_state import ManagedConversation, PipelineStep
from compaction.strategies.llm4s._pipeline_strategy import Llm4sPipeline
from compaction.strategies.llm4s._semantic_blocks import Block, semantic_blocks
from compaction.strategies.llm4s._token_counter import Count as Count
from compaction.strategies.llm4s._token_counter import _MessageTokens as _MessageTokens
from compaction.strategies.llm4s._token_counter import conversation_tokens
from compaction.strategies.llm4s._token_window import DEFAULT_HEADROOM as DEFAULT_HEADROOM
from compaction.strategies.llm4s._token_window import fits_in_budget, trim_to_budget, usage_info
from compaction.strategies.llm4s._tool_output_compressor import (
    EXTERNALIZE_BYTES as EXTERNALIZE_BYTES,
)
from compaction.strategies.llm4s._tool_output_compressor import INLINE_BYTES as INLINE_BYTES
from compaction.strategies.llm4s._tool_output_compressor import (
    compress_tool_output,
    content_summary,
    detect_content_type,
)

__all__ = [
    "DIGEST_PROMPT",
    "HISTORY_SUMMARY",
    "Block",
    "Llm4sPipeline",
    "ManagedConversation",
    "PipelineStep",
    "block_digest",
    "compress_to_digest",
    "compress_tool_output",
    "content_summary",
    "conversation_tokens",
    "detect_content_type",
    "fits_in_budget",
    "manage_context",
    "semantic_blocks",
    "trim_to_budget",
    "usage_info",
]
