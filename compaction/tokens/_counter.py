"""Exact token counting of normalized messages, cached by content hash: no text is encoded twice.

A message costs its parts plus :data:`MESSAGE_OVERHEAD`; a request adds :data:`REQUEST_OVERHEAD`
once, and :data:`TOOLS_OVERHEAD` once when it defines tools. These are OpenAI's documented chat
overheads (the "How to count tokens with tiktoken" cookbook): every message is wrapped as
``<|start|>{role}<|message|>{content}<|end|>`` (3 tokens beyond the content, 1 more for a ``name``)
and the reply is primed with ``<|start|>assistant<|message|>`` (3 tokens). Tool definitions are
rendered into the prompt in a TypeScript-like namespace that OpenAI does not document; ctxweb
counts the JSON of each tool instead, plus a fixed 9 tokens for the wrapper, as the
openai-chat-tokens estimator does. Other vendors' wrappers differ by a few tokens per message;
reported usage settles it.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Self

from compaction.messages._common import RAW
from compaction.messages.model import (
    Context,
    MediaPart,
    Message,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolDefinition,
    ToolResultPart,
)
from compaction.tokens._encodings import Tokenizer
from compaction.tokens._media import media_tokens

__all__ = [
    "MESSAGE_OVERHEAD",
    "NAME_OVERHEAD",
    "REQUEST_OVERHEAD",
    "TOOLS_OVERHEAD",
    "MessageCount",
    "TokenCache",
    "TokenCounter",
    "redacted_reasoning_tokens",
    "tool_definition_json",
]

#: Tokens that wrap every message (``<|start|>``, the role, ``<|message|>`` / ``<|end|>``).
MESSAGE_OVERHEAD = 3
#: Extra token for a message that carries a ``name``.
NAME_OVERHEAD = 1
#: Tokens that prime the reply (``<|start|>assistant<|message|>``), once per request.
REQUEST_OVERHEAD = 3
#: Tokens of the tools wrapper, once per request that defines at least one tool (an approximation).
TOOLS_OVERHEAD = 9

#: Below this many characters not yet counted, :meth:`TokenCounter.prime` encodes in the calling
#: thread alone: a thread costs more than it saves on a small context.
PRIME_PARALLEL_CHARS = 256 * 1024

CacheKey = tuple[bytes, str]


class TokenCache:
    """A bounded LRU map from (content hash, encoding) to a token count; threads may share it.

    Args:
        maxsize: how many counts to keep; the least recently used is dropped beyond it.

    Example:
        >>> cache = TokenCache(maxsize=2)
        >>> cache.put((b"k", "cl100k_base"), 5); cache.get((b"k", "cl100k_base"))
        5
        >>> cache.hits, cache.misses
        (1, 0)
    """

    def __init__(self, maxsize: int = 65_536) -> None:
        if maxsize < 1:
            raise ValueError("maxsize must be at least 1")
        self.maxsize = maxsize
        self.hits = 0
        self.misses = 0
        self._data: OrderedDict[CacheKey, int] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: CacheKey) -> int | None:
        """The cached count for ``key`` (now most recently used), else None; counts hit or miss."""
        with self._lock:
            value = self._data.get(key)
            if value is None:
                self.misses += 1
                return None
            self._data.move_to_end(key)
            self.hits += 1
            return value

    def put(self, key: CacheKey, value: int) -> None:
        """Store ``value`` under ``key``, dropping the least recently used past ``maxsize``."""
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.maxsize:
                self._data.popitem(last=False)

    def clear(self) -> None:
        """Forget every count and reset the hit and miss counters."""
        with self._lock:
            self._data.clear()
            self.hits = 0
            self.misses = 0

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        return key in self._data


@dataclass(frozen=True)
class MessageCount:
    """One message's tokens: one count per part, in order, and the wrapper ``overhead``."""

    parts: tuple[int, ...]
    overhead: int

    @property
    def total(self) -> int:
        """The parts plus the overhead."""
        return sum(self.parts) + self.overhead


def redacted_reasoning_tokens(part: ReasoningPart) -> int:
    """Estimate of a redacted reasoning block: its opaque ``data`` is ciphertext of the reasoning,
    so a quarter of its length approximates the tokens it stands for."""
    return len(part.data or "") // 4


def _texts_of(part: Part, into: list[str]) -> None:
    """The texts :meth:`TokenCounter.count_part` encodes for ``part``, appended to ``into``."""
    if isinstance(part, TextPart):
        into.append(part.text)
    elif isinstance(part, ReasoningPart):
        if not part.redacted:
            into.append(part.text)
    elif isinstance(part, ToolCallPart):
        into.append(part.name)
        into.append(part.arguments)
    elif isinstance(part, ToolResultPart):
        for inner in part.content:
            _texts_of(inner, into)


