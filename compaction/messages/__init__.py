"""Normalized messages: the model, the format adapters and the canonical form.

``parse(format, request)`` turns a request body of OpenAI Chat Completions (``openai-chat``),
Anthropic Messages (``anthropic-messages``) or OpenAI Responses (``openai-responses``) into a
:class:`Context`; ``render(context)`` turns it back into a body of the context's format. For a
context parsed from format X, ``render(parse(X, body)) == body`` exactly: whatever the model has no
field for is kept in ``extra``. Keys of ``extra`` that start with ``ctxweb:`` are markers (how the
request was shaped) and are never sent; use that prefix for any flag of your own.

``message_to_dict`` / ``message_from_dict`` (and the ``context_`` pair) give a JSON-safe canonical
dict of the model; ``message_hash`` is the SHA-256 of a message's canonical JSON (what is stored);
``message_identity`` the digest of what it says, whatever its cache markers, item ids or key order
(what joins calls into a conversation and what managed mode matches).

Example:
    >>> body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
    >>> ctx = parse("openai-chat", body)
    >>> ctx.messages[0].text
    'hi'
    >>> render(ctx) == body
    True
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from compaction.errors import FormatError
from compaction.messages import anthropic, openai_chat, openai_responses
from compaction.messages._canonical import (
    IDENTITY_IGNORED,
    context_from_dict,
    context_to_dict,
    message_from_dict,
    message_hash,
    message_identity,
    message_to_dict,
    without_cache_markers,
)
from compaction.messages.model import (
    FORMATS,
    ROLES,
    Context,
    Format,
    MediaPart,
    Message,
    Part,
    ReasoningPart,
    Role,
    TextPart,
    ToolCallPart,
    ToolDefinition,
    ToolResultPart,
)

__all__ = [
    "FORMATS",
    "IDENTITY_IGNORED",
    "ROLES",
    "Context",
    "Format",
    "MediaPart",
    "Message",
    "Part",
    "ReasoningPart",
    "Role",
    "TextPart",
    "ToolCallPart",
    "ToolDefinition",
    "ToolResultPart",
    "context_from_dict",
    "context_to_dict",
    "message_from_dict",
    "message_hash",
    "message_identity",
    "message_to_dict",
    "messages_key",
    "parse",
    "render",
    "without_cache_markers",
]

_PARSERS: dict[str, Callable[[Mapping[str, Any]], Context]] = {
    "openai-chat": openai_chat.parse,
    "anthropic-messages": anthropic.parse,
    "openai-responses": openai_responses.parse,
}
_MESSAGES_KEYS = {
    "openai-chat": openai_chat.MESSAGES,
    "anthropic-messages": anthropic.MESSAGES,
    "openai-responses": openai_responses.MESSAGES,
}
_RENDERERS: dict[str, Callable[[Context], dict[str, Any]]] = {
    "openai-chat": openai_chat.render,
    "anthropic-messages": anthropic.render,
    "openai-responses": openai_responses.render,
}


def parse(format: str, request: Mapping[str, Any]) -> Context:
    """Parse a request body of ``format`` (one of :data:`FORMATS`) into a :class:`Context`.

    Raises:
        FormatError: an unknown format (path ``format``) or a malformed request (the bad field's
            path, such as ``messages.3.content.0.text``).
    """
    parser = _PARSERS.get(format) if isinstance(format, str) else None
    if parser is None:
        raise FormatError(
            "format", f"unknown format {format!r}; expected one of {', '.join(FORMATS)}"
        )
    return parser(request)


def messages_key(format: str) -> str:
    """The key of a ``format`` request body that holds its messages (``messages``; ``input``
    in the Responses API); ``messages`` for a format this module does not know.

    Example:
        >>> messages_key("openai-responses"), messages_key("anthropic-messages")
        ('input', 'messages')
    """
    return _MESSAGES_KEYS.get(format, "messages")


def render(context: Context) -> dict[str, Any]:
    """Render ``context`` as a request body of its own format (``context.format``).

    Raises:
        FormatError: the context's format is unknown (path ``format``).
    """
    renderer = _RENDERERS.get(context.format)
    if renderer is None:
        raise FormatError(
            "format", f"unknown format {context.format!r}; expected one of {', '.join(FORMATS)}"
        )
    return renderer(context)
