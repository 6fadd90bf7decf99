"""LLM4S's context pipeline (PR #228, ``org.llm4s.context``), as ``llm4s-pipeline``.

``ContextManager.manageContext(conversation, budget)`` with ``ContextConfig.default``
(``specs/seed-strategies.md`` §3), in four steps that always run in this order:

1. **ToolDeterministicCompaction** (:func:`compress_tool_output`): every tool output over 8 KB
   (UTF-8) is externalized behind ``[EXTERNALIZED: content_<sha256> | TYPE | summary]``; one over
   2 KB is compressed inline by content type (JSON/YAML, log, error, binary, text).
2. **HistoryCompression** (:func:`compress_to_digest`), only when the conversation's count is over
   the budget: the last 5 semantic blocks (:func:`semantic_blocks`) stay; each older block becomes
   a system message ``[HISTORY_SUMMARY]\\n<regex digest>``, consolidated into one past 400 tokens.
3. **LLMHistorySqueeze**, only when still over budget and a summarizer is given: each digest is
   rewritten by the summarizer with LLM4S's own prompt, and (quirk) moved to the end.
4. **FinalTokenTrim** (:func:`trim_to_budget`): unless the count is within ``budget × 0.92``, keep
   the first message if it is a digest, then the newest messages that fit, stopping at the first
   that does not.

Tokens are LLM4S's ``ConversationTokenCounter`` through the plan's counter: text tokens + 4 per
message, name + arguments + 10 per tool call, ``"tool_call_id:" + id`` per tool message, + 10 per
conversation. As in LLM4S, where the system prompt is injected at send time, the conversation is
the history: a top-level system prompt and the leading system or developer messages stay as they
are and do not count against the budget. Quirks are reproduced by default; the ones that hurt
(orphaned tool pairs, text compression that grows, the squeezed digest moving to the end) each
have an option, and a warning says when they fire. Externalized outputs are kept as artifacts
whose id is the same sha256 as the ``content_`` key.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeAlias

from compaction.errors import StrategyError
from compaction.messages.model import Message, Part, Role, TextPart, ToolResultPart
from compaction.strategies.base import Draft, EditKind, Param, Strategy
from compaction.strategies.outputs import is_tool_message
from compaction.summarizers import Summarizer, SummarizerError
from compaction.tokens.estimators import LLM4S_CONVERSATION_OVERHEAD, llm4s_message_tokens
from compaction.turns import find_legal_start

__all__ = [
    "DIGEST_PROMPT",
    "HISTORY_SUMMARY",
    "Block",
    "Llm4sPipeline",
    "ManagedConversation",
    "PipelineStep",
    "block_digest",
    "compress_to_digest",
    "compress_tool_output",
    "content_summary",
    "conversation_tokens",
    "detect_content_type",
    "fits_in_budget",
    "manage_context",
    "semantic_blocks",
    "trim_to_budget",
    "usage_info",
]

HISTORY_SUMMARY = "[HISTORY_SUMMARY]"
EXTERNALIZE_BYTES = 8192
INLINE_BYTES = 2048
DEFAULT_HEADROOM = 0.08
DEFAULT_MAX_BLOCKS = 5
DEFAULT_SUMMARY_TARGET = 400

#: LLMCompressor's ``DigestCompressionPrompt``, byte for byte (two spaces end its third line).
DIGEST_PROMPT = (
    "Compress this history digest while preserving key structured information:\n"
    "- Keep all IDs, URLs, status codes, error messages\n"
    "- Preserve decision points and outcomes  \n"
    "- Maintain tool usage patterns\n"
    "- Compress descriptive text only\n"
    "- Target 50% size reduction"
)

Count: TypeAlias = Callable[[str], int]
#: A message and its position in the strategy's draft (``None`` for a message LLM4S created).
_Item: TypeAlias = tuple[Message, int | None]

# --- JVM string helpers -------------------------------------------------------------------------

_JAVA_WS = "".join(chr(i) for i in range(33))


def _jtrim(text: str) -> str:
    """Java's ``String.trim``: strips characters up to U+0020 only."""
    return text.strip(_JAVA_WS)


def _jlen(text: str) -> int:
    """Java's ``String.length``: UTF-16 code units."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _jsplit(pattern: str, text: str) -> list[str]:
    """Java's ``String.split(regex)``: trailing empty strings removed; no match gives ``[text]``."""
    if re.search(pattern, text) is None:
        return [text]
    parts = re.split(pattern, text)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


# --- ConversationTokenCounter (§3.1) ------------------------------------------------------------


def conversation_tokens(messages: Sequence[Message], count: Count) -> int:
    """LLM4S's ``countConversation``: each message's tokens plus 10.

    Example:
        >>> from compaction.messages.model import Message, TextPart
        >>> conversation_tokens([Message("user", (TextPart("Hello, how are you?"),))],
        ...                     lambda s: -(-len(s) // 4))
        19
    """
    return sum(llm4s_message_tokens(m, count) for m in messages) + LLM4S_CONVERSATION_OVERHEAD