def _plain(value: object) -> Any:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, tuple):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def tool_definition_json(tool: ToolDefinition) -> str:
    """The JSON ctxweb counts for one tool: ``{"name", "description", "parameters"}``; a tool
    kept verbatim (a type no adapter reads: a namespace of tools, a custom tool with its
    grammar, a provider's server tool) counts as the compact JSON it was sent as, so that the
    tools a namespace holds are counted too."""
    raw = tool.extra.get(RAW)
    if isinstance(raw, Mapping):  # compact, as a part kept verbatim is counted
        return json.dumps(raw, ensure_ascii=False, separators=(",", ":"), default=_plain)
    body = {"name": tool.name, "description": tool.description, "parameters": tool.parameters}
    return json.dumps(body, ensure_ascii=False, default=_plain)


class TokenCounter:
    """Counts texts, parts, messages and tool definitions with one tokenizer and a shared cache.

    Every text is hashed (blake2b) and looked up by (hash, encoding) before it is encoded, so
    content that repeats across parts, messages or turns is encoded once; ``encoded_tokens`` says
    how many tokens the tokenizer actually produced. A :meth:`scoped` counter, made for one job
    such as a plan, also remembers each text and message it counted, so counting them again costs
    a dictionary lookup.

    Args:
        tokenizer: the tokenizer to count with (:func:`compaction.tokens.get_tokenizer`).
        cache: a cache to share with other counters; a private one by default.

    Example:
        >>> from compaction.tokens import get_tokenizer
        >>> counter = TokenCounter(get_tokenizer("cl100k_base"))
        >>> counter.count_message(Message(role="user", parts=(TextPart("hello world"),))).total
        5
    """

    #: The per-request overhead, so a counter satisfies :class:`compaction.regions.Counter`.
    REQUEST_OVERHEAD = REQUEST_OVERHEAD

    def __init__(self, tokenizer: Tokenizer, *, cache: TokenCache | None = None) -> None:
        self.tokenizer = tokenizer
        self.cache = cache if cache is not None else TokenCache()
        self.encoded_tokens = 0
        # A scoped counter's memos (None otherwise): text -> tokens, and id(message) -> the
        # message (held, so the id is not reused while the scope lives) and its count.
        self._texts: dict[str, int] | None = None
        self._messages: dict[int, tuple[Message, MessageCount]] | None = None

    def scoped(self) -> Self:
        """A counter for one job (a plan): the same class, tokenizer and cache, which also
        remembers every text it counts (by value) and message it counts (by identity).

        Counting the same text or message object again is then a dictionary lookup instead of a
        hash of the whole text and a cache query, which matters when a job counts a context
        before and after its edits. The memos hold what they remember for as long as the scoped
        counter lives, so keep it for one job only; its ``encoded_tokens`` starts at 0.

        Example:
            >>> from compaction.tokens import get_tokenizer
            >>> scope = TokenCounter(get_tokenizer("cl100k_base")).scoped()
            >>> message = Message(role="user", parts=(TextPart("hello world"),))
            >>> scope.count_message(message) is scope.count_message(message)
            True
        """
        scope = copy.copy(self)
        scope.encoded_tokens = 0
        scope._texts = {}
        scope._messages = {}
        return scope

    def count_text(self, text: str) -> int:
        """Tokens of ``text``, from the cache when it was counted before under this encoding."""
        if not text:
            return 0
        texts = self._texts
        if texts is not None:
            known = texts.get(text)
            if known is not None:
                return known
        key = self._key(text)
        count = self.cache.get(key)
        if count is None:
            count = self.tokenizer.count(text)
            self.encoded_tokens += count
            self.cache.put(key, count)
        if texts is not None:
            texts[text] = count
        return count

    def _key(self, text: str) -> CacheKey:
        digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        return (digest, self.tokenizer.name)

    def prime(self, texts: Iterable[str], *, threads: int | None = None) -> int:
        """Count every text of ``texts`` not counted yet, several at once: the encodings are
        split into ``threads`` batches of about equal size, each encoded in a thread of its own
        (tiktoken encodes without holding the GIL, so on a machine with two cores a cold
        200K-token context is counted in about two thirds of the time). Later counts of these
        texts are then cache hits. Returns how many texts were encoded.

        ``threads`` defaults to the machine's cores, at most 4; fewer than
        :data:`PRIME_PARALLEL_CHARS` characters to encode are encoded in the calling thread.

        Example:
            >>> from compaction.tokens import get_tokenizer
            >>> scope = TokenCounter(get_tokenizer("cl100k_base")).scoped()
            >>> scope.prime(["hello world", "hello world", ""]), scope.count_text("hello world")
            (1, 2)
        """
        missing: dict[str, CacheKey] = {}
        known = self._texts
        for text in texts:
            if not text or text in missing or (known is not None and text in known):
                continue
            key = self._key(text)
            count = self.cache.get(key)
            if count is None:
                missing[text] = key
            elif known is not None:
                known[text] = count
        if not missing:
            return 0
        counts = self._encode_all(list(missing), threads)
        for text, count in counts.items():
            self.encoded_tokens += count
            self.cache.put(missing[text], count)
            if known is not None:
                known[text] = count
        return len(missing)

    def prime_context(self, context: Context) -> int:
        """:meth:`prime` with every text of ``context`` this counter counts: the tool
        definitions, the system prompt and each message's parts."""
        texts = [tool_definition_json(tool) for tool in context.tools]
        for part in context.system:
            _texts_of(part, texts)
        for message in context.messages:
            for part in message.parts:
                _texts_of(part, texts)
        return self.prime(texts)

    def _encode_all(self, texts: list[str], threads: int | None) -> dict[str, int]:
        if threads is None:
            threads = min(4, os.cpu_count() or 1)
        if threads < 2 or sum(map(len, texts)) < PRIME_PARALLEL_CHARS:
            return {text: self.tokenizer.count(text) for text in texts}
        # longest first, each to the lightest batch: batches of about equal work
        batches: list[list[str]] = [[] for _ in range(threads)]
        loads = [0] * threads
        for text in sorted(texts, key=len, reverse=True):
            lightest = loads.index(min(loads))
            batches[lightest].append(text)
            loads[lightest] += len(text)
        results: list[dict[str, int]] = [{} for _ in batches]
        errors: list[BaseException] = []

        def encode(k: int) -> None:
            try:
                results[k] = {text: self.tokenizer.count(text) for text in batches[k]}
            except BaseException as error:  # re-raised in the calling thread
                errors.append(error)

        workers = [threading.Thread(target=encode, args=(k,)) for k in range(1, threads)]
        for worker in workers:
            worker.start()
        encode(0)
        for worker in workers:
            worker.join()
        if errors:
            raise errors[0]
        return {text: count for result in results for text, count in result.items()}

    def count_part(self, part: Part) -> int:
        """Tokens of one part.

        Text and readable reasoning count their text; redacted reasoning counts ``len(data)//4``;
        a tool call counts its name and argument JSON; a tool result the sum of its parts; media
        the per-item estimate of :func:`compaction.tokens.media_tokens`.
        """
        if isinstance(part, TextPart):
            return self.count_text(part.text)
        if isinstance(part, ReasoningPart):
            if part.redacted:
                return redacted_reasoning_tokens(part)
            return self.count_text(part.text)
        if isinstance(part, ToolCallPart):
            return self.count_text(part.name) + self.count_text(part.arguments)
        if isinstance(part, ToolResultPart):
            return sum(self.count_part(p) for p in part.content)
        if isinstance(part, MediaPart):
            return media_tokens(part)
        raise TypeError(f"not a message part: {type(part).__name__}")

    def count_message(self, message: Message) -> MessageCount:
        """The tokens of each part of ``message`` and its wrapper overhead."""
        messages = self._messages
        if messages is not None:
            known = messages.get(id(message))
            if known is not None and known[0] is message:
                return known[1]
        overhead = MESSAGE_OVERHEAD + (NAME_OVERHEAD if message.name else 0)
        count = MessageCount(tuple(self.count_part(p) for p in message.parts), overhead)
        if messages is not None:
            messages[id(message)] = (message, count)
        return count

    def count_system(self, parts: Iterable[Part]) -> int:
        """Tokens of a top-level system prompt (Anthropic's ``system``, Responses'
        ``instructions``), counted as one system message would be: its parts plus
        :data:`MESSAGE_OVERHEAD`; 0 if empty.
        """
        counts = [self.count_part(p) for p in parts]
        return sum(counts) + MESSAGE_OVERHEAD if counts else 0

    def count_tools(self, tools: Sequence[ToolDefinition]) -> int:
        """Tokens of the tool definitions: each tool's JSON plus :data:`TOOLS_OVERHEAD`; 0 if none.

        An approximation: OpenAI renders tools in its own format, which is not public.
        """
        if not tools:
            return 0
        return sum(self.count_text(tool_definition_json(t)) for t in tools) + TOOLS_OVERHEAD
