"""LLM4S's ``HistoryCompressor`` (``docs/seed-strategies.md`` §3.5): regex digests of old blocks.

All but the last :data:`DEFAULT_MAX_BLOCKS` semantic blocks become system messages
``[HISTORY_SUMMARY]\\n<digest>`` (:func:`block_digest`), consolidated into one once they pass
:data:`DEFAULT_SUMMARY_TARGET` tokens (:func:`compress_to_digest`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from compaction.messages.model import Message, TextPart, ToolResultPart
from compaction.strategies.llm4s._jvm_strings import _jtrim
from compaction.strategies.llm4s._semantic_blocks import semantic_blocks
from compaction.strategies.llm4s._token_counter import Count, _Item, _MessageTokens
from compaction.turns import find_legal_start

HISTORY_SUMMARY = "[HISTORY_SUMMARY]"
DEFAULT_MAX_BLOCKS = 5
DEFAULT_SUMMARY_TARGET = 400

_FLAGS = re.IGNORECASE | re.ASCII
_IDS = re.compile(r"\b(?:id|identifier|uuid|key|ref(?:erence)?)[:\s=]+([a-zA-Z0-9\-_]+)", _FLAGS)
_URLS = re.compile(r"(?:https?://|www\.)[^\s<>\"'{|}\\^`\[\]]+", _FLAGS)
_STATUS = re.compile(r"(?:status|code|error)[:\s]+(\d{3,4})", _FLAGS)


class _Sentence:
    """What LLM4S's ``(?:<keywords>)[^.!?]*[.!?]`` finds with ``finditer``, in linear time.

    Run by ``re``, that pattern scans to the end of the text from every keyword that no full stop
    follows: quadratic on text of repeated keywords with no ``.``, ``!`` or ``?`` (a 128 KB
    message took 34 s). A match starts at a keyword and ends at the first terminator after it
    (a keyword holds none), and when no terminator follows one keyword none follows a later one,
    so finding the keyword and then the terminator gives the same matches in one pass.
    """

    def __init__(self, keywords: str) -> None:
        self.keyword = re.compile(f"(?:{keywords})", _FLAGS)

    def finditer(self, text: str) -> Iterator[str]:
        position = 0
        while (keyword := self.keyword.search(text, position)) is not None:
            end = _first_terminator(text, keyword.end())
            if end < 0:
                return
            yield text[keyword.start() : end + 1]
            position = end + 1


_TERMINATOR = re.compile(r"[.!?]")


def _first_terminator(text: str, start: int) -> int:
    found = _TERMINATOR.search(text, start)
    return -1 if found is None else found.start()


_CONSTRAINTS = _Sentence("must|should|cannot|required?|forbidden|allowed")
_ERRORS = _Sentence("error|exception|failed?|denied")
_DECISIONS = _Sentence("decided|chosen|selected|determined")
_TOOLS = _Sentence("(?:tool|function|api|call)(?:ed|ing)?")
_OUTCOMES = _Sentence("result|outcome|conclusion|success|completed?")


def _matches(pattern: re.Pattern[str] | _Sentence, text: str, cap: int) -> list[str]:
    if isinstance(pattern, _Sentence):
        found = list(pattern.finditer(text))
    else:
        found = [m.group(0) for m in pattern.finditer(text)]
    return list(dict.fromkeys(found))[:5][:cap]


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