class _MessageTokens:
    """LLM4S's tokens of each message (:func:`llm4s_message_tokens` with ``count``), each message
    counted once.

    The pipeline recounts the whole conversation before and after every step, and most messages
    go through all four steps unchanged. Messages are frozen, so a count is kept by identity; the
    message is held beside it, so its id cannot be reused while the memo lives (one run).
    """

    def __init__(self, count: Count) -> None:
        self.count = count
        self._known: dict[int, tuple[Message, int]] = {}

    def __call__(self, message: Message) -> int:
        known = self._known.get(id(message))
        if known is not None and known[0] is message:
            return known[1]
        tokens = llm4s_message_tokens(message, self.count)
        self._known[id(message)] = (message, tokens)
        return tokens

    def conversation(self, messages: Iterable[Message]) -> int:
        """:func:`conversation_tokens` of ``messages``."""
        return sum(self(m) for m in messages) + LLM4S_CONVERSATION_OVERHEAD


def _items_tokens(items: Sequence[_Item], tokens: _MessageTokens) -> int:
    return tokens.conversation(m for m, _ in items)


# --- ToolOutputCompressor (§3.3) ----------------------------------------------------------------


def detect_content_type(content: str) -> str:
    """LLM4S's ``detectContentType`` on the trimmed text: json, yaml, error, log, binary or text.

    Example:
        >>> detect_content_type('  {"a": 1} '), detect_content_type("a --- b")
        ('json', 'yaml')
    """
    c = _jtrim(content)
    if (c.startswith("{") and c.endswith("}")) or (c.startswith("[") and c.endswith("]")):
        return "json"
    if "---" in c and (":" in c or "-" in c):
        return "yaml"
    if "ERROR:" in c or "Exception" in c or "Traceback" in c:
        return "error"
    if "INFO " in c or "DEBUG " in c or "WARN " in c:
        return "log"
    if c.startswith("data:") or "base64" in c:
        return "binary"
    return "text"


class _NotJson(ValueError):
    pass


def _reject_constant(name: str) -> Any:
    raise _NotJson(name)


def _parse_json(content: str) -> Any:
    """ujson's ``read``: strict JSON (no NaN or Infinity); raises :class:`ValueError`."""
    return json.loads(content, parse_constant=_reject_constant)


def _json_fields(value: Any) -> int:
    if isinstance(value, dict | list):
        return len(value)
    return 1


def content_summary(content: str, content_type: str) -> str:
    """LLM4S's ``generateContentSummary`` (sizes are the content's length in chars).

    Example:
        >>> content_summary("x" * 10, "text")
        'Text content, 10 bytes'
    """
    size = _jlen(content)
    if content_type == "json":
        try:
            value = _parse_json(content)
        except ValueError:
            return f"JSON-like content, {size} bytes"
        return f"JSON object with {_json_fields(value)} fields, {size} bytes"
    if content_type == "log":
        return f"Log output with {content.count(chr(10)) + 1} lines, {size} bytes"
    if content_type == "error":
        first = content.split("\n")[0] if content else "Error"
        return f"Error: {first[:100]}, {size} bytes"
    return f"{content_type[:1].upper()}{content_type[1:]} content, {size} bytes"


def _compress_json(value: Any) -> Any:
    if isinstance(value, dict):
        kept = {k: v for k, v in value.items() if not (v is None or v == "" or v == [])}
        return {k: _compress_json(v) for k, v in kept.items()}
    if isinstance(value, list):
        if len(value) > 20:
            head = [_compress_json(v) for v in value[:10]]
            tail = [_compress_json(v) for v in value[-10:]]
            return [*head, f"...[+{len(value) - 20} items]...", *tail]
        return [_compress_json(v) for v in value]
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**63:
        return int(value)  # ujson writes a whole Double without ".0"
    return value


def _compress_structured(content: str) -> str:
    try:
        value = _parse_json(content)
    except ValueError:
        return _compress_text(content)
    return json.dumps(_compress_json(value), separators=(",", ":"), ensure_ascii=False)


_REPEAT = re.compile(r"×(\d+)")


def _collapse_repeats(lines: Sequence[str]) -> list[str]:
    last: str | None = None
    out: list[str] = []
    for line in lines:
        if last is not None and last == line:
            if out and "×" in out[-1]:
                found = _REPEAT.search(out[-1])
                n = (int(found.group(1)) if found else 1) + 1
                out[-1] = f"{line} ×{n}"
            else:
                out[-1] = f"{line} ×2"
        else:
            out.append(line)
        last = line
    return out


def _compress_log(content: str) -> str:
    lines = _jsplit("\n", content)
    n = len(lines)
    if n <= 120:
        return content
    kept = [*lines[:80], f"... [collapsed {n - 120} repeated/verbose log lines] ...", *lines[-40:]]
    return "\n".join(_collapse_repeats(kept))


