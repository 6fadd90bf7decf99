"""What a provider answered, from the bytes it sent: a JSON response, or a server-sent event stream
put back together (text, tool calls and usage), for the three request formats.

Pure functions: a recorder passes the bytes it relayed.

Example:
    >>> body = b'data: {"choices":[{"index":0,"delta":{"content":"Hel"}}]}\\n\\n'
    >>> body += b'data: {"choices":[{"index":0,"delta":{"content":"lo"}}]}\\n\\n'
    >>> body += b'data: {"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2}}\\n\\n'
    >>> answer = provider_answer("openai-chat", body, streamed=True)
    >>> answer.messages, answer.usage
    ([{'role': 'assistant', 'content': 'Hello'}], {'prompt_tokens': 9, 'completion_tokens': 2})
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = ["STREAM_TAIL", "ProviderAnswer", "provider_answer", "sse_events", "stream_finished"]


@dataclass
class ProviderAnswer:
    """The response's messages, in the request format's message shape, and the usage as the
    provider reported it (raw: :func:`compaction.usage.normalize_usage` reads it)."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, Any] | None = None


def sse_events(body: bytes) -> Iterator[tuple[str, Any]]:
    """``(event name, decoded data)`` of each server-sent event; undecodable data is skipped."""
    text = body.decode("utf-8", errors="replace").replace("\r\n", "\n")
    for block in text.split("\n\n"):
        name, data = "message", []
        for line in block.split("\n"):
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].lstrip())
        if not data or data == ["[DONE]"]:
            continue
        try:
            yield name, json.loads("\n".join(data))
        except ValueError:
            continue


def _openai_chat_stream(body: bytes) -> ProviderAnswer:
    answer = ProviderAnswer()
    text: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    for _, chunk in sse_events(body):
        if not isinstance(chunk, dict):
            continue
        if isinstance(chunk.get("usage"), dict):
            answer.usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            if isinstance(delta.get("content"), str):
                text.append(delta["content"])
            for call in delta.get("tool_calls") or []:
                slot = calls.setdefault(
                    int(call.get("index", 0)),
                    {"id": "", "type": "function", "function": {"name": "", "arguments": ""}},
                )
                slot["id"] = call.get("id") or slot["id"]
                function = call.get("function") or {}
                slot["function"]["name"] += function.get("name") or ""
                slot["function"]["arguments"] += function.get("arguments") or ""
    message: dict[str, Any] = {"role": "assistant", "content": "".join(text) or None}
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    elif message["content"] is None:
        message["content"] = ""
    answer.messages = [message]
    return answer


def _anthropic_stream(body: bytes) -> ProviderAnswer:
    answer = ProviderAnswer()
    blocks: dict[int, dict[str, Any]] = {}
    partial: dict[int, list[str]] = {}
    usage: dict[str, Any] = {}
    for _, event in sse_events(body):
        if not isinstance(event, dict):
            continue
        kind = event.get("type")
        if kind == "message_start":
            usage.update((event.get("message") or {}).get("usage") or {})
        elif kind == "content_block_start":
            block = dict(event.get("content_block") or {})
            blocks[int(event.get("index", 0))] = block
        elif kind == "content_block_delta":
            index = int(event.get("index", 0))
            delta = event.get("delta") or {}
            block = blocks.setdefault(index, {"type": "text", "text": ""})
            if delta.get("type") == "text_delta":
                block["text"] = block.get("text", "") + str(delta.get("text", ""))
            elif delta.get("type") == "input_json_delta":
                partial.setdefault(index, []).append(str(delta.get("partial_json", "")))
            elif delta.get("type") == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + str(delta.get("thinking", ""))
            elif delta.get("type") == "signature_delta":
                block["signature"] = str(delta.get("signature", ""))
        elif kind == "message_delta":
            usage.update(event.get("usage") or {})
    for index, pieces in partial.items():
        try:
            blocks[index]["input"] = json.loads("".join(pieces) or "{}")
        except ValueError:
            blocks[index]["input"] = {}
    answer.messages = [{"role": "assistant", "content": [blocks[i] for i in sorted(blocks)]}]
    answer.usage = usage or None
    return answer


def _responses_stream(body: bytes) -> ProviderAnswer:
    for _, event in sse_events(body):
        if isinstance(event, dict) and event.get("type") == "response.completed":
            return _responses_json(event.get("response") or {})
    return ProviderAnswer()


def _responses_json(data: dict[str, Any]) -> ProviderAnswer:
    output = [item for item in data.get("output") or [] if isinstance(item, dict)]
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else None
    return ProviderAnswer(messages=output, usage=usage)


#: The events that end a stream, by request format: what a client reads as the whole answer.
_LAST_EVENTS = {
    "anthropic-messages": ("message_stop",),
    "openai-responses": ("response.completed", "response.incomplete", "response.failed"),
}
#: How far from its end a stream's last event is looked for (a reader may pass only that much).
STREAM_TAIL = 16 * 1024


def stream_finished(format: str, body: bytes | bytearray) -> bool:
    """Whether a server-sent event stream of a ``format`` request holds its last event (an
    OpenAI chat stream's ``data: [DONE]``, Anthropic's ``message_stop``, a Responses stream's
    ``response.completed``...), looked for near its end (only that much of ``body`` is read):
    the answer is whole even if the connection ends before the stream does (an SDK closes it
    once it reads that event).

    Example:
        >>> stream_finished("openai-chat", b'data: {"choices":[]}\\n\\ndata: [DONE]\\n\\n')
        True
        >>> stream_finished("openai-chat", b'data: {"choices":[]}\\n\\n')
        False
    """
    tail = body[-STREAM_TAIL:].decode("utf-8", errors="replace").replace("\r\n", "\n")
    blocks = [b for b in tail.split("\n\n") if b.strip()]
    if format == "openai-chat":
        return any(
            line.startswith("data:") and line[5:].strip() == "[DONE]"
            for block in blocks[-2:]
            for line in block.split("\n")
        )
    last = _LAST_EVENTS.get(format, ())
    for _, event in sse_events("\n\n".join(blocks[-2:]).encode()):
        if isinstance(event, dict) and event.get("type") in last:
            return True
    return False


def provider_answer(format: str, body: bytes, *, streamed: bool) -> ProviderAnswer:
    """What the provider answered a request of ``format`` (``openai-chat``,
    ``anthropic-messages`` or ``openai-responses``), from its response body."""
    if streamed:
        if format == "openai-chat":
            return _openai_chat_stream(body)
        if format == "anthropic-messages":
            return _anthropic_stream(body)
        return _responses_stream(body)
    try:
        data = json.loads(body)
    except ValueError:
        return ProviderAnswer()
    if not isinstance(data, dict):
        return ProviderAnswer()
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else None
    if format == "openai-chat":
        choices = data.get("choices") or []
        first = choices[0] if choices and isinstance(choices[0], dict) else {}
        message = first.get("message")
        return ProviderAnswer(messages=[message] if isinstance(message, dict) else [], usage=usage)
    if format == "anthropic-messages":
        content = data.get("content")
        messages = [{"role": "assistant", "content": content}] if isinstance(content, list) else []
        return ProviderAnswer(messages=messages, usage=usage)
    return _responses_json(data)
