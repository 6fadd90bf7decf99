"""The library's errors: one exception type for malformed input, naming the bad field's path."""

from __future__ import annotations

__all__ = ["CompactionError", "FormatError", "StrategyError", "SummarizerError"]


class CompactionError(Exception):
    """Base class of every error the ``compaction`` library raises on purpose."""


class FormatError(CompactionError):
    """Malformed input: ``path`` names the bad field (``messages.3.content.0.text``).

    Example:
        >>> raise FormatError("messages.0.role", "unknown role 'robot'")
        Traceback (most recent call last):
        compaction.errors.FormatError: messages.0.role: unknown role 'robot'
    """

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}" if path else reason)
        self.path = path
        self.reason = reason

    def fields(self) -> dict[str, str]:
        """The error as ``{path: reason}``, the shape of the API's error ``fields``."""
        return {self.path or "request": self.reason}


class StrategyError(CompactionError):
    """A strategy was asked for something it cannot do (unknown id, bad parameter)."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}" if path else reason)
        self.path = path
        self.reason = reason

    def fields(self) -> dict[str, str]:
        """The error as ``{path: reason}``."""
        return {self.path or "strategy": self.reason}


class SummarizerError(CompactionError):
    """A summarizer could not produce a summary (an LLM provider's HTTP error, a timeout, an
    empty reply). Strategies report it as their seed reports a failed summary call.

    Example:
        >>> raise SummarizerError("openai: HTTP 500")
        Traceback (most recent call last):
        compaction.errors.SummarizerError: openai: HTTP 500
    """