def _compress_error(content: str) -> str:
    lines = _jsplit("\n", content)
    header = "\n".join(lines[:3])
    stack = [
        line
        for line in lines[3:]
        if _jtrim(line).startswith("at ") or ".java:" in line or ".scala:" in line
    ]
    if len(stack) <= 10:
        return content
    frames = "\n".join(stack[:10])
    return f"{header}\n{frames}\n... [+{len(stack) - 10} additional stack frames] ..."


def _compress_text(content: str) -> str:
    if _jlen(content) <= 1000:
        return content
    words = _jsplit(r"[ \t\n\x0b\f\r]+", content)
    tail = words[-20:] if words else []
    return " ".join(words[:50]) + f" ... [+{len(words) - 50} words] ... " + " ".join(tail)


def _compress_inline(content: str, content_type: str, tool_call_id: str) -> str:
    if content_type in ("json", "yaml"):
        return _compress_structured(content)
    if content_type == "log":
        return _compress_log(content)
    if content_type == "error":
        return _compress_error(content)
    if content_type == "binary":
        return f"[BINARY CONTENT - {_jlen(content)} bytes - externalized: {tool_call_id}]"
    return _compress_text(content)


def compress_tool_output(
    content: str,
    tool_call_id: str = "",
    *,
    externalize_bytes: int = EXTERNALIZE_BYTES,
    inline_bytes: int = INLINE_BYTES,
) -> tuple[str, str | None]:
    """One tool output through LLM4S's ``ToolOutputCompressor``: ``(new content, action)``.

    ``action`` is ``"externalize"`` (the content is then the pointer, keyed by
    ``content_<sha256 of the UTF-8 content>``), ``"inline"`` or ``None`` (unchanged).

    Example:
        >>> compress_tool_output('{"name": "test", "value": 42}')
        ('{"name": "test", "value": 42}', None)
        >>> compress_tool_output("x" * 10000)[0][:23]
        '[EXTERNALIZED: content_'
    """
    size = len(content.encode("utf-8", "surrogatepass"))
    content_type = detect_content_type(content)
    if size > externalize_bytes:
        key = "content_" + hashlib.sha256(content.encode("utf-8", "surrogatepass")).hexdigest()
        summary = content_summary(content, content_type)
        return f"[EXTERNALIZED: {key} | {content_type.upper()} | {summary}]", "externalize"
    if size > inline_bytes:
        return _compress_inline(content, content_type, tool_call_id), "inline"
    return content, None


# --- SemanticBlocks (§3.4) ----------------------------------------------------------------------


@dataclass(frozen=True)
class Block:
    """One LLM4S semantic block: its type and the indexes of its messages."""

    type: str
    indexes: tuple[int, ...]


def _kind(message: Message) -> str:
    if is_tool_message(message):
        return "tool"
    if message.role == "user":
        return "user"
    return "assistant"  # assistant, and system/developer treated like it


def semantic_blocks(messages: Sequence[Message]) -> list[Block]:
    """LLM4S's ``groupIntoSemanticBlocks``: a user message opens a pair that the next assistant
    (or system) message closes; a tool message joins the open block or opens a standalone one.

    Example:
        >>> from compaction.messages.model import Message, TextPart
        >>> [b.type for b in semantic_blocks([Message("assistant", (TextPart("hi"),))])]
        ['StandaloneAssistant']
    """
    blocks: list[Block] = []
    current: list[int] = []
    current_type = ""
    expecting = False
    for i, message in enumerate(messages):
        kind = _kind(message)
        if kind == "user":
            if current:
                blocks.append(Block(current_type, tuple(current)))
            current, current_type, expecting = [i], "UserAssistantPair", True
        elif kind == "assistant":
            if current and expecting:
                blocks.append(Block(current_type, (*current, i)))
                current, current_type, expecting = [], "", False
            else:
                if current:
                    blocks.append(Block(current_type, tuple(current)))
                current, current_type, expecting = [i], "StandaloneAssistant", False
        elif current:
            current.append(i)
        else:
            current, current_type, expecting = [i], "StandaloneTool", False
    if current:
        blocks.append(Block(current_type, tuple(current)))
    return blocks


# --- HistoryCompressor (§3.5) -------------------------------------------------------------------

