"""The texts ``ctxweb-auto`` writes: pointers, short descriptions, shrunk tool-call arguments,
per-turn digests, the summary's header and trailer, and summaries cut to a token budget.

Pure string work, kept apart from the steps that decide where the texts go.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from compaction.messages.model import Message
from compaction.regions import CTXWEB_SUMMARY_MARKER
from compaction.summarizers import Facts, extract_facts, messages_text

__all__ = [
    "CUT_NOTE",
    "DIGEST_HEADER",
    "DIGEST_QUOTE",
    "FULL_TEXT",
    "POINTER",
    "SHORT_ID",
    "SUMMARY_HEADER",
    "SUMMARY_PROMPT",
    "clip",
    "describe",
    "digest_text",
    "fit_summary",
    "pointer",
    "shrink_arguments",
    "turn_quotes",
]

#: The first line of a ctxweb summary (the marker alone on its line).
SUMMARY_HEADER = CTXWEB_SUMMARY_MARKER + "\n"
#: The prompt an LLM summarizer gets (the deterministic one fills the same sections).
SUMMARY_PROMPT = (
    "Summarize the removed conversation into the sections Goal, Constraints & Preferences,"
    " Progress (Done, In Progress, Blocked), Key Decisions, Next Steps and Critical Context."
    " Keep every file path, command, error line, test name, URL, identifier and number."
)
#: How a summary's trailer introduces the pointers to the full text of what it summarized.
FULL_TEXT = "Full text of the summarized messages:"

#: Hex characters of an artifact's sha256 a ctxweb-auto pointer writes: a short id that resolves
#: in its project as a git short hash does (a pointer written before held all 64).
SHORT_ID = 16
#: A ctxweb pointer: ``[EXTERNALIZED:<sha256 or a prefix of it>]``.
POINTER = re.compile(r"\[EXTERNALIZED:[0-9a-f]{12,64}\]")

#: How a turn digest begins. It starts with the summary marker, so the regions count a digest as
#: summary, but not with the full summary's own first line (the marker alone on its line), so
#: the summarize step still tells the two apart.
DIGEST_HEADER = CTXWEB_SUMMARY_MARKER + " digest of a user turn"

#: Characters of the user's request and of the final reply a digest quotes.
DIGEST_QUOTE = 240


def pointer(artifact_id: str) -> str:
    """The pointer ctxweb leaves for externalized content: the artifact's id cut to
    :data:`SHORT_ID` characters (about 15 tokens fewer than the whole sha256), which ctxweb
    resolves in the artifact's project like a git short hash.

    Example:
        >>> pointer("2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881")
        '[EXTERNALIZED:2d711642b726b044]'
    """
    return f"[EXTERNALIZED:{artifact_id[:SHORT_ID]}]"


def describe(text: str) -> str:
    """A one-line description of ``text``: its size and how it starts.

    Example:
        >>> describe("Traceback (most recent call last):\\n  File x")
        '43 bytes, 2 lines; starts: Traceback (most recent call last):'
    """
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    lines = text.count("\n") + 1
    return f"{len(text.encode('utf-8'))} bytes, {lines} lines; starts: {first[:100]}"


def clip(text: str, limit: int, *, tail: bool = False) -> str:
    """``text`` on one line, cut to ``limit`` characters (keeping its end when ``tail``)."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    return "…" + text[-(limit - 1) :] if tail else text[: limit - 1] + "…"


#: An object's first key and the space after its colon, if any.
_FIRST_KEY = re.compile(r'\s*\{\s*"(?:[^"\\]|\\.)*"\s*:(\s*)')


def shrink_arguments(arguments: str, shrink: Callable[[str], str | None]) -> str | None:
    """``arguments`` (a tool call's JSON) with each string value ``shrink`` replaces, still valid
    JSON with every key kept; ``None`` when nothing changed or the arguments are not JSON.

    ``shrink(value)`` returns the replacement for a string value, or ``None`` to keep it.

    Example:
        >>> shrink_arguments('{"path": "a.py", "content": "xxxxxx"}',
        ...                  lambda v: "[gone]" if len(v) > 4 else None)
        '{"path": "a.py", "content": "[gone]"}'
    """
    try:
        data = json.loads(arguments)
    except (ValueError, RecursionError):
        return None
    changed = False

    def walk(value: Any) -> Any:
        nonlocal changed
        if isinstance(value, str):
            new = shrink(value)
            if new is not None and new != value:
                changed = True
                return new
            return value
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v) for v in value]
        return value

    shrunk = walk(data)
    if not changed:
        return None
    # the original's separators (compact ``{"a":1}`` or spaced ``{"a": 1}``), so the keys and
    # values left alone read byte for byte as they did
    first = _FIRST_KEY.match(arguments)
    compact = first is None or not first.group(1)
    separators = (",", ":") if compact else (", ", ": ")
    return json.dumps(shrunk, ensure_ascii=False, separators=separators)


