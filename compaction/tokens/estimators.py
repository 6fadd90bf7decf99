"""The reference agents' own token estimators, with their exact arithmetic, on our message model.

A faithful strategy must decide exactly as its seed would, so each seed's estimator is reproduced
here as it is written (``specs/seed-strategies.md`` section 6): BaseAgent floor(chars/4), Codex
ceil(bytes/4), picoclaw runes*2/5, LLM4S's tokenizer plus fixed overheads, nanobot's payload through
cl100k, CoPaw's bytes/3.75. :data:`ESTIMATORS` makes each one a per-message function so a view can
compare them with tiktoken on the same turn.

Mapping from ctxweb's model to the seeds' messages. Every seed speaks OpenAI-chat-shaped messages,
where each tool result is its own ``tool`` message. So one of our messages becomes one seed message
for its parts other than tool results (or for nothing, when it is empty), plus one ``tool`` message
per :class:`ToolResultPart` whose ``tool_call_id`` is the part's and whose content is the result's
parts; each of those pays the seed's per-message overhead. (An OpenAI-chat tool message is already
exactly one such message; an Anthropic user message with two ``tool_result`` blocks is two.) Within
a seed message: text parts are its content (joined with newlines where the seed holds one string),
readable reasoning parts its ``reasoning_content``, tool calls its ``tool_calls`` (type
``"function"``), media parts its images or media items.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, TypeAlias

from compaction.messages.model import (
    MediaPart,
    Message,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolDefinition,
    ToolResultPart,
)
from compaction.tokens._counter import TokenCounter
from compaction.tokens._encodings import CL100K_BASE, Tokenizer, get_tokenizer

__all__ = [
    "BASEAGENT_IMAGE_TOKENS",
    "BASEAGENT_MESSAGE_OVERHEAD",
    "COPAW_DIVISOR",
    "ESTIMATORS",
    "LLM4S_CONVERSATION_OVERHEAD",
    "LLM4S_MESSAGE_OVERHEAD",
    "LLM4S_TOOL_CALL_OVERHEAD",
    "NANOBOT_MIN_TOKENS",
    "PICOCLAW_MEDIA_TOKENS",
    "PICOCLAW_MESSAGE_OVERHEAD_CHARS",
    "EstimatorFactory",
    "MessageEstimator",
    "baseagent_message_tokens",
    "baseagent_text_tokens",
    "codex_approx_tokens",
    "codex_message_tokens",
    "copaw_message_tokens",
    "copaw_text_tokens",
    "llm4s_conversation_tokens",
    "llm4s_message_tokens",
    "nanobot_message_tokens",
    "picoclaw_message_tokens",
    "picoclaw_tooldefs_tokens",
]

MessageEstimator: TypeAlias = Callable[[Message], int]
EstimatorFactory: TypeAlias = Callable[[Tokenizer], MessageEstimator]


@dataclass(frozen=True)
class _SeedMessage:
    """One OpenAI-chat-shaped message as a seed sees it; ``parts`` hold no tool results."""

    role: str
    parts: tuple[Part, ...]
    name: str | None = None
    tool_call_id: str | None = None

    @property
    def texts(self) -> list[str]:
        return [p.text for p in self.parts if isinstance(p, TextPart)]

    @property
    def reasoning(self) -> str:
        return "\n".join(
            p.text for p in self.parts if isinstance(p, ReasoningPart) and not p.redacted
        )

    @property
    def tool_calls(self) -> list[ToolCallPart]:
        return [p for p in self.parts if isinstance(p, ToolCallPart)]

    @property
    def media(self) -> list[MediaPart]:
        return [p for p in self.parts if isinstance(p, MediaPart)]


def _seed_messages(message: Message) -> list[_SeedMessage]:
    """``message`` as seed messages: the non-result parts, then one tool message per result."""
    rest = tuple(p for p in message.parts if not isinstance(p, ToolResultPart))
    results = message.tool_results
    seeds: list[_SeedMessage] = []
    if rest or not results:
        seeds.append(_SeedMessage(message.role, rest, message.name))
    for result in results:
        content = tuple(p for p in result.content if not isinstance(p, ToolResultPart))
        seeds.append(_SeedMessage("tool", content, message.name, result.tool_call_id))
    return seeds


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _json_value(arguments: str) -> Any:
    """The arguments' JSON value, or the raw string when they are not valid JSON."""
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments


# --- BaseAgent (specs §1.2) ---------------------------------------------------------------------