_FLAGS = re.IGNORECASE | re.ASCII
_IDS = re.compile(r"\b(?:id|identifier|uuid|key|ref(?:erence)?)[:\s=]+([a-zA-Z0-9\-_]+)", _FLAGS)
_URLS = re.compile(r"(?:https?://|www\.)[^\s<>\"'{|}\\^`\[\]]+", _FLAGS)
_CONSTRAINTS = re.compile(r"(?:must|should|cannot|required?|forbidden|allowed)[^.!?]*[.!?]", _FLAGS)
_STATUS = re.compile(r"(?:status|code|error)[:\s]+(\d{3,4})", _FLAGS)
_ERRORS = re.compile(r"(?:error|exception|failed?|denied)[^.!?]*[.!?]", _FLAGS)
_DECISIONS = re.compile(r"(?:decided|chosen|selected|determined)[^.!?]*[.!?]", _FLAGS)
_TOOLS = re.compile(r"(?:tool|function|api|call)(?:ed|ing)?[^.!?]*[.!?]", _FLAGS)
_OUTCOMES = re.compile(r"(?:result|outcome|conclusion|success|completed?)[^.!?]*[.!?]", _FLAGS)


def _matches(pattern: re.Pattern[str], text: str, cap: int) -> list[str]:
    found = list(dict.fromkeys(m.group(0) for m in pattern.finditer(text)))
    return found[:5][:cap]


def _content(message: Message) -> str:
    """A message's ``content`` as LLM4S holds it (tool results' text for a tool message)."""
    pieces: list[str] = []
    results = message.tool_results
    if not results or any(not isinstance(p, ToolResultPart) for p in message.parts):
        pieces.append(message.text)
    pieces += [r.text for r in results]
    return " ".join(pieces)


def block_digest(block_type: str, messages: Sequence[Message]) -> str:
    """LLM4S's ``createBlockDigest`` + ``formatDigest`` for one block.

    Example:
        >>> from compaction.messages.model import Message, TextPart
        >>> block_digest("UserAssistantPair", [Message("user", (TextPart("hi"),))])
        'UserAssistantPair (no key info extracted)'
    """
    text = " ".join(_content(m) for m in messages)
    ids = _matches(_IDS, text, 3)
    urls = _matches(_URLS, text, 2)
    constraints = _matches(_CONSTRAINTS, text, 2)
    status = [m.group(0) for m in _STATUS.finditer(text)]
    status = list(dict.fromkeys(status))[:5][:2]
    errors = _matches(_ERRORS, text, 2)
    decisions = _matches(_DECISIONS, text, 2)
    tools = _matches(_TOOLS, text, 2)
    outcomes = _matches(_OUTCOMES, text, 2)
    out = f"{block_type}: "
    if ids:
        out += f"IDs[{','.join(ids)}] "
    if constraints:
        out += f"Rules[{constraints[0][:50]}...] "
    if decisions:
        out += f"Decision[{decisions[0][:50]}...] "
    if errors:
        out += f"Error[{errors[0][:40]}...] "
    if status:
        out += f"Status[{','.join(status)}] "
    if tools:
        out += f"Tools[{len(tools)} used] "
    if outcomes:
        out += f"Result[{outcomes[0][:40]}...] "
    if urls:
        out += f"URLs[{len(urls)}] "
    digest = _jtrim(out)
    if digest.endswith(":"):
        return digest[:-1] + " (no key info extracted)"
    return digest


def _digest_message(body: str) -> Message:
    return Message("system", (TextPart(f"{HISTORY_SUMMARY}\n{body}"),))


def _digest_items(
    items: Sequence[_Item],
    tokens: _MessageTokens,
    cap: int,
    keep_last_k: int,
    keep_tool_pairs: bool = False,
) -> tuple[list[_Item], list[int], bool]:
    """(new items, positions digested, whether the split orphaned a tool result)."""
    messages = [m for m, _ in items]
    if any(_content(m).startswith(HISTORY_SUMMARY) for m in messages):
        return list(items), [], False
    blocks = semantic_blocks(messages)
    split = len(blocks) if keep_last_k <= 0 else max(0, len(blocks) - keep_last_k)
    first_recent = blocks[split].indexes[0] if split < len(blocks) else len(messages)
    orphaned = first_recent < len(messages) and find_legal_start(messages[first_recent:]) > 0
    if orphaned and keep_tool_pairs:
        while split > 0 and find_legal_start(messages[blocks[split].indexes[0] :]) > 0:
            split -= 1
    older, recent = blocks[:split], blocks[split:]
    digests = [block_digest(b.type, [messages[i] for i in b.indexes]) for b in older]
    digest_messages = [_digest_message(d) for d in digests]
    if sum(tokens(m) for m in digest_messages) > cap:
        joined = "; ".join(f"Block{i + 1}: {d}" for i, d in enumerate(digests))
        if len(joined) > cap * 4:
            joined = joined[: cap * 4] + "..."
        digest_messages = [_digest_message(joined)]
    out: list[_Item] = [(m, None) for m in digest_messages]
    out += [items[i] for b in recent for i in b.indexes]
    gone = [p for b in older for i in b.indexes if (p := items[i][1]) is not None]
    return out, gone, orphaned and not keep_tool_pairs