def turn_quotes(turn: Sequence[Message]) -> tuple[str, str]:
    """What a digest of ``turn`` quotes: its first user request and its last assistant reply."""
    request = next((m.text for m in turn if m.role == "user" and m.text.strip()), "")
    reply = next((m.text for m in reversed(turn) if m.role == "assistant" and m.text.strip()), "")
    return request, reply


def digest_text(turn: Sequence[Message], full_text_id: str) -> str:
    """One user turn as a short digest: the request, the tools called, its last error lines, the
    last reply, and a pointer to the turn's full text. The turn's facts (paths, names, URLs) are
    not listed here: the plan adds those the rest of the context no longer shows.

    Example:
        >>> from compaction.messages.model import Message, TextPart
        >>> text = digest_text([Message("user", (TextPart("Fix src/app.py"),))], "0" * 64)
        >>> text.splitlines()[1]
        'user: Fix src/app.py'
    """
    request, reply = turn_quotes(turn)
    calls = Counter(c.name for m in turn for c in m.tool_calls)
    facts = extract_facts(messages_text(turn))
    lines = [DIGEST_HEADER, f"user: {clip(request, DIGEST_QUOTE)}"]
    if calls:
        lines.append("tools: " + ", ".join(f"{name} ×{n}" for name, n in calls.items()))
    if facts.errors:
        lines.append("errors: " + " | ".join(clip(e, 160) for e in facts.errors[-3:]))
    if reply:
        # a reply's conclusion is at its end
        lines.append(f"reply: {clip(reply, DIGEST_QUOTE, tail=True)}")
    lines.append(f"full turn: {pointer(full_text_id)}")
    return "\n".join(lines)


#: An exception or error class name in an error line.
_EXCEPTION = re.compile(r"\b[A-Z][A-Za-z0-9]*(?:Error|Exception|Warning|Exit|Interrupt)\b")


def fact_lines(facts: Facts) -> list[str]:
    """Every path, test, URL, identifier and exception name of ``facts``, each once: not a
    sample, so the model still sees what a digest replaced. Grouped by kind, files first.

    Example:
        >>> fact_lines(extract_facts("ValueError in src/app.py via load_config"))
        ['files: src/app.py', 'exceptions: ValueError', 'names: load_config']
    """
    files = list(dict.fromkeys([*facts.paths, *facts.tests]))
    exceptions = list(dict.fromkeys(x for e in facts.errors for x in _EXCEPTION.findall(e)))
    names = [i for i in facts.identifiers if i not in exceptions and " " not in i]
    lines = []
    for label, items in (
        ("files", files),
        ("exceptions", exceptions),
        ("names", names),
        ("urls", list(facts.urls)),
    ):
        if items:
            lines.append(f"{label}: " + ", ".join(clip(x, 160) for x in items))
    return lines


#: How a cut summary says so.
CUT_NOTE = "(shortened to fit the target; the full text below holds everything)"


def _priority(lines: Sequence[str]) -> list[int]:
    """Each line's rank for :func:`fit_summary` (0 kept first): headings, then the goal, next
    steps, blockers and facts, then everything else."""
    ranks = []
    section = ""
    for line in lines:
        if line.startswith("#"):
            section = line.lstrip("#").strip().lower()
            ranks.append(0)
        elif section in ("goal", "next steps", "critical context", "blocked"):
            ranks.append(1)
        elif section == "in progress":
            ranks.append(2)
        else:
            ranks.append(3)
    return ranks


def fit_summary(summary: str, budget: int, count: Callable[[str], int]) -> str:
    """``summary`` cut to about ``budget`` tokens (by ``count``), whole lines at a time.

    Headings stay, then the goal, next steps, blockers and Critical Context facts, then the
    rest, each in the summary's own order; a note says the summary was cut. A summary within
    the budget comes back unchanged.

    Example:
        >>> fit_summary("## Goal\\nship it", 100, len)
        '## Goal\\nship it'
    """
    if count(summary) <= budget:
        return summary
    lines = summary.splitlines()
    ranks = _priority(lines)
    order = sorted(range(len(lines)), key=lambda i: (ranks[i], i))
    spent = count(CUT_NOTE) + 1
    kept: set[int] = set()
    for i in order:
        cost = count(lines[i]) + 1
        if spent + cost > budget:
            continue
        spent += cost
        kept.add(i)
    body = [line for i, line in enumerate(lines) if i in kept]
    return "\n".join([*body, CUT_NOTE])