#: BaseAgent's per-message role overhead.
BASEAGENT_MESSAGE_OVERHEAD = 4
#: BaseAgent's flat cost of an ``image_url`` content part.
BASEAGENT_IMAGE_TOKENS = 1000


def baseagent_text_tokens(text: str | None) -> int:
    """BaseAgent's ``estimate_tokens``: ``floor(len(text)/4)`` in code points; None or "" gives 0.

    Example:
        >>> baseagent_text_tokens("abcdefgh")
        2
    """
    return len(text) // 4 if text else 0


def baseagent_message_tokens(message: Message) -> int:
    """BaseAgent's per-message estimate.

    Each text part ``floor(len/4)`` (a string content is a single text part), **1000** per image
    part (BaseAgent's ``image_url``; audio and files are other part types and count 0), per tool
    call ``floor(len(name)/4) + floor(len(arguments)/4)``, plus **4**. Reasoning and
    ``tool_call_id`` are not counted.

    Example:
        >>> baseagent_message_tokens(Message(role="user", parts=(TextPart("abcdefgh"),)))
        6
    """
    total = 0
    for seed in _seed_messages(message):
        tokens = BASEAGENT_MESSAGE_OVERHEAD
        for part in seed.parts:
            if isinstance(part, TextPart):
                tokens += baseagent_text_tokens(part.text)
            elif isinstance(part, MediaPart) and part.media == "image":
                tokens += BASEAGENT_IMAGE_TOKENS
            elif isinstance(part, ToolCallPart):
                tokens += baseagent_text_tokens(part.name) + baseagent_text_tokens(part.arguments)
        total += tokens
    return total


# --- Codex (specs §1b) --------------------------------------------------------------------------