def compress_to_digest(
    messages: Sequence[Message], count: Count, cap: int, keep_last_k: int
) -> list[Message]:
    """LLM4S's ``HistoryCompressor.compressToDigest``: digests of all but the last
    ``keep_last_k`` semantic blocks, then the recent blocks' messages.

    Example:
        >>> compress_to_digest([], len, 200, 1)
        []
    """
    items = [(m, i) for i, m in enumerate(messages)]
    out, _, _ = _digest_items(items, _MessageTokens(count), cap, keep_last_k)
    return [m for m, _ in out]


# --- TokenWindow (§3.7) -------------------------------------------------------------------------


def _validate(n_messages: int, budget: int, headroom: float) -> None:
    if budget <= 0:
        raise StrategyError("budget", "Token budget must be positive")
    if headroom < 0 or headroom >= 1.0:
        raise StrategyError("headroom", "Headroom percent must be between 0.0 and 1.0")
    if n_messages == 0:
        raise StrategyError("conversation", "Cannot trim empty conversation")


def _trim_items(
    items: Sequence[_Item], tokens: _MessageTokens, budget: int, headroom: float
) -> tuple[list[_Item], bool]:
    _validate(len(items), budget, headroom)
    effective = int(budget * (1.0 - headroom))
    if _items_tokens(items, tokens) <= effective:
        return list(items), False
    pinned: list[_Item] = []
    rest = list(items)
    if HISTORY_SUMMARY in _content(items[0][0]):
        pinned, rest = [items[0]], rest[1:]
    remaining = effective
    if pinned:
        remaining = max(0, effective - tokens(pinned[0][0]))
    kept: list[_Item] = []
    used = 0
    for item in reversed(rest):
        size = tokens(item[0])
        if used + size > remaining:
            break
        kept.append(item)
        used += size
    return [*pinned, *reversed(kept)], True


def trim_to_budget(
    messages: Sequence[Message], count: Count, budget: int, headroom: float = DEFAULT_HEADROOM
) -> list[Message]:
    """LLM4S's ``TokenWindow.trimToBudget``.

    Raises :class:`StrategyError` (paths ``budget``, ``headroom``, ``conversation``) where LLM4S
    returns a ``ValidationError``, e.g. "Cannot trim empty conversation".

    Example:
        >>> trim_to_budget([], len, 100)
        Traceback (most recent call last):
        compaction.errors.StrategyError: conversation: Cannot trim empty conversation
    """
    items = [(m, i) for i, m in enumerate(messages)]
    out, _ = _trim_items(items, _MessageTokens(count), budget, headroom)
    return [m for m, _ in out]


def fits_in_budget(
    messages: Sequence[Message], count: Count, budget: int, headroom: float = DEFAULT_HEADROOM
) -> bool:
    """LLM4S's ``TokenWindow.fitsInBudget``: count ≤ ``int(budget × (1 − headroom))``."""
    return conversation_tokens(messages, count) <= int(budget * (1.0 - headroom))


def usage_info(messages: Sequence[Message], count: Count, budget: int) -> tuple[int, bool, int]:
    """LLM4S's ``getUsageInfo``: (current tokens, within budget, utilisation percent rounded)."""
    current = conversation_tokens(messages, count)
    percent = int(current / budget * 100 + 0.5) if budget > 0 else 0
    return current, current <= budget, percent


# --- ContextManager (§3.2) ----------------------------------------------------------------------

STEP_NAMES = ("ToolDeterministicCompaction", "HistoryCompression", "LLMHistorySqueeze")


@dataclass(frozen=True)
class PipelineStep:
    """One reported step of the pipeline."""

    name: str
    tokens_before: int
    tokens_after: int
    applied: bool


@dataclass(frozen=True)
class ManagedConversation:
    """What :func:`manage_context` returns: the messages and the four steps, in order."""

    messages: tuple[Message, ...]
    original_tokens: int
    final_tokens: int
    steps: tuple[PipelineStep, ...]


@dataclass(frozen=True)
class _Config:
    budget: int
    headroom: float = DEFAULT_HEADROOM
    max_blocks: int = DEFAULT_MAX_BLOCKS
    summary_target: int = DEFAULT_SUMMARY_TARGET
    deterministic: bool = True
    llm: bool = True
    externalize_bytes: int = EXTERNALIZE_BYTES
    inline_bytes: int = INLINE_BYTES
    keep_tool_pairs: bool = False
    no_growth: bool = False
    digest_in_place: bool = False


@dataclass
class _Run:
    """The pipeline's working state over items, with what each position became."""

    items: list[_Item]
    steps: list[PipelineStep]
    outputs: dict[tuple[int, int], tuple[str, str, str]]  # (pos, part) -> (old, new, action)
    digested: list[int]
    trimmed: list[int]
    notes: list[str]


