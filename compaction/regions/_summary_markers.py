"""The markers that identify a summary: each seed's summary prefix, and the records that are
summaries by their metadata (:data:`SUMMARY_MARKERS`, :func:`is_summary`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from compaction.messages.model import Message, TextPart

#: BaseAgent's ``SUMMARY_PREFIX`` (seed-strategies §1.4), concatenated directly with the summary.
BASEAGENT_SUMMARY_PREFIX = (
    "Another language model started to solve this problem and produced a summary of its thinking "
    "process. You also have access to the state of the tools that were used. Use this to build on "
    "the work that has already been done and avoid duplicating work.\n\n"
    "Here is the summary from the previous context:\n\n"
)

#: Codex's ``SUMMARY_PREFIX`` (seed-strategies §1b): note the double space before "assist".
CODEX_SUMMARY_PREFIX = (
    "Another language model started to solve this problem and produced a summary of its thinking "
    "process. You also have access to the state of the tools that were used by that language "
    "model. Use this to build on the work that has already been done and avoid duplicating work. "
    "Here is the summary produced by the other language model, use the information in this "
    "summary to  assist with your own analysis:"
)

#: picoclaw's summary block inside the system prompt (seed-strategies §2.1).
PICOCLAW_SUMMARY_PREFIX = (
    "CONTEXT_SUMMARY: The following is an approximate summary of prior conversation for reference "
    "only. It may be incomplete or outdated — always defer to explicit instructions.\n\n"
)

#: How Claude Code's compact summary message (``isCompactSummary``) begins.
CLAUDE_CODE_SUMMARY_PREFIX = "This session is being continued from a previous conversation"

#: ctxweb's own summary marker: the first line of every summary ctxweb writes.
CTXWEB_SUMMARY_MARKER = "[CTXWEB_SUMMARY]"


@dataclass(frozen=True)
class SummaryMarker:
    """One known way a message says it is a summary.

    ``prefix``: the message (or a text block) starts with this text, after leading whitespace.
    ``extra_key``: the message's ``extra`` maps this key to ``extra_value`` (records that are
    summaries by their metadata: Claude Code's ``isCompactSummary``, Codex's ``compacted``).
    """

    source: str
    prefix: str | None = None
    extra_key: str | None = None
    extra_value: object = True


#: Every known summary marker. Prefixes are byte for byte the seeds' own.
SUMMARY_MARKERS: tuple[SummaryMarker, ...] = (
    SummaryMarker("llm4s", prefix="[HISTORY_SUMMARY]"),
    SummaryMarker("baseagent", prefix=BASEAGENT_SUMMARY_PREFIX),
    SummaryMarker("codex", prefix=CODEX_SUMMARY_PREFIX),
    SummaryMarker("copaw", prefix="<previous-summary>"),
    SummaryMarker("picoclaw", prefix="CONTEXT_SUMMARY:"),
    SummaryMarker("claude-code", prefix=CLAUDE_CODE_SUMMARY_PREFIX),
    SummaryMarker("claude-code", extra_key="isCompactSummary"),
    # A Codex rollout's ``{"type": "compacted", ...}`` record, as the adapters keep it in extra.
    SummaryMarker("codex", extra_key="type", extra_value="compacted"),
    SummaryMarker("codex", extra_key="compacted"),
    # OpenCode marks its summary assistant message ``summary: true``.
    SummaryMarker("opencode", extra_key="summary"),
    SummaryMarker("ctxweb", prefix=CTXWEB_SUMMARY_MARKER),
)

_PREFIXES = tuple(m.prefix for m in SUMMARY_MARKERS if m.prefix is not None)
_EXTRA_MARKERS = tuple(
    (m.extra_key, m.extra_value) for m in SUMMARY_MARKERS if m.extra_key is not None
)
# picoclaw joins its system prompt blocks with "\n\n---\n\n" when a format takes one string, so
# its summary block can sit in the middle of a system text: it starts at a line start.
_EMBEDDED_SUMMARY = re.compile(r"(?m)^CONTEXT_SUMMARY: ")


#: Leading whitespace (``\\s`` is ``str.isspace``, what ``str.lstrip`` strips).
_SPACE = re.compile(r"\s*")
#: The longest summary prefix: what decides whether a text starts with one.
_LONGEST = max(map(len, _PREFIXES))


def is_summary_text(text: str) -> bool:
    """Whether ``text`` starts (after leading whitespace) with a known summary prefix.

    Example:
        >>> is_summary_text("[HISTORY_SUMMARY]\\nBlock1: ...")
        True
    """
    # not text.lstrip(): a copy of a tool output of megabytes, for its first characters
    match = _SPACE.match(text)
    return text.startswith(_PREFIXES, match.end() if match else 0)


def _text_start(message: Message) -> str:
    """The start of ``message.text`` from its first character that is not whitespace, at least
    :data:`_LONGEST` characters of it where it has them (the text is not joined whole)."""
    pieces: list[str] = []
    size = 0
    for part in message.parts:
        if not isinstance(part, TextPart):
            continue
        text = part.text
        if not pieces:
            match = _SPACE.match(text)
            start = match.end() if match else 0
            if start == len(text):  # whitespace only: stripped, with the newline after it
                continue
            text = text[start : start + _LONGEST]
        else:
            text = text[: _LONGEST - size]
        pieces.append(text)
        size += len(text) + 1  # and the newline that joins the next part
        if size > _LONGEST:
            break
    return "\n".join(pieces)


def is_summary(message: Message) -> bool:
    """Whether ``message`` is a summary: a summary prefix on its text, or a summary record.

    Example:
        >>> from compaction.messages.model import Message, TextPart
        >>> is_summary(Message("user", (TextPart("<previous-summary>\\nGoal...\\n"),)))
        True
        >>> is_summary(Message("user", (TextPart("hi"),), extra={"isCompactSummary": True}))
        True
    """
    for key, value in _EXTRA_MARKERS:
        if key in message.extra and message.extra[key] == value:
            return True
    return _text_start(message).startswith(_PREFIXES)


def _summary_start(text: str) -> int | None:
    """Where a summary starts inside a system text, or None."""
    if is_summary_text(text):
        return 0
    found = _EMBEDDED_SUMMARY.search(text)
    return found.start() if found else None
