"""The placeholders strategies leave in place of pruned content: cleared, truncated or externalized
(:data:`PLACEHOLDER_PATTERNS`), and which one a text carries (:func:`placeholder_of`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, TypeAlias

from compaction.messages.model import Part, TextPart, ToolResultPart

PlaceholderKind: TypeAlias = Literal["cleared", "truncated", "externalized"]

#: BaseAgent's and OpenCode's cleared tool output.
PRUNE_MARKER = "[Old tool result content cleared]"

#: What ctxweb's ``anthropic-clear-tool-uses`` strategy leaves in a cleared tool result. Anthropic's
#: server-side context editing does not put its placeholder text in the request we see, so
#: ctxweb chooses this one and recognizes it.
ANTHROPIC_CLEARED_MARKER = "[cleared to save context]"


@dataclass(frozen=True)
class Placeholder:
    """What a strategy left in place of content: how it was pruned, and where it went.

    ``artifact_id`` is set when the full content was kept somewhere: a ctxweb artifact id
    (``source == "ctxweb"``), an LLM4S artifact-store key, or the file path CoPaw saved it to.
    """

    kind: PlaceholderKind
    source: str
    artifact_id: str | None = None


@dataclass(frozen=True)
class PlaceholderPattern:
    """One placeholder as a regular expression; group ``artifact`` (if any) is the artifact id."""

    kind: PlaceholderKind
    source: str
    pattern: re.Pattern[str]
    whole: bool = False  # the text must be exactly the placeholder (stripped), not contain it


#: Every known placeholder, most specific first (an externalization wins over the truncation
#: marker that CoPaw writes beside it).
PLACEHOLDER_PATTERNS: tuple[PlaceholderPattern, ...] = (
    PlaceholderPattern(
        "externalized", "ctxweb", re.compile(r"\[EXTERNALIZED:(?P<artifact>[^\s\]|]+)\]")
    ),
    PlaceholderPattern(
        "externalized",
        "llm4s",
        re.compile(r"\[EXTERNALIZED: content_(?P<artifact>[0-9a-f]{64}) \| [A-Z]+ \| [^\]]*\]"),
    ),
    PlaceholderPattern(
        "externalized", "copaw", re.compile(r"\[Full content saved to: (?P<artifact>[^\]]+)\]")
    ),
    PlaceholderPattern(
        "externalized", "copaw", re.compile(r"The full content is saved to the file")
    ),
    PlaceholderPattern("cleared", "baseagent", re.compile(re.escape(PRUNE_MARKER)), whole=True),
    PlaceholderPattern(
        "cleared", "anthropic", re.compile(re.escape(ANTHROPIC_CLEARED_MARKER)), whole=True
    ),
    PlaceholderPattern(
        "truncated", "baseagent", re.compile(r"\n\.\.\.\d+ tokens truncated\.\.\.\n")
    ),
    PlaceholderPattern("truncated", "codex", re.compile(r"…\d+ tokens truncated…")),
    PlaceholderPattern("truncated", "reme", re.compile(r"<<<TRUNCATED>>>")),
    PlaceholderPattern(
        "truncated", "codex", re.compile(r"\[\.\.\. (omitted \d+ of \d+ lines|output truncated)")
    ),
    # LLM4S stores nothing for binary output despite the wording: the content is gone.
    PlaceholderPattern("truncated", "llm4s", re.compile(r"\[BINARY CONTENT - \d+ bytes - ")),
    PlaceholderPattern(
        "truncated",
        "llm4s",
        re.compile(
            r"\.\.\. ?\[(\+-?\d+ (items|words|additional stack frames)"
            r"|collapsed \d+ repeated/verbose log lines)\] ?\.\.\."
        ),
    ),
    PlaceholderPattern("truncated", "opencode", re.compile(r"\n\[truncated\]\Z")),
)


#: The pointers that name an artifact stored by ctxweb: its own ``[EXTERNALIZED:<id>]`` and
#: LLM4S's ``[EXTERNALIZED: content_<sha256> | TYPE | summary]`` (CoPaw's name files on the
#: agent's machine instead).
_STORED_POINTERS = tuple(
    p for p in PLACEHOLDER_PATTERNS if p.kind == "externalized" and p.source in ("ctxweb", "llm4s")
)


def find_artifact_pointers(text: str) -> list[tuple[int, int, str]]:
    """Every pointer to a stored artifact in ``text``: ``(start, end, artifact id)``, in order,
    none overlapping. The one definition of a pointer, for strategies, the API and the pages.

    Example:
        >>> find_artifact_pointers("see [EXTERNALIZED:ab12] and [EXTERNALIZED:cd]")
        [(4, 23, 'ab12'), (28, 45, 'cd')]
    """
    found = sorted(
        (m.start(), m.end(), m.group("artifact"))
        for p in _STORED_POINTERS
        for m in p.pattern.finditer(text)
    )
    kept: list[tuple[int, int, str]] = []
    for span in found:
        if not kept or span[0] >= kept[-1][1]:
            kept.append(span)
    return kept


def placeholder_of(text: str) -> Placeholder | None:
    """The placeholder ``text`` carries, if a strategy pruned it.

    Example:
        >>> placeholder_of("[EXTERNALIZED:art_12]")
        Placeholder(kind='externalized', source='ctxweb', artifact_id='art_12')
        >>> placeholder_of("head\\n\\n...120 tokens truncated...\\n\\ntail").kind
        'truncated'
        >>> placeholder_of("plain output") is None
        True
    """
    for p in PLACEHOLDER_PATTERNS:
        if p.whole:
            if p.pattern.fullmatch(text.strip()) is None:
                continue
            return Placeholder(p.kind, p.source)
        found = p.pattern.search(text)
        if found is None:
            continue
        artifact = found.groupdict().get("artifact")
        return Placeholder(p.kind, p.source, artifact.strip() if artifact else None)
    return None


def part_placeholder(part: Part) -> Placeholder | None:
    """The placeholder in a text part or a tool result's text, else None."""
    if isinstance(part, TextPart):
        return placeholder_of(part.text)
    if isinstance(part, ToolResultPart):
        return placeholder_of(part.text)
    return None
