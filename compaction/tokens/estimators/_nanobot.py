"""nanobot's token estimator (``docs/seed-strategies.md`` §4.2): the message's payload as nanobot
dumps it, through cl100k, with a floor and per-message overhead of 4.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from compaction.messages.model import MediaPart, Message, Part, TextPart
from compaction.tokens._encodings import Tokenizer
from compaction.tokens.estimators._seed_messages import _seed_messages, _SeedMessage

#: nanobot's floor and per-message overhead.
NANOBOT_MIN_TOKENS = 4


def _media_url(part: MediaPart) -> str:
    if part.url:
        return part.url
    return f"data:{part.media_type or 'application/octet-stream'};base64,{part.data or ''}"


def _chat_content_part(part: Part) -> dict[str, Any]:
    """A content part as OpenAI chat writes it (only the shape nanobot dumps matters)."""
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    if isinstance(part, MediaPart):
        if part.media == "image":
            return {"type": "image_url", "image_url": {"url": _media_url(part)}}
        if part.media == "audio":
            subtype = (part.media_type or "audio/wav").rpartition("/")[2]
            return {"type": "input_audio", "input_audio": {"data": part.data, "format": subtype}}
        return {"type": "file", "file": {"file_data": _media_url(part)}}
    return {"type": part.kind}


def _chat_dict(seed: _SeedMessage) -> dict[str, Any]:
    """``seed`` as an OpenAI chat message dict: string content when it is one text, a list of parts
    when it has media or several texts, none when it has neither."""
    body: dict[str, Any] = {"role": seed.role}
    content_parts = [p for p in seed.parts if isinstance(p, TextPart | MediaPart)]
    if len(content_parts) == 1 and isinstance(content_parts[0], TextPart):
        body["content"] = content_parts[0].text
    elif content_parts:
        body["content"] = [_chat_content_part(p) for p in content_parts]
    else:
        body["content"] = None
    if seed.name:
        body["name"] = seed.name
    if seed.tool_call_id is not None:
        body["tool_call_id"] = seed.tool_call_id
    if seed.tool_calls:
        body["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in seed.tool_calls
        ]
    if seed.reasoning:
        body["reasoning_content"] = seed.reasoning
    return body


def _nanobot_payload(body: Mapping[str, Any]) -> str:
    pieces: list[str] = []
    content = body.get("content")
    if isinstance(content, str):
        pieces.append(content)
    elif isinstance(content, list):
        for item in content:
            if isinstance(item, dict) and item.get("type") == "text":
                if item.get("text"):
                    pieces.append(item["text"])
            else:
                pieces.append(json.dumps(item, ensure_ascii=False))
    elif content is not None:
        pieces.append(json.dumps(content, ensure_ascii=False))
    for key in ("name", "tool_call_id"):
        value = body.get(key)
        if isinstance(value, str) and value:
            pieces.append(value)
    if body.get("tool_calls"):
        pieces.append(json.dumps(body["tool_calls"], ensure_ascii=False))
    reasoning = body.get("reasoning_content")
    if isinstance(reasoning, str) and reasoning:
        pieces.append(reasoning)
    return "\n".join(pieces)


def nanobot_payloads(message: Message) -> list[str]:
    """The payloads nanobot encodes for ``message``: one per seed message it maps to (a message
    with tool results is several), as :func:`nanobot_message_tokens` counts them.

    Example:
        >>> nanobot_payloads(Message(role="user", parts=(TextPart("hello world"),)))
        ['hello world']
    """
    return [_nanobot_payload(_chat_dict(seed)) for seed in _seed_messages(message)]


def nanobot_payload_tokens(payloads: Sequence[str], tokenizer: Tokenizer | None) -> int:
    """nanobot's estimate of the seed messages whose payloads are ``payloads``: 4 for an empty
    one, else ``max(4, tokens + 4)``; with no tokenizer, ``max(4, len(payload)//4 + 4)``."""
    total = 0
    for payload in payloads:
        if not payload:
            total += NANOBOT_MIN_TOKENS
        elif tokenizer is None:
            total += max(NANOBOT_MIN_TOKENS, len(payload) // 4 + NANOBOT_MIN_TOKENS)
        else:
            total += max(NANOBOT_MIN_TOKENS, tokenizer.count(payload) + NANOBOT_MIN_TOKENS)
    return total


def nanobot_message_tokens(message: Message, tokenizer: Tokenizer | None) -> int:
    """nanobot's ``estimate_message_tokens``.

    The payload joins with newlines: string content, or each non-empty text part and the
    ``json.dumps`` of every other part (so base64 image data counts as text, as in nanobot);
    ``name``; ``tool_call_id``; ``json.dumps(tool_calls)``; ``reasoning_content``. An empty payload
    gives 4, else ``max(4, tokens + 4)``; with no tokenizer, nanobot's fallback
    ``max(4, len(payload)//4 + 4)``.

    Args:
        message: the message.
        tokenizer: cl100k_base in nanobot (``get_tokenizer("cl100k_base")``), or None.

    Example:
        >>> from compaction.tokens import get_tokenizer
        >>> nanobot_message_tokens(Message(role="user", parts=(TextPart("hello world"),)),
        ...                        get_tokenizer("cl100k_base"))
        6
    """
    return nanobot_payload_tokens(nanobot_payloads(message), tokenizer)