def _with_text(message: Message, part_index: int, text: str) -> Message:
    part = message.parts[part_index]
    assert isinstance(part, ToolResultPart)
    others = [p for p in part.content if not isinstance(p, TextPart)]
    first = next((p for p in part.content if isinstance(p, TextPart)), None)
    new: Part = TextPart(text, first.extra) if first is not None else TextPart(text)
    parts = list(message.parts)
    parts[part_index] = replace(part, content=(new, *others))
    return replace(message, parts=tuple(parts))


def _step1(run: _Run, config: _Config, tokens: _MessageTokens) -> None:
    before = _items_tokens(run.items, tokens)
    if not config.deterministic:
        run.steps.append(PipelineStep(STEP_NAMES[0], before, before, False))
        return
    changed = False
    for k, (message, position) in enumerate(run.items):
        for j, part in enumerate(message.parts):
            if not isinstance(part, ToolResultPart):
                continue
            old = part.text
            new, action = compress_tool_output(
                old,
                part.tool_call_id,
                externalize_bytes=config.externalize_bytes,
                inline_bytes=config.inline_bytes,
            )
            if action is None or new == old:
                continue
            if action == "inline" and len(new) > len(old):
                run.notes.append("grew")
                if config.no_growth:
                    continue
            message = _with_text(message, j, new)
            changed = True
            if position is not None:
                run.outputs[(position, j)] = (old, new, action)
        run.items[k] = (message, position)
    after = _items_tokens(run.items, tokens)
    run.steps.append(PipelineStep(STEP_NAMES[0], before, after, changed))


def _step2(run: _Run, config: _Config, tokens: _MessageTokens) -> None:
    before = _items_tokens(run.items, tokens)
    if before <= config.budget:
        run.steps.append(PipelineStep(STEP_NAMES[1], before, before, False))
        return
    out, gone, orphaned = _digest_items(
        run.items, tokens, config.summary_target, config.max_blocks, config.keep_tool_pairs
    )
    if orphaned:
        run.notes.append("split-orphans")
    applied = [m for m, _ in out] != [m for m, _ in run.items]
    run.items = out
    run.digested += gone
    run.steps.append(PipelineStep(STEP_NAMES[1], before, _items_tokens(out, tokens), applied))


def _step3(
    run: _Run, config: _Config, tokens: _MessageTokens, summarizer: Summarizer | None
) -> None:
    before = _items_tokens(run.items, tokens)
    skip = PipelineStep(STEP_NAMES[2], before, before, False)
    if before <= config.budget or not config.llm or summarizer is None:
        run.steps.append(skip)
        return
    digests = [k for k, (m, _) in enumerate(run.items) if HISTORY_SUMMARY in _content(m)]
    if not digests:
        run.steps.append(skip)
        return
    if sum(tokens(run.items[k][0]) for k in digests) <= config.summary_target:
        run.steps.append(skip)
        return
    squeezed: dict[int, _Item] = {}
    for k in digests:
        message, position = run.items[k]
        content = _content(message)
        header, sep, body = content.partition("\n")
        if not (sep and HISTORY_SUMMARY in header):
            body = content
        reply = summarizer.summarize(
            [Message("user", (TextPart(body),))], previous=None, prompt=DIGEST_PROMPT
        )
        role: Role = "system" if message.role == "system" else "user"
        squeezed[k] = (Message(role, (TextPart(f"{HISTORY_SUMMARY}\n{reply}"),)), None)
        if position is not None:
            run.digested.append(position)
    if config.digest_in_place:
        out = [squeezed.get(k, item) for k, item in enumerate(run.items)]
    else:
        out = [item for k, item in enumerate(run.items) if k not in squeezed]
        out += [squeezed[k] for k in digests]
        if len(out) > len(digests):
            run.notes.append("digest-moved")
    applied = [m for m, _ in out] != [m for m, _ in run.items]
    run.items = out
    run.steps.append(PipelineStep(STEP_NAMES[2], before, _items_tokens(out, tokens), applied))


def _step4(run: _Run, config: _Config, tokens: _MessageTokens) -> None:
    before = _items_tokens(run.items, tokens)
    out, trimmed = _trim_items(run.items, tokens, config.budget, config.headroom)
    pinned = 1 if trimmed and HISTORY_SUMMARY in _content(run.items[0][0]) else 0
    if trimmed and len(out) > pinned:
        tail = [m for m, _ in out[pinned:]]
        legal = find_legal_start(tail)
        if legal:
            if config.keep_tool_pairs:
                out = [*out[:pinned], *out[pinned + legal :]]
            else:
                run.notes.append("trim-orphans")
    kept = {id(item) for item in out}
    run.trimmed += [p for item in run.items if id(item) not in kept and (p := item[1]) is not None]
    run.items = out
    run.steps.append(PipelineStep("FinalTokenTrim", before, _items_tokens(out, tokens), trimmed))


