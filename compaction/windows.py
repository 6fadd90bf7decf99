"""Context windows of common models, and the window a model call itself selects.

A call says its window when a request header selects a longer one (Anthropic's
``anthropic-beta: context-1m-2025-08-07`` on the models that take it), when the model name carries
Claude Code's ``[1m]`` suffix (``claude-sonnet-4-5[1m]``), or when the client states it (the REST
``context_window``). Otherwise the window is guessed: from :data:`MODEL_WINDOWS` (looked up by the
longest matching prefix of the model name, after dropping a provider prefix such as ``openai/`` or
``anthropic/``), else :data:`DEFAULT_CONTEXT_WINDOW`. :class:`WindowGuess` says which.

Example:
    >>> context_window_for_model("claude-sonnet-4-5-20250929")
    200000
    >>> context_window_for_model("something-new") is None
    True
    >>> beta = {"anthropic-beta": "context-1m-2025-08-07"}
    >>> context_window_for_call("claude-sonnet-4-5-20250929", beta)
    WindowGuess(tokens=1000000, source='request')
    >>> context_window_for_call("claude-sonnet-4-5-20250929", {})
    WindowGuess(tokens=200000, source='model')
    >>> context_window_for_call("something-new", {})
    WindowGuess(tokens=128000, source='default')
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal, TypeVar

__all__ = [
    "DEFAULT_CONTEXT_WINDOW",
    "HEADER_WINDOWS",
    "LONG_CONTEXT_SUFFIX",
    "MODEL_WINDOWS",
    "WINDOW_SOURCES",
    "HeaderWindow",
    "WindowGuess",
    "context_window_for_call",
    "context_window_for_model",
]

#: Used when neither the request, the session nor this table knows the window.
DEFAULT_CONTEXT_WINDOW = 128_000

#: Where a window came from: the call said so, or it was guessed from the model, or by default.
WINDOW_SOURCES = ("request", "model", "default")

WindowSource = Literal["request", "model", "default"]
_T = TypeVar("_T")

#: Model name prefix -> context window in tokens (the input window the provider publishes). Longest
#: prefix wins. As of 2026-11: each figure checked on 2026-11-27 against the providers' model pages
#: or release notes (where only a third party's catalog gave it, the comment says so).
MODEL_WINDOWS: dict[str, int] = {
    # OpenAI
    "gpt-5": 400_000,  # gpt-5, -mini, -nano, -codex; gpt-5.1, gpt-5.1-codex(-max), gpt-5.2...
    "gpt-5-chat": 128_000,
    "gpt-5.1-chat": 128_000,
    "gpt-5.4": 1_050_000,  # gateways' and resellers' model pages (1,050,000)
    "gpt-5.5": 1_050_000,  # idem
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
    # Anthropic: 200K, and 1M with a header on some models (HEADER_WINDOWS)
    "claude-sonnet-5": 1_000_000,  # native 1M (Claude Code 2.1.197's release notes)
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
    "gemini-3": 1_048_576,
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


@dataclass(frozen=True)
class HeaderWindow:
    """A longer window that a request header selects: ``header`` holds, among its
    comma-separated values, one starting with ``value_prefix``."""

    header: str
    value_prefix: str
    tokens: int


#: Anthropic's 1M-context beta (``anthropic-beta: context-1m-2025-08-07``; any later date of the
#: same beta is taken too). Model name prefix -> the header selecting the longer window; longest
#: prefix wins. As of 2026-11 (checked 2026-11-27): Claude Sonnet 4, 4.5 and 4.6, Opus 4.6.
_CONTEXT_1M = HeaderWindow("anthropic-beta", "context-1m-", 1_000_000)
HEADER_WINDOWS: dict[str, HeaderWindow] = {
    "claude-sonnet-4": _CONTEXT_1M,  # claude-sonnet-4-20250514, -4-5, -4-6
    "claude-opus-4-6": _CONTEXT_1M,
}

#: A model name ending so asks for the 1M window (Claude Code's ``sonnet[1m]``; some clients send
#: it on to the API).
LONG_CONTEXT_SUFFIX = "[1m]"
_SUFFIX_TOKENS = 1_000_000


@dataclass(frozen=True)
class WindowGuess:
    """A call's context window and where it came from: ``"request"`` (the call said so: a
    header, the model name's ``[1m]`` suffix, or the client's stated window), ``"model"``
    (:data:`MODEL_WINDOWS`: guessed) or ``"default"`` (:data:`DEFAULT_CONTEXT_WINDOW`:
    guessed)."""

    tokens: int
    source: WindowSource

    @property
    def guessed(self) -> bool:
        """Whether the call did not say its window."""
        return self.source != "request"


def _name(model: str) -> tuple[str, bool]:
    """The model name as the tables know it, and whether it carried the ``[1m]`` suffix."""
    name = model.strip().lower().rsplit("/", 1)[-1]
    long = name.endswith(LONG_CONTEXT_SUFFIX)
    if long:
        name = name[: -len(LONG_CONTEXT_SUFFIX)].strip()
    return name, long


def _longest(table: Mapping[str, _T], name: str) -> _T | None:
    best: str | None = None
    for prefix in table:
        if name.startswith(prefix) and (best is None or len(prefix) > len(best)):
            best = prefix
    return table[best] if best is not None else None


def context_window_for_model(model: str | None) -> int | None:
    """The context window of ``model`` from :data:`MODEL_WINDOWS`, or None when unknown.

    A ``[1m]`` suffix names the 1M window.

    Example:
        >>> context_window_for_model("openai/gpt-4.1-mini"), context_window_for_model("o3")
        (1047576, 200000)
        >>> context_window_for_model("claude-sonnet-4-5[1m]")
        1000000
    """
    if not model:
        return None
    name, long = _name(model)
    if long:
        return _SUFFIX_TOKENS
    return _longest(MODEL_WINDOWS, name)


def _header_values(headers: Mapping[str, str] | Iterable[tuple[str, str]], header: str) -> set[str]:
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    return {
        value.strip().lower()
        for name, values in pairs
        if name.lower() == header
        for value in values.split(",")
        if value.strip()
    }


def context_window_for_call(
    model: str | None,
    headers: Mapping[str, str] | Iterable[tuple[str, str]] = (),
    *,
    stated: int | None = None,
) -> WindowGuess:
    """The context window of a model call: what the call says, else the model's, else the
    default.

    Args:
        model: the request's model name, as sent (a provider prefix and a ``[1m]`` suffix are
            understood).
        headers: the request's headers, a mapping or (name, value) pairs (names in any case;
            a header sent several times, or with comma-separated values, counts each value).
        stated: a window the client stated itself (the REST ``context_window``): it wins.

    Example:
        >>> betas = "fine-grained-tool-streaming-2025-05-14,context-1m-2025-08-07"
        >>> context_window_for_call("claude-opus-4-6", [("Anthropic-Beta", betas)])
        WindowGuess(tokens=1000000, source='request')
        >>> context_window_for_call("claude-haiku-4-5", {"anthropic-beta": "context-1m-2025-08-07"})
        WindowGuess(tokens=200000, source='model')
        >>> context_window_for_call("claude-sonnet-4-6[1m]").tokens
        1000000
        >>> context_window_for_call("gpt-5.1-codex", stated=272_000)
        WindowGuess(tokens=272000, source='request')
    """
    if stated:
        return WindowGuess(int(stated), "request")
    if model:
        name, long = _name(model)
        if long:
            return WindowGuess(_SUFFIX_TOKENS, "request")
        longer = _longest(HEADER_WINDOWS, name)
        if longer is not None and any(
            value.startswith(longer.value_prefix)
            for value in _header_values(headers, longer.header)
        ):
            return WindowGuess(longer.tokens, "request")
        known = _longest(MODEL_WINDOWS, name)
        if known is not None:
            return WindowGuess(known, "model")
    return WindowGuess(DEFAULT_CONTEXT_WINDOW, "default")
