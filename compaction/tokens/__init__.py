"""Token counting: offline tiktoken encodings, a cached message counter, media estimates.

ctxweb counts exactly with tiktoken: ``o200k_base`` for OpenAI's current models, ``cl100k_base``
for GPT-4 and GPT-3.5 and, flagged approximate, for every model without a public tokenizer
(:func:`encoding_for_model`). :class:`TokenCounter` counts each distinct text once per encoding
(:class:`TokenCache`); images and files get a documented per-item estimate (:func:`media_tokens`).
Each reference agent's own estimator lives in :mod:`compaction.tokens.estimators`.

Example:
    >>> from compaction.messages.model import Message, TextPart
    >>> counter = TokenCounter(get_tokenizer(encoding_for_model("gpt-4o").encoding))
    >>> counter.count_message(Message(role="user", parts=(TextPart("hello world"),))).total
    5
"""

from __future__ import annotations

from compaction.tokens._counter import (
    MESSAGE_OVERHEAD,
    NAME_OVERHEAD,
    REQUEST_OVERHEAD,
    TOOLS_OVERHEAD,
    MessageCount,
    TokenCache,
    TokenCounter,
)
from compaction.tokens._encodings import Tokenizer, available_encodings, get_tokenizer
from compaction.tokens._media import (
    AUDIO_DEFAULT_TOKENS,
    FILE_DEFAULT_TOKENS,
    IMAGE_DEFAULT_TOKENS,
    anthropic_image_tokens,
    image_size,
    media_tokens,
    openai_image_tokens,
)
from compaction.tokens._models import EncodingChoice, encoding_for_model

__all__ = [
    "AUDIO_DEFAULT_TOKENS",
    "FILE_DEFAULT_TOKENS",
    "IMAGE_DEFAULT_TOKENS",
    "MESSAGE_OVERHEAD",
    "NAME_OVERHEAD",
    "REQUEST_OVERHEAD",
    "TOOLS_OVERHEAD",
    "EncodingChoice",
    "MessageCount",
    "TokenCache",
    "TokenCounter",
    "Tokenizer",
    "anthropic_image_tokens",
    "available_encodings",
    "encoding_for_model",
    "get_tokenizer",
    "image_size",
    "media_tokens",
    "openai_image_tokens",
]
