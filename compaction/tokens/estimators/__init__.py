"""The reference agents' own token estimators, with their exact arithmetic, on our message model.

A faithful strategy must decide exactly as its seed would, so each seed's estimator is reproduced
here as it is written (``docs/seed-strategies.md`` section 6): BaseAgent floor(chars/4), Codex
ceil(bytes/4), picoclaw runes*2/5, LLM4S's tokenizer plus fixed overheads, nanobot's payload through
cl100k, CoPaw's bytes/3.75. :data:`ESTIMATORS` makes each one a per-message function so a view can
compare them with tiktoken on the same turn.

Mapping from ctxweb's model to the seeds' messages. Every seed speaks OpenAI-chat-shaped messages,
where each tool result is its own ``tool`` message. So one of our messages becomes one seed message
for its parts other than tool results (or for nothing, when it is empty), plus one ``tool`` message
per :class:`ToolResultPart` whose ``tool_call_id`` is the part's and whose content is the result's
parts; each of those pays the seed's per-message overhead. (An OpenAI-chat tool message is already
exactly one such message; an Anthropic user message with two ``tool_result`` blocks is two.) Within
a seed message: text parts are its content (joined with newlines where the seed holds one string),
readable reasoning parts its ``reasoning_content``, tool calls its ``tool_calls`` (type
``"function"``), media parts its images or media items.
"""

from __future__ import annotations

from compaction.tokens.estimators._baseagent import (
    BASEAGENT_IMAGE_TOKENS,
    BASEAGENT_MESSAGE_OVERHEAD,
    baseagent_message_tokens,
    baseagent_text_tokens,
)
from compaction.tokens.estimators._codex import codex_approx_tokens, codex_message_tokens
from compaction.tokens.estimators._copaw import (
    COPAW_DIVISOR,
    copaw_message_tokens,
    copaw_text_tokens,
)
from compaction.tokens.estimators._llm4s import (
    LLM4S_CONVERSATION_OVERHEAD,
    LLM4S_MESSAGE_OVERHEAD,
    LLM4S_TOOL_CALL_OVERHEAD,
    llm4s_conversation_tokens,
    llm4s_message_tokens,
)
from compaction.tokens.estimators._nanobot import (
    NANOBOT_MIN_TOKENS,
    nanobot_message_tokens,
    nanobot_payload_tokens,
    nanobot_payloads,
)
from compaction.tokens.estimators._picoclaw import (
    PICOCLAW_MEDIA_TOKENS,
    PICOCLAW_MESSAGE_OVERHEAD_CHARS,
    picoclaw_message_tokens,
    picoclaw_tooldefs_tokens,
)
from compaction.tokens.estimators._registry import ESTIMATORS, EstimatorFactory, MessageEstimator

__all__ = [
    "BASEAGENT_IMAGE_TOKENS",
    "BASEAGENT_MESSAGE_OVERHEAD",
    "COPAW_DIVISOR",
    "ESTIMATORS",
    "LLM4S_CONVERSATION_OVERHEAD",
    "LLM4S_MESSAGE_OVERHEAD",
    "LLM4S_TOOL_CALL_OVERHEAD",
    "NANOBOT_MIN_TOKENS",
    "PICOCLAW_MEDIA_TOKENS",
    "PICOCLAW_MESSAGE_OVERHEAD_CHARS",
    "EstimatorFactory",
    "MessageEstimator",
    "baseagent_message_tokens",
    "baseagent_text_tokens",
    "codex_approx_tokens",
    "codex_message_tokens",
    "copaw_message_tokens",
    "copaw_text_tokens",
    "llm4s_conversation_tokens",
    "llm4s_message_tokens",
    "nanobot_message_tokens",
    "nanobot_payload_tokens",
    "nanobot_payloads",
    "picoclaw_message_tokens",
    "picoclaw_tooldefs_tokens",
]