def _manage(
    items: list[_Item], tokens: _MessageTokens, config: _Config, summarizer: Summarizer | None
) -> _Run:
    _validate(1, config.budget, config.headroom)
    run = _Run(list(items), [], {}, [], [], [])
    _step1(run, config, tokens)
    _step2(run, config, tokens)
    _step3(run, config, tokens, summarizer)
    _step4(run, config, tokens)
    return run


def manage_context(
    messages: Sequence[Message],
    count: Count,
    budget: int,
    *,
    headroom: float = DEFAULT_HEADROOM,
    max_semantic_blocks: int = DEFAULT_MAX_BLOCKS,
    summary_token_target: int = DEFAULT_SUMMARY_TARGET,
    enable_deterministic_compression: bool = True,
    enable_llm_compression: bool = True,
    summarizer: Summarizer | None = None,
) -> ManagedConversation:
    """LLM4S's ``ContextManager.manageContext`` with ``ContextConfig.default`` unless told.

    Raises :class:`StrategyError` where LLM4S returns ``Left`` (bad budget or headroom, empty
    conversation) and :class:`~compaction.summarizers.SummarizerError` when the squeeze fails.

    Example:
        >>> from compaction.messages.model import Message, TextPart
        >>> done = manage_context([Message("user", (TextPart("hi"),))], len, 1000)
        >>> [s.applied for s in done.steps]
        [False, False, False, False]
    """
    config = _Config(
        budget,
        headroom,
        max_semantic_blocks,
        summary_token_target,
        enable_deterministic_compression,
        enable_llm_compression,
    )
    tokens = _MessageTokens(count)
    run = _manage([(m, i) for i, m in enumerate(messages)], tokens, config, summarizer)
    final = tuple(m for m, _ in run.items)
    return ManagedConversation(
        final,
        tokens.conversation(messages),
        tokens.conversation(final),
        tuple(run.steps),
    )


# --- The strategy -------------------------------------------------------------------------------