def codex_approx_tokens(text: str) -> int:
    """Codex's ``approx_token_count``: ``ceil(utf8_bytes/4)``.

    Example:
        >>> codex_approx_tokens("héllo")  # 6 bytes
        2
    """
    return -(-_utf8_len(text) // 4)


def codex_message_tokens(message: Message) -> int:
    """Codex's estimate of one message: ``ceil(bytes/4)`` of all its text, no overhead.

    The text is every text part, readable reasoning, tool call name and arguments, and tool result
    text, in bytes summed; image items are ignored, as Codex's text conversion drops them.
    """
    size = 0
    for seed in _seed_messages(message):
        size += sum(_utf8_len(t) for t in seed.texts) + _utf8_len(seed.reasoning)
        size += sum(_utf8_len(c.name) + _utf8_len(c.arguments) for c in seed.tool_calls)
    return -(-size // 4)


# --- picoclaw (specs §2.2) ----------------------------------------------------------------------

#: picoclaw's per-message overhead, in characters, added before the 2/5 conversion.
PICOCLAW_MESSAGE_OVERHEAD_CHARS = 12
#: picoclaw's flat cost per media item, added after the conversion.
PICOCLAW_MEDIA_TOKENS = 256
_PICOCLAW_SYSTEM_PART_OVERHEAD = 20
_PICOCLAW_TOOL_OVERHEAD = 20
_PICOCLAW_SYSTEM_SEPARATOR = "\n\n---\n\n"  # 7 characters, the "7 chars per separator"


def _picoclaw_one(seed: _SeedMessage) -> int:
    texts = seed.texts
    if seed.role in ("system", "developer") and len(texts) > 1:
        # A system prompt of several blocks is picoclaw's SystemParts; its Content is the blocks
        # joined, and the larger of the two representations counts.
        chars = len(_PICOCLAW_SYSTEM_SEPARATOR.join(texts))
        chars = max(chars, sum(len(t) for t in texts) + _PICOCLAW_SYSTEM_PART_OVERHEAD * len(texts))
    else:
        chars = len("\n".join(texts))
    chars += len(seed.reasoning)
    for call in seed.tool_calls:
        chars += _utf8_len(call.id) + len("function") + _utf8_len(call.name)
        chars += _utf8_len(call.arguments)
    if seed.tool_call_id:
        chars += _utf8_len(seed.tool_call_id)
    chars += PICOCLAW_MESSAGE_OVERHEAD_CHARS
    return chars * 2 // 5 + PICOCLAW_MEDIA_TOKENS * len(seed.media)


def picoclaw_message_tokens(message: Message) -> int:
    """picoclaw's ``EstimateMessageTokens``.

    ``chars`` = runes of the content (for a system message of several text parts, the larger of
    the joined content and Σ runes + 20 per part) + runes of the reasoning + per tool call the
    bytes of ID, ``"function"``, name and arguments + the bytes of the tool message's
    ``ToolCallID`` + 12; tokens = ``chars*2//5`` + 256 per media item.

    Example:
        >>> picoclaw_message_tokens(Message(role="user", parts=(TextPart("hello"),)))
        6
    """
    return sum(_picoclaw_one(seed) for seed in _seed_messages(message))


def _go_json(value: Any) -> str:
    """JSON as Go's ``json.Marshal`` writes a ``map[string]any``: sorted keys, no spaces, UTF-8,
    HTML characters escaped, integral floats without a fraction."""

    def normalize(item: Any) -> Any:
        if isinstance(item, Mapping):
            return {str(k): normalize(v) for k, v in item.items()}
        if isinstance(item, list | tuple):
            return [normalize(v) for v in item]
        if isinstance(item, float) and item.is_integer() and abs(item) < 1e21:
            return int(item)
        return item

    text = json.dumps(normalize(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    for char, escaped in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(char, escaped)
    return text


def picoclaw_tooldefs_tokens(tools: Sequence[ToolDefinition]) -> int:
    """picoclaw's ``EstimateToolDefsTokens``: ``Σ(bytes(name) + bytes(description) +
    bytes(json(parameters)) + 20) * 2 // 5``; no tools gives 0.

    Empty ``parameters`` stand for Go's nil map, which adds nothing.

    Example:
        >>> tool = ToolDefinition("test_tool", "A test tool", {"type": "object"})
        >>> picoclaw_tooldefs_tokens([tool])
        22
    """
    if not tools:
        return 0
    chars = 0
    for tool in tools:
        chars += _utf8_len(tool.name) + _utf8_len(tool.description) + _PICOCLAW_TOOL_OVERHEAD
        if tool.parameters:
            chars += _utf8_len(_go_json(tool.parameters))
    return chars * 2 // 5


# --- LLM4S (specs §3.1) -------------------------------------------------------------------------

#: LLM4S's per-message overhead, in tokens.
LLM4S_MESSAGE_OVERHEAD = 4
#: LLM4S's per-tool-call overhead, in tokens.
LLM4S_TOOL_CALL_OVERHEAD = 10
#: LLM4S's per-conversation overhead, in tokens.
LLM4S_CONVERSATION_OVERHEAD = 10


def _compact_json(arguments: str) -> str:
    """The arguments as ujson's ``render()`` writes them: compact, key order kept."""
    value = _json_value(arguments)
    if isinstance(value, str) and value == arguments:
        return arguments
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def llm4s_message_tokens(message: Message, count: Callable[[str], int]) -> int:
    """LLM4S's ``ConversationTokenCounter.countMessage``.

    ``count(content) + 4``; per tool call ``count(name) + count(rendered arguments JSON) + 10``;
    a tool message adds ``count("tool_call_id:" + id)``. Images and reasoning are not counted.

    Args:
        message: the message.
        count: text to tokens (LLM4S's tokenizer; its tests use ``ceil(len/4)``).

    Example:
        >>> llm4s_message_tokens(Message(role="user", parts=(TextPart("hello"),)),
        ...                      lambda s: -(-len(s) // 4))
        6
    """
    total = 0
    for seed in _seed_messages(message):
        tokens = count("\n".join(seed.texts)) + LLM4S_MESSAGE_OVERHEAD
        for call in seed.tool_calls:
            tokens += count(call.name) + count(_compact_json(call.arguments))
            tokens += LLM4S_TOOL_CALL_OVERHEAD
        if seed.tool_call_id is not None:
            tokens += count("tool_call_id:" + seed.tool_call_id)
        total += tokens
    return total


def llm4s_conversation_tokens(messages: Iterable[Message], count: Callable[[str], int]) -> int:
    """LLM4S's ``countConversation``: Σ :func:`llm4s_message_tokens` + 10."""
    return sum(llm4s_message_tokens(m, count) for m in messages) + LLM4S_CONVERSATION_OVERHEAD


# --- nanobot (specs §4.2) -----------------------------------------------------------------------

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
        >>> nanobot_message_tokens(Message(role="user", parts=(TextPart("hello world"),)),
        ...                        get_tokenizer("cl100k_base"))
        6
    """
    total = 0
    for seed in _seed_messages(message):
        payload = _nanobot_payload(_chat_dict(seed))
        if not payload:
            total += NANOBOT_MIN_TOKENS
        elif tokenizer is None:
            total += max(NANOBOT_MIN_TOKENS, len(payload) // 4 + NANOBOT_MIN_TOKENS)
        else:
            total += max(NANOBOT_MIN_TOKENS, tokenizer.count(payload) + NANOBOT_MIN_TOKENS)
    return total


# --- CoPaw / ReMe (specs §5.2) ------------------------------------------------------------------

#: CoPaw's default bytes-per-token divisor.
COPAW_DIVISOR = 3.75
_COPAW_EMPTY_MEDIA = 10


def copaw_text_tokens(
    text: str, divisor: float = COPAW_DIVISOR, *, tokenizer: Tokenizer | None = None
) -> int:
    """CoPaw's ``CopawTokenCounter.count``: ``int(utf8_bytes/divisor + 0.5)``; "" gives 0.

    CoPaw takes the larger of that and its bundled Qwen tokenizer's count; ctxweb ships no Qwen
    tokenizer, so by default only the byte estimate is used (CoPaw's own path without a tokenizer).
    Pass ``tokenizer`` to take the larger of the two as CoPaw does.

    Example:
        >>> copaw_text_tokens("hello world")  # 11 bytes / 3.75 = 2.93
        3
    """
    if not text:
        return 0
    estimate = int(_utf8_len(text) / divisor + 0.5)
    if tokenizer is not None:
        estimate = max(estimate, tokenizer.count(text))
    return max(estimate, 0)


def _copaw_media(part: MediaPart) -> int:
    if part.data:
        return len(part.data) // 4
    if part.url:
        return copaw_text_tokens(part.url)
    return _COPAW_EMPTY_MEDIA


def copaw_message_tokens(message: Message) -> int:
    """ReMe's ``AsMsgHandler.stat_message`` with CoPaw's byte estimate: no per-message overhead.

    Text and thinking (readable reasoning) count their text; media with base64 ``len(data)//4``,
    by URL the tokens of the URL, 10 if empty; a tool call the tokens of ``name + json(input)``;
    a tool result its text parts and media as above.

    Example:
        >>> copaw_message_tokens(Message(role="user", parts=(TextPart("hello world"),)))
        3
    """
    total = 0
    for part in message.parts:
        if isinstance(part, TextPart):
            total += copaw_text_tokens(part.text)
        elif isinstance(part, ReasoningPart):
            total += copaw_text_tokens(part.text if not part.redacted else "")
        elif isinstance(part, MediaPart):
            total += _copaw_media(part)
        elif isinstance(part, ToolCallPart):
            arguments = json.dumps(_json_value(part.arguments), ensure_ascii=False)
            total += copaw_text_tokens(part.name + arguments)
        elif isinstance(part, ToolResultPart):
            for item in part.content:
                if isinstance(item, TextPart):
                    total += copaw_text_tokens(item.text)
                elif isinstance(item, MediaPart):
                    total += _copaw_media(item)
    return total


# --- The registry -------------------------------------------------------------------------------


def _tiktoken(tokenizer: Tokenizer) -> MessageEstimator:
    counter = TokenCounter(tokenizer)
    return lambda message: counter.count_message(message).total


def _llm4s(tokenizer: Tokenizer) -> MessageEstimator:
    return lambda message: llm4s_message_tokens(message, tokenizer.count)


def _nanobot(tokenizer: Tokenizer) -> MessageEstimator:
    # nanobot always counts with cl100k_base, whatever the model.
    cl100k = get_tokenizer(CL100K_BASE)
    return lambda message: nanobot_message_tokens(message, cl100k)


def _ignoring_tokenizer(estimate: MessageEstimator) -> EstimatorFactory:
    return lambda tokenizer: estimate


#: Each estimator by name, as a factory: given the session's tokenizer, a per-message function.
#: ``ESTIMATORS["picoclaw"](tokenizer)(message)``. Only "tiktoken" and "llm4s" use the tokenizer;
#: nanobot always uses cl100k_base.
ESTIMATORS: Mapping[str, EstimatorFactory] = MappingProxyType(
    {
        "tiktoken": _tiktoken,
        "baseagent": _ignoring_tokenizer(baseagent_message_tokens),
        "codex": _ignoring_tokenizer(codex_message_tokens),
        "picoclaw": _ignoring_tokenizer(picoclaw_message_tokens),
        "llm4s": _llm4s,
        "nanobot": _nanobot,
        "copaw": _ignoring_tokenizer(copaw_message_tokens),
    }
)
