"""Reported usage, normalized: every provider's numbers in one shape with one meaning.

``input_tokens`` is everything the model read, cached or not. Anthropic's ``input_tokens``
excludes cache reads and cache writes, so they are added; OpenAI's ``prompt_tokens`` and
``input_tokens``, and OpenTelemetry's ``gen_ai.usage.input_tokens``, already include cached tokens.

Example:
    >>> normalize_usage({"input_tokens": 10, "cache_read_input_tokens": 90, "output_tokens": 5})
    {'input_tokens': 100, 'output_tokens': 5, 'cache_read_tokens': 90, 'cache_write_tokens': 0}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from compaction.errors import FormatError

__all__ = ["normalize_usage"]


def _int(usage: Mapping[str, Any], key: str, path: str) -> int:
    value = usage.get(key)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise FormatError(f"{path}.{key}", "expected a non-negative number")
    return int(value)


def normalize_usage(usage: Mapping[str, Any], *, path: str = "usage") -> dict[str, int]:
    """Usage of any supported provider as ``input_tokens`` (cache included), ``output_tokens``,
    ``cache_read_tokens`` and ``cache_write_tokens``.

    Raises:
        FormatError: a count is not a non-negative number, or ``usage`` is not an object.
    """
    if not isinstance(usage, Mapping):
        raise FormatError(path, "expected an object")
    if "prompt_tokens" in usage:  # OpenAI Chat Completions
        details = usage.get("prompt_tokens_details") or {}
        cached = (
            _int(details, "cached_tokens", f"{path}.prompt_tokens_details")
            if isinstance(details, Mapping)
            else 0
        )
        return {
            "input_tokens": _int(usage, "prompt_tokens", path),
            "output_tokens": _int(usage, "completion_tokens", path),
            "cache_read_tokens": cached,
            "cache_write_tokens": 0,
        }
    if "cache_read_input_tokens" in usage or "cache_creation_input_tokens" in usage:
        read = _int(usage, "cache_read_input_tokens", path)
        write = _int(usage, "cache_creation_input_tokens", path)
        return {
            "input_tokens": _int(usage, "input_tokens", path) + read + write,
            "output_tokens": _int(usage, "output_tokens", path),
            "cache_read_tokens": read,
            "cache_write_tokens": write,
        }
    if "gen_ai.usage.input_tokens" in usage:  # OpenTelemetry GenAI attributes
        return {
            "input_tokens": _int(usage, "gen_ai.usage.input_tokens", path),
            "output_tokens": _int(usage, "gen_ai.usage.output_tokens", path),
            "cache_read_tokens": _int(usage, "gen_ai.usage.cache_read.input_tokens", path),
            "cache_write_tokens": _int(usage, "gen_ai.usage.cache_creation.input_tokens", path),
        }
    # OpenAI Responses (input_tokens_details.cached_tokens), Codex token_count, or our own shape.
    details = usage.get("input_tokens_details") or {}
    cached = _int(usage, "cache_read_tokens", path) or _int(usage, "cached_input_tokens", path)
    if isinstance(details, Mapping):
        cached = cached or _int(details, "cached_tokens", f"{path}.input_tokens_details")
    return {
        "input_tokens": _int(usage, "input_tokens", path),
        "output_tokens": _int(usage, "output_tokens", path),
        "cache_read_tokens": cached,
        "cache_write_tokens": _int(usage, "cache_write_tokens", path),
    }