class Llm4sPipeline(Strategy):
    """``llm4s-pipeline``: LLM4S's four-step ``ContextManager`` pipeline (§3)."""

    id = "llm4s-pipeline"
    description = (
        "LLM4S's pipeline: externalize tool outputs over 8 KB behind [EXTERNALIZED: content_<sha>"
        " | TYPE | summary], compact 2-8 KB ones inline by type, replace all but the last 5"
        " semantic blocks with [HISTORY_SUMMARY] regex digests when over budget, optionally"
        " squeeze the digests with an LLM, then keep the newest messages within budget minus 8%."
    )
    source = "LLM4S"
    params = (
        Param(
            "budget",
            "int",
            None,
            min=1,
            max=10_000_000,
            help="token budget of the conversation (LLM4S tokens); default: context window"
            " minus output reserve",
        ),
        Param(
            "context_window",
            "int",
            200_000,
            min=1000,
            max=10_000_000,
            help="for the default budget",
        ),
        Param(
            "output_reserve",
            "int",
            None,
            min=0,
            max=1_000_000,
            help="for the default budget; default the context's max output tokens, else 0",
        ),
        Param(
            "headroom",
            "float",
            DEFAULT_HEADROOM,
            min=0.0,
            max=1.0,
            help="FinalTokenTrim keeps within budget × (1 − headroom); 0 ≤ headroom < 1",
        ),
        Param(
            "max_semantic_blocks",
            "int",
            DEFAULT_MAX_BLOCKS,
            min=0,
            max=10_000,
            help="recent semantic blocks kept verbatim by HistoryCompression (≤ 0: none)",
        ),
        Param(
            "summary_token_target",
            "int",
            DEFAULT_SUMMARY_TARGET,
            min=1,
            max=1_000_000,
            help="digest tokens above which digests are consolidated (and squeezed)",
        ),
        Param(
            "enable_deterministic_compression", "bool", True, help="run ToolDeterministicCompaction"
        ),
        Param(
            "enable_llm_compression",
            "bool",
            True,
            help="run LLMHistorySqueeze when a summarizer is configured",
        ),
        Param(
            "externalize_bytes",
            "int",
            EXTERNALIZE_BYTES,
            min=1,
            max=100_000_000,
            help="tool outputs above this many UTF-8 bytes are externalized",
        ),
        Param(
            "inline_bytes",
            "int",
            INLINE_BYTES,
            min=0,
            max=100_000_000,
            help="tool outputs above this many bytes are compressed inline by type",
        ),
        Param(
            "keep_tool_pairs",
            "bool",
            False,
            help="deviation: never let the block split or the trim orphan a tool result",
        ),
        Param(
            "no_growth",
            "bool",
            False,
            help="deviation: skip an inline compression that makes the output longer",
        ),
        Param(
            "digest_in_place",
            "bool",
            False,
            help="deviation: keep a squeezed digest where it was instead of moving it to the end",
        ),
    )

    def check_together(self, params: dict[str, Any]) -> None:
        if params["headroom"] >= 1.0:
            raise StrategyError(
                "params.headroom", "Headroom percent must be between 0.0 and 1.0 (below 1)"
            )

    def run(self, draft: Draft, params: dict[str, Any], summarizer: Summarizer | None) -> None:
        budget = params["budget"]
        if budget is None:
            reserve: int = params["output_reserve"]
            if reserve is None:
                reserve = draft.context.max_output_tokens or 0
            budget = max(params["context_window"] - reserve, 1)
        config = _Config(
            budget=budget,
            headroom=params["headroom"],
            max_blocks=params["max_semantic_blocks"],
            summary_target=params["summary_token_target"],
            deterministic=params["enable_deterministic_compression"],
            llm=params["enable_llm_compression"],
            externalize_bytes=params["externalize_bytes"],
            inline_bytes=params["inline_bytes"],
            keep_tool_pairs=params["keep_tool_pairs"],
            no_growth=params["no_growth"],
            digest_in_place=params["digest_in_place"],
        )
        lead = 0
        while lead < len(draft.messages) and draft.messages[lead].role in ("system", "developer"):
            lead += 1
        items: list[_Item] = [(draft.messages[p], p) for p in range(lead, len(draft.messages))]
        if not items:
            draft.warn(
                "llm4s-pipeline: Cannot trim empty conversation (LLM4S fails the whole pipeline);"
                " the context is left unchanged"
            )
            return
        tokens = _MessageTokens(draft.text_tokens)
        try:
            run = _manage(items, tokens, config, summarizer)
        except SummarizerError as error:
            draft.warn(
                f"llm4s-pipeline: the LLM squeeze failed ({error}); LLM4S fails the whole"
                " pipeline, so the context is left unchanged"
            )
            return
        self._apply(draft, run, lead, tokens, config)

    def _apply(
        self, draft: Draft, run: _Run, lead: int, tokens: _MessageTokens, config: _Config
    ) -> None:
        for (position, part_index), (old, new, action) in sorted(run.outputs.items()):
            message = draft.messages[position]
            part = message.parts[part_index]
            assert isinstance(part, ToolResultPart)
            if action == "externalize":
                artifact = draft.keep("tool_result", old, new[:-1].split(" | ", 2)[2])
                kind: EditKind = "externalize"
                detail = (
                    f"ToolDeterministicCompaction: externalized tool output {part.tool_call_id}"
                )
            else:
                artifact = draft.keep("tool_result", old, f"tool output {part.tool_call_id}")
                kind = "compact-inline"
                detail = f"ToolDeterministicCompaction: compacted tool output {part.tool_call_id}"
            draft.replace_message(
                position,
                _with_text(message, part_index, new),
                kind,
                detail,
                part_index=part_index,
                artifact_id=artifact.id,
            )
        final = run.items
        surviving = {p for _, p in final if p is not None}
        digested = [p for p in sorted(set(run.digested)) if p not in surviving]
        trimmed = [p for p in sorted(set(run.trimmed)) if p not in surviving and p not in digested]
        # Positions never move before the drops below: step 1 only replaced messages in place.
        if digested:
            draft.drop(digested, "summarize-range", "HistoryCompression: digested")
        if trimmed:
            remaining = [p - sum(1 for d in digested if d < p) for p in trimmed]
            draft.drop(remaining, "drop", "FinalTokenTrim: dropped")
        # Now draft.messages[lead:] are the surviving originals in order; insert new ones.
        for k, (message, origin) in enumerate(final):
            if origin is None:
                draft.insert(lead + k, message, "[HISTORY_SUMMARY] digest")
        self._warn(draft, run, tokens, config)

    def _warn(self, draft: Draft, run: _Run, tokens: _MessageTokens, config: _Config) -> None:
        if "grew" in run.notes:
            draft.warn(
                "llm4s-pipeline: text compression made a tool output longer (LLM4S's quirk with"
                " fewer than 70 words); set no_growth to skip it"
                if not config.no_growth
                else "llm4s-pipeline: skipped an inline compression that would grow an output"
            )
        if "split-orphans" in run.notes:
            draft.warn(
                "llm4s-pipeline: the semantic-block split digested a tool call but kept its result"
                " (orphaned tool result); set keep_tool_pairs to avoid it"
            )
        if "trim-orphans" in run.notes:
            draft.warn(
                "llm4s-pipeline: FinalTokenTrim kept a tool result without its call (orphaned"
                " tool result); set keep_tool_pairs to avoid it"
            )
        if "digest-moved" in run.notes:
            draft.warn(
                "llm4s-pipeline: the squeezed digest moved to the end of the conversation"
                " (LLM4S's order quirk); set digest_in_place to keep it first"
            )
        final = _items_tokens(run.items, tokens)
        if final > config.budget:
            draft.warn(
                f"llm4s-pipeline: {final} tokens remain above the budget of {config.budget}"
                " (LLM4S does not reserve its +10 conversation overhead when trimming)"
            )
