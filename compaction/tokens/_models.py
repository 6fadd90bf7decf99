"""Which encoding counts a model's tokens, and whether that count is exact or approximate.

OpenAI publishes its tokenizers: GPT-4o, GPT-4.1, GPT-4.5, GPT-5, the o-series and gpt-oss use
``o200k_base``; GPT-4, GPT-3.5 and the text-embedding-3 and ada-002 embeddings use ``cl100k_base``.
Other vendors (Anthropic, Google, Qwen, DeepSeek, Meta, Mistral) publish no tiktoken encoding or
none that ships here: they are counted with ``cl100k_base`` and flagged approximate, to be
reconciled against the usage the provider reports.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from compaction.tokens._encodings import CL100K_BASE, O200K_BASE, available_encodings

__all__ = ["EncodingChoice", "encoding_for_model"]

# Matched against the bare model name (provider prefix and "ft:" removed, lower case).
_O200K = re.compile(
    r"^(?:gpt-4o|chatgpt-4o|gpt-4\.1|gpt-4\.5|gpt-5|gpt-oss|o[134](?:-|$)|codex-|computer-use)"
)
_CL100K = re.compile(r"^(?:gpt-4|gpt-3\.5|gpt-35|text-embedding-3|text-embedding-ada-002)")


@dataclass(frozen=True)
class EncodingChoice:
    """The encoding to count a model with; ``approximate`` when it is not the model's own."""

    encoding: str
    approximate: bool


def _bare_name(model: str) -> str:
    name = model.strip().lower()
    if name.startswith("ft:"):
        name = name[3:]
    # "openai/gpt-4o", "openrouter/openai/gpt-4o", "azure/gpt-4o": the model is the last segment.
    return name.rsplit("/", 1)[-1]


def encoding_for_model(model: str | None) -> EncodingChoice:
    """The encoding that counts ``model``'s tokens, exact or approximate.

    Args:
        model: a model name as a client sends it, with or without a provider prefix
            ("openai/gpt-4o") or date suffix ("gpt-4o-2024-08-06"); None when unknown.

    Returns:
        ``o200k_base`` (exact) for OpenAI's current models, ``cl100k_base`` (exact) for GPT-4 and
        GPT-3.5, ``cl100k_base`` (approximate) for everything else. An o200k model on a machine
        without the o200k data gets ``cl100k_base``, approximate.

    Example:
        >>> encoding_for_model("anthropic/claude-sonnet-4-5")
        EncodingChoice(encoding='cl100k_base', approximate=True)
    """
    if not model:
        return EncodingChoice(CL100K_BASE, approximate=True)
    name = _bare_name(model)
    if _O200K.match(name):
        if O200K_BASE in available_encodings():
            return EncodingChoice(O200K_BASE, approximate=False)
        return EncodingChoice(CL100K_BASE, approximate=True)
    if _CL100K.match(name):
        return EncodingChoice(CL100K_BASE, approximate=False)
    return EncodingChoice(CL100K_BASE, approximate=True)
