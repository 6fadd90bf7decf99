"""Context windows and output limits of common models, for sessions that do not state theirs.

Looked up by the longest matching prefix of the model name, after dropping a provider prefix
(``openai/``, ``anthropic/``...). Figures are the providers' published input windows.

Example:
    >>> context_window_for_model("claude-sonnet-4-5-20250929")
    200000
    >>> context_window_for_model("something-new") is None
    True
"""

from __future__ import annotations

__all__ = ["DEFAULT_CONTEXT_WINDOW", "MODEL_WINDOWS", "context_window_for_model"]

#: Used when neither the request, the session nor this table knows the window.
DEFAULT_CONTEXT_WINDOW = 128_000

#: Model name prefix -> context window in tokens. Longest prefix wins.
MODEL_WINDOWS: dict[str, int] = {
    # OpenAI
    "gpt-5": 400_000,
    "gpt-4.1": 1_047_576,
    "gpt-4o": 128_000,
    "chatgpt-4o": 128_000,
    "gpt-4-turbo": 128_000,
    "gpt-4-32k": 32_768,
    "gpt-4": 8_192,
    "gpt-3.5-turbo": 16_385,
    "o1": 200_000,
    "o1-mini": 128_000,
    "o3": 200_000,
    "o3-mini": 200_000,
    "o4-mini": 200_000,
    "codex-mini": 200_000,
    "gpt-oss": 131_072,
    # Anthropic
    "claude-opus-4": 200_000,
    "claude-sonnet-4": 200_000,
    "claude-haiku-4": 200_000,
    "claude-3-7-sonnet": 200_000,
    "claude-3-5-sonnet": 200_000,
    "claude-3-5-haiku": 200_000,
    "claude-3-opus": 200_000,
    "claude-3-haiku": 200_000,
    "claude": 200_000,
    # Google
    "gemini-2.5": 1_048_576,
    "gemini-2.0": 1_048_576,
    "gemini-1.5-pro": 2_097_152,
    "gemini-1.5-flash": 1_048_576,
    "gemini": 1_048_576,
    # Qwen
    "qwen3-coder": 262_144,
    "qwen3": 131_072,
    "qwen2.5": 131_072,
    "qwen-max": 32_768,
    "qwen-plus": 131_072,
    "qwen-turbo": 1_000_000,
    # DeepSeek
    "deepseek-chat": 128_000,
    "deepseek-reasoner": 128_000,
    "deepseek-v3": 128_000,
    "deepseek-r1": 128_000,
    # Others often seen in agent logs
    "llama-3": 128_000,
    "mistral-large": 128_000,
    "codestral": 256_000,
}


def context_window_for_model(model: str | None) -> int | None:
    """The context window of ``model`` from :data:`MODEL_WINDOWS`, or None when unknown."""
    if not model:
        return None
    name = model.strip().lower().rsplit("/", 1)[-1]
    best: str | None = None
    for prefix in MODEL_WINDOWS:
        if name.startswith(prefix) and (best is None or len(prefix) > len(best)):
            best = prefix
    return MODEL_WINDOWS[best] if best is not None else None
