"""Message dialects found inside transcripts, turned into the normalized model.

Transcripts embed messages in the provider's own shape: Anthropic content blocks (Claude Code,
claude-trace), OpenAI Chat messages (SWE-agent, OpenHands, tau-bench) and OpenAI Responses items
(Codex). Each message goes through the format adapter of :mod:`compaction.messages`, so parts and
``extra`` markers are exactly what a posted request would give and every turn renders back; only
response-only keys (a response's ``id``, ``usage``) are left out, and Codex's tool-call items that
the Responses adapter keeps verbatim become tool calls here. Errors name the transcript's line and
field. Usage reports are normalized here too.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from compaction.errors import FormatError
from compaction.messages import anthropic, openai_chat, openai_responses
from compaction.messages.model import Context, MediaPart, Message, Part, ToolCallPart

__all__ = [
    "anthropic_message",
    "anthropic_parts",
    "anthropic_usage",
    "chat_message",
    "data_url_media",
    "openai_usage",
    "responses_item",
]


def _rest(block: Mapping[str, Any], *used: str) -> dict[str, Any]:
    return {k: v for k, v in block.items() if k not in used}


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _arguments(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value if value is not None else {}, ensure_ascii=False)


def data_url_media(url: str, media: str = "image") -> MediaPart:
    """A media part from an image URL: ``data:`` URLs keep their base64 payload as ``data``."""
    kind: Any = media
    if url.startswith("data:") and "," in url:
        header, payload = url[5:].split(",", 1)
        media_type = header.split(";", 1)[0] or None
        if header.endswith(";base64"):
            return MediaPart(kind, media_type=media_type, data=payload)
    return MediaPart(kind, url=url)


# --- adapters ---------------------------------------------------------------------------------


def _one(parse: Callable[[Mapping[str, Any]], Context], key: str, value: Any, path: str) -> Message:
    """The single message the format adapter makes of ``{key: [value]}``, errors re-pathed."""
    try:
        messages = parse({key: [value]}).messages
    except FormatError as exc:
        inner = exc.path.removeprefix(f"{key}.0").lstrip(".")
        raise FormatError(f"{path}.{inner}" if inner else path, exc.reason) from None
    if len(messages) != 1:
        raise FormatError(path, "expected exactly one message")
    return messages[0]


# --- Anthropic Messages ---------------------------------------------------------------------


def anthropic_message(message: Any, path: str, extra: Mapping[str, Any] | None = None) -> Message:
    """A :class:`Message` from an Anthropic ``{"role", "content"}`` object (other keys, such as a
    response's ``id`` or ``usage``, are not part of a request and are left out)."""
    if not isinstance(message, dict):
        raise FormatError(path, "expected a message object")
    shaped = {"role": message.get("role"), "content": message.get("content")}
    parsed = _one(anthropic.parse, "messages", shaped, path)
    if extra:
        parsed = Message(parsed.role, parsed.parts, parsed.name, {**parsed.extra, **extra})
    return parsed


def anthropic_parts(content: Any, path: str) -> tuple[Part, ...]:
    """Parts of an Anthropic assistant ``content`` (a string or a list of blocks)."""
    return _one(anthropic.parse, "messages", {"role": "assistant", "content": content}, path).parts


def anthropic_usage(usage: Any) -> dict[str, int] | None:
    """Anthropic usage normalized: its ``input_tokens`` excludes cache reads and writes; ours
    includes them."""
    if not isinstance(usage, dict):
        return None
    read = _int(usage.get("cache_read_input_tokens"))
    write = _int(usage.get("cache_creation_input_tokens"))
    return {
        "input_tokens": _int(usage.get("input_tokens")) + read + write,
        "output_tokens": _int(usage.get("output_tokens")),
        "cache_read_tokens": read,
        "cache_write_tokens": write,
    }


# --- OpenAI Chat Completions ----------------------------------------------------------------


def chat_message(message: Any, path: str) -> Message:
    """A :class:`Message` from an OpenAI Chat message (``tool_calls``, role ``tool``...)."""
    if not isinstance(message, dict):
        raise FormatError(path, "expected a message object")
    return _one(openai_chat.parse, "messages", message, path)


def openai_usage(usage: Any) -> dict[str, int] | None:
    """OpenAI usage (Chat's ``prompt_tokens`` or Responses' and Codex's ``input_tokens``),
    normalized. OpenAI's input count already includes cached tokens; nothing is a cache write."""
    if not isinstance(usage, dict):
        return None
    if "prompt_tokens" in usage:
        details = usage.get("prompt_tokens_details")
        cached = _int(details.get("cached_tokens")) if isinstance(details, dict) else 0
        return {
            "input_tokens": _int(usage.get("prompt_tokens")),
            "output_tokens": _int(usage.get("completion_tokens")),
            "cache_read_tokens": cached,
            "cache_write_tokens": 0,
        }
    details = usage.get("input_tokens_details")
    cached = _int(usage.get("cached_input_tokens"))
    if isinstance(details, dict):
        cached = cached or _int(details.get("cached_tokens"))
    return {
        "input_tokens": _int(usage.get("input_tokens")),
        "output_tokens": _int(usage.get("output_tokens")),
        "cache_read_tokens": cached,
        "cache_write_tokens": 0,
    }


# --- OpenAI Responses -----------------------------------------------------------------------


_SHELL_LIKE = ("local_shell_call", "custom_tool_call", "web_search_call", "computer_call")


def responses_item(item: Any, path: str) -> Message:
    """A :class:`Message` from one OpenAI Responses input or output item (one message per item).

    The Responses adapter parses messages, reasoning, function calls and their outputs. Codex's
    other tool calls (``local_shell_call``, ``custom_tool_call``...), which the adapter keeps
    verbatim, become :class:`ToolCallPart` here so that their outputs are not orphaned; their item
    type stays in ``extra["type"]``. An ``output`` that is an object (old Codex
    ``{"content", "success"}``) is read as its content.
    """
    if not isinstance(item, dict):
        raise FormatError(path, "expected an item object")
    kind = item.get("type", "message")
    if kind in _SHELL_LIKE:
        if kind == "custom_tool_call":
            name, arguments = str(item.get("name") or ""), item.get("input")
        else:
            name = kind.removesuffix("_call")
            arguments = item.get("action", {k: v for k, v in item.items() if k != "type"})
        call = ToolCallPart(
            str(item.get("call_id") or item.get("id") or ""),
            name,
            _arguments(arguments),
            extra={"type": kind, **_rest(item, "type", "call_id", "name", "input", "action")},
        )
        return Message("assistant", (call,))
    if isinstance(kind, str) and kind.endswith("_call_output") and kind != "function_call_output":
        item = {**item, "type": "function_call_output"}
    output = item.get("output")
    if isinstance(output, dict):
        content = output.get("content")
        item = {**item, "output": content if isinstance(content, str) else json.dumps(output)}
    elif output is not None and not isinstance(output, str | list):
        item = {**item, "output": json.dumps(output)}
    return _one(openai_responses.parse, "input", item, path)


MODEL_ITEM_TYPES = frozenset(
    {
        "reasoning",
        "function_call",
        "custom_tool_call",
        "local_shell_call",
        "web_search_call",
        "computer_call",
        "file_search_call",
    }
)
"""Responses item types the model produces (besides assistant messages)."""
