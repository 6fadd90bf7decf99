"""Reported usage, normalized: every provider's numbers in one shape with one meaning.

``input_tokens`` is everything the model read, cached or not. Anthropic's ``input_tokens``
excludes cache reads and cache writes, so they are added; OpenAI's ``prompt_tokens`` and
``input_tokens``, and OpenTelemetry's ``gen_ai.usage.input_tokens``, already include cached tokens.

Example:
    >>> normalize_usage({"input_tokens": 10, "cache_read_input_tokens": 90, "output_tokens": 5})
    {'input_tokens': 100, 'output_tokens': 5, 'cache_read_tokens': 90, 'cache_write_tokens': 0}
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from compaction.errors import FormatError

__all__ = ["MAX_TOKENS", "normalize_usage", "token_count"]

#: The largest token count a usage may report, and a turn store: a signed 32-bit integer, what a
#: database ``integer`` column holds (PostgreSQL's; ctxweb's token columns are such). No model
#: reads or writes anywhere near it in one call: the largest windows are a few million tokens.
MAX_TOKENS = 2**31 - 1


def token_count(value: Any, path: str, *, text: bool = False, maximum: int = MAX_TOKENS) -> int:
    """``value`` as a token count: a whole number from 0 to ``maximum`` (an integer, or a float
    with no fraction; with ``text``, also a string of ASCII digits, as telemetry attributes may
    carry it). ``None`` is 0 (not reported). Every count a usage reports goes through here.

    Raises:
        FormatError: anything else (a boolean, a negative or fractional number, NaN, a number
            past ``maximum``, other text); ``path`` names the field.

    Example:
        >>> token_count(12.0, "usage.input_tokens"), token_count("40", "n", text=True)
        (12, 40)
    """
    if value is None:
        return 0
    count: int | None = None
    if isinstance(value, bool):
        count = None
    elif isinstance(value, int):
        count = value
    elif isinstance(value, float) and math.isfinite(value) and value.is_integer():
        count = int(value)
    elif text and isinstance(value, str):
        digits = value.strip()
        if digits.isascii() and digits.isdigit():
            # never int() of thousands of digits: past the bound's length it is past the bound
            digits = digits.lstrip("0") or "0"
            count = int(digits) if len(digits) <= len(str(maximum)) else maximum + 1
    if count is None or not 0 <= count <= maximum:
        raise FormatError(path, f"expected a whole number from 0 to {maximum}")
    return count


def _int(usage: Mapping[str, Any], key: str, path: str) -> int:
    return token_count(usage.get(key), f"{path}.{key}")


def _input(path: str, key: str, *counts: int) -> int:
    """Input tokens added up from their parts (uncached, cache reads, cache writes): the sum is
    stored too, so it is held to the same bound, and the error names the field sent as input."""
    total = sum(counts)
    if total > MAX_TOKENS:
        raise FormatError(
            f"{path}.{key}", f"with the cache reads and writes, {total} is past {MAX_TOKENS}"
        )
    return total


def normalize_usage(usage: Mapping[str, Any], *, path: str = "usage") -> dict[str, int]:
    """Usage of any supported provider as ``input_tokens`` (cache included), ``output_tokens``,
    ``cache_read_tokens`` and ``cache_write_tokens``.

    Raises:
        FormatError: a count is not a whole number from 0 to :data:`MAX_TOKENS`
            (:func:`token_count`), nor their sum, or ``usage`` is not an object.
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
            "input_tokens": _input(
                path, "input_tokens", _int(usage, "input_tokens", path), read, write
            ),
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
