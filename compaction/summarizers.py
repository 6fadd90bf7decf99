"""Summarizers: what turns removed messages into a summary, and the facts a summary must keep.

:class:`Summarizer` is the protocol strategies call. :class:`FactSummarizer` is the default: offline
and deterministic, it fills CoPaw/ReMe's structured sections (``## Goal``, ``## Constraints &
Preferences``, ``## Progress`` with ``### Done`` / ``### In Progress`` / ``### Blocked``, ``## Key
Decisions``, ``## Next Steps``, ``## Critical Context``) from facts extracted from the removed
content, and merges them into a previous summary when there is one. LLM summarizers (configured
by the application) implement the same protocol and use the seed's own ``prompt``.

:func:`extract_facts` is public: it also measures how many facts a compaction kept.

Example:
    >>> facts = extract_facts("pytest tests/test_api.py failed: ValueError: bad id 4242")
    >>> "tests/test_api.py" in facts.paths
    True
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, fields
from typing import Protocol, runtime_checkable

from compaction.errors import SummarizerError
from compaction.messages.model import Message, TextPart, ToolCallPart, ToolResultPart

__all__ = [
    "SECTIONS",
    "FactSummarizer",
    "Facts",
    "Summarizer",
    "SummarizerError",
    "extract_facts",
    "messages_text",
]

SECTIONS: tuple[str, ...] = (
    "## Goal",
    "## Constraints & Preferences",
    "## Progress",
    "### Done",
    "### In Progress",
    "### Blocked",
    "## Key Decisions",
    "## Next Steps",
    "## Critical Context",
)


@runtime_checkable
class Summarizer(Protocol):
    """Anything that summarizes messages, optionally on top of a previous summary."""

    def summarize(self, messages: Sequence[Message], *, previous: str | None, prompt: str) -> str:
        """Summarize ``messages``; merge ``previous`` in when given. ``prompt`` is the seed's
        own instruction (an LLM summarizer sends it; a deterministic one may ignore it)."""
        ...


# --- facts ------------------------------------------------------------------------------------

_TOKEN = re.compile(r"[^\s\"'<>`()\[\]{},;|]+")
_TICK_SPAN = re.compile(r"`([^`\n]{2,80})`")
_PATH_TOKEN = re.compile(r"(?:~|\.{1,2})?/?[\w.@+-]+(?:/[\w.@+-]*)+")
_FILE_TOKEN = re.compile(
    r"[\w-]+(?:\.[\w-]+)*\.(?:py|pyi|js|jsx|ts|tsx|go|rs|rb|java|scala|kt|c|h|cc|cpp|hpp|cs|php"
    r"|sh|md|rst|txt|json|yaml|yml|toml|ini|cfg|lock|html|css|sql|csv|xml|env|log)"
)
_TEST_NODE = re.compile(r"[\w./-]+\.py::[\w:\[\].-]+")
_TEST_NAME = re.compile(r"test_\w+|[A-Z]\w*(?:Spec|Tests?)")
_IDENT_TOKEN = re.compile(
    r"[A-Z]{2,}[-_]\d+"
    r"|[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+"
    r"|_*[a-z][a-z0-9]*(?:_[a-z0-9]+)+"
    r"|[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+"
    r"|(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}"
)
_NUMBER_TOKEN = re.compile(r"-?\d+(?:[.,:]\d+)*%?")
_JSON_COMMAND = re.compile(r"\"(?:command|cmd)\"\s*:\s*\"((?:[^\"\\]|\\.){1,300})\"")
_COMMAND_WORDS = (
    "git ",
    "pytest",
    "python ",
    "python3 ",
    "pip ",
    "npm ",
    "npx ",
    "yarn ",
    "pnpm ",
    "make",
    "cargo ",
    "go ",
    "uv ",
    "ruff ",
    "mypy ",
    "docker ",
    "kubectl ",
    "ls",
    "cd ",
    "cat ",
    "grep ",
    "rg ",
    "sed ",
    "find ",
    "curl ",
    "node ",
    "bash ",
    "sh ",
    "$ ",
)
_ERROR_WORDS = (
    "Error",
    "Exception",
    "Traceback",
    "FAILED",
    "fatal:",
    "error:",
    "ERROR",
    "panic:",
)
_MAX_SCAN = 32_000

_CAPS = {
    "paths": 40,
    "commands": 20,
    "errors": 15,
    "tests": 20,
    "urls": 15,
    "identifiers": 40,
    "numbers": 25,
}


@dataclass(frozen=True)
class Facts:
    """Facts found in text, each kind in first-seen order without duplicates.

    ``merge`` keeps both sides; past a kind's cap the oldest facts go first.
    """

    paths: tuple[str, ...] = ()
    commands: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()
    tests: tuple[str, ...] = ()
    urls: tuple[str, ...] = ()
    identifiers: tuple[str, ...] = ()
    numbers: tuple[str, ...] = ()

    def merge(self, other: Facts) -> Facts:
        """Both sides' facts; ``other``'s are newer."""
        merged = {
            f.name: _capped(
                _unique([*getattr(self, f.name), *getattr(other, f.name)]), _CAPS[f.name]
            )
            for f in fields(self)
        }
        return Facts(**merged)

    def all(self) -> tuple[str, ...]:
        """Every fact, all kinds together."""
        return tuple(item for f in fields(self) for item in getattr(self, f.name))

    def __len__(self) -> int:
        return len(self.all())


def _unique(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(i for i in items if i))


def _capped(items: tuple[str, ...], cap: int) -> tuple[str, ...]:
    return items[-cap:] if len(items) > cap else items


def extract_facts(text: str) -> Facts:
    """The facts in ``text``: file paths, commands, error lines, test names, URLs, identifiers
    and numbers.

    Text longer than 32,000 characters is read as its first 24,000 and last 8,000 (the rest of
    such an output stays whole in its artifact). Results are cached by text.

    Example:
        >>> extract_facts("see https://x.org/a and src/app.py line 120").urls
        ('https://x.org/a',)
    """
    if len(text) > _MAX_SCAN:
        text = text[:24_000] + "\n" + text[-8_000:]
    return _extract(text)


@functools.lru_cache(maxsize=8192)
def _extract(text: str) -> Facts:
    urls: list[str] = []
    paths: list[str] = []
    tests: list[str] = []
    identifiers: list[str] = []
    numbers: list[str] = []
    for raw in dict.fromkeys(_TOKEN.findall(text)):
        token = raw.rstrip(".:!?")
        if len(token) < 2:
            continue
        if token.startswith(("http://", "https://", "www.")):
            urls.append(token)
        elif _TEST_NODE.fullmatch(token):
            tests.append(token)
            paths.append(token.split("::", 1)[0])
        elif ("/" in token and _PATH_TOKEN.fullmatch(token) and not token.startswith("//")) or (
            "." in token and _FILE_TOKEN.fullmatch(token)
        ):
            paths.append(token)
        elif _TEST_NAME.fullmatch(token):
            tests.append(token)
        elif _IDENT_TOKEN.fullmatch(token):
            identifiers.append(token)
        elif _NUMBER_TOKEN.fullmatch(token) and len(token.strip("-%")) >= 2:
            numbers.append(token)
    identifiers.extend(
        span.strip() for span in _TICK_SPAN.findall(text) if span.strip() not in paths
    )
    commands = [_clip(m.group(1).replace('\\"', '"'), 200) for m in _JSON_COMMAND.finditer(text)]
    errors: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith(_COMMAND_WORDS) and "{" not in stripped:
            commands.append(_clip(stripped.removeprefix("$ "), 200))
        if any(word in stripped for word in _ERROR_WORDS):
            errors.append(_clip(stripped, 200))
    found = Facts(
        paths=_unique(paths),
        commands=_unique(commands),
        errors=_unique(errors),
        tests=_unique(tests),
        urls=_unique(urls),
        identifiers=_unique(i for i in identifiers if i not in tests),
        numbers=_unique(numbers),
    )
    return Facts().merge(found)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def messages_text(messages: Sequence[Message]) -> str:
    """The text facts are taken from: message text, tool calls (name and arguments) and tool
    results; reasoning left out, as ReMe leaves thinking out of summaries by default."""
    lines: list[str] = []
    for message in messages:
        for part in message.parts:
            if isinstance(part, TextPart):
                lines.append(part.text)
            elif isinstance(part, ToolCallPart):
                lines.append(f"{part.name} {part.arguments}")
            elif isinstance(part, ToolResultPart):
                lines.append(part.text)
    return "\n".join(lines)


# --- the deterministic summarizer -------------------------------------------------------------

_SENTENCE_CHAR = r"(?:[^.!?\n]|[.!?](?![\s]|$))"
#: A sentence's end: ``.``, ``!`` or ``?`` before whitespace or the end of the line.
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)")


class _Sentences:
    """The sentences around a keyword: what ``<sentence chars>* \\b(?:keywords)\\b
    <sentence chars>* [.!?]?`` (case-insensitive, :attr:`pattern`) matches.

    :meth:`found` gives the texts ``pattern.finditer`` matches over the whole text, in order,
    without running the pattern, whose backtracking is quadratic on a long line with one keyword
    near its start (``"must. " + "a " * 500_000`` took minutes). No match spans a newline (neither
    a sentence character nor a keyword is one, and ``\\b`` and ``(?!\\s|$)`` see a line's edge as
    they see its newline), and a sentence character is anything but a newline or a sentence
    end. So a match runs from where the search stands, or from the start of the sentence that
    holds the next keyword, to that sentence's end, its end mark included: found in one pass
    over each line that holds a keyword.
    """

    def __init__(self, keywords: str) -> None:
        self.keywords = re.compile(rf"\b(?:{keywords})\b", re.IGNORECASE)
        self.pattern = re.compile(
            rf"{_SENTENCE_CHAR}*\b(?:{keywords})\b{_SENTENCE_CHAR}*[.!?]?", re.IGNORECASE
        )

    def found(self, text: str) -> Iterator[str]:
        """Each text the pattern matches in ``text``, in order."""
        if self.keywords.search(text) is None:
            return
        for line in text.split("\n"):
            position = 0
            ends: list[int] | None = None
            while (keyword := self.keywords.search(line, position)) is not None:
                if ends is None:
                    ends = [m.start() for m in _SENTENCE_END.finditer(line)]
                after = bisect.bisect_left(ends, keyword.start())
                start = max(position, ends[after - 1] + 1 if after else 0)
                position = ends[after] + 1 if after < len(ends) else len(line)
                yield line[start:position]


_CONSTRAINT = _Sentences(
    r"must|should|never|always|don't|do not|cannot|can't|prefer|require[sd]?|only"
)
_DECISION = _Sentences(
    r"decided|chose|chosen|selected|will use|going to use|switch(?:ed)? to|opt(?:ed)? for"
)
_FACT_LINE = re.compile(r"^- (\w[\w ]*): (.*)$")
_TICKED = re.compile(r"`([^`]*)`")
_LABELS = {
    "paths": "Files",
    "commands": "Commands",
    "errors": "Errors",
    "tests": "Tests",
    "urls": "URLs",
    "identifiers": "Identifiers",
    "numbers": "Numbers",
}


@dataclass(frozen=True)
class _Parsed:
    goal: str
    constraints: tuple[str, ...]
    done: tuple[str, ...]
    decisions: tuple[str, ...]
    facts: Facts
    in_progress: tuple[str, ...] = ()
    next_steps: tuple[str, ...] = ()


def _parse_previous(previous: str) -> _Parsed:
    sections: dict[str, list[str]] = {}
    current = ""
    for line in previous.splitlines():
        if line.startswith("#"):
            current = line.strip()
            sections.setdefault(current, [])
        elif line.strip():
            sections.setdefault(current, []).append(line.rstrip())
    if "## Goal" not in sections:
        first = next((line for line in previous.splitlines() if line.strip()), "")
        return _Parsed(_clip(first.strip(), 300), (), (), (), extract_facts(previous))
    labels = {v: k for k, v in _LABELS.items()}
    facts: dict[str, tuple[str, ...]] = {}
    for line in sections.get("## Critical Context", []):
        match = _FACT_LINE.match(line)
        if match and match.group(1) in labels:
            facts[labels[match.group(1)]] = tuple(_TICKED.findall(match.group(2)))

    def items(name: str) -> tuple[str, ...]:
        return tuple(
            line[2:].strip()
            for line in sections.get(name, [])
            if line.startswith("- ") and line.strip() != "- (none)"
        )

    goal = " ".join(line.strip() for line in sections["## Goal"] if line.strip() != "(none)")
    done = tuple(i.removeprefix("[x] ").strip() for i in items("### Done"))
    in_progress = tuple(i.removeprefix("[ ] ").strip() for i in items("### In Progress"))
    next_steps = tuple(
        line.strip().split(". ", 1)[1]
        for line in sections.get("## Next Steps", [])
        if re.match(r"\s*\d+\. ", line)
    )
    return _Parsed(
        goal,
        items("## Constraints & Preferences"),
        done,
        items("## Key Decisions"),
        Facts(**facts),
        in_progress,
        next_steps,
    )


def _bullets(items: Sequence[str], prefix: str = "- ") -> list[str]:
    return [f"{prefix}{item}" for item in items] if items else ["(none)"]


def _ticked(items: Sequence[str]) -> str:
    return ", ".join(f"`{i}`" for i in items)


class FactSummarizer:
    """The default summarizer: deterministic, offline, fact-preserving.

    It fills CoPaw's sections from the removed messages: the goal is the first user request, the
    next step the last one; constraints and decisions are the sentences that say so; done items
    are the tool calls made; blocked items the last error lines; and Critical Context lists every
    extracted fact (paths, commands, errors, tests, URLs, identifiers, numbers) in backticks.
    Given a previous summary it keeps its goal, items and facts and adds the new ones.

    Example:
        >>> from compaction.messages.model import Message, TextPart
        >>> text = FactSummarizer().summarize(
        ...     [Message("user", (TextPart("Fix src/app.py"),))], previous=None, prompt="")
        >>> text.splitlines()[0]
        '## Goal'
    """

    def __init__(self, *, max_items: int = 8, max_chars: int = 300) -> None:
        self.max_items = max_items
        self.max_chars = max_chars

    def summarize(self, messages: Sequence[Message], *, previous: str | None, prompt: str) -> str:
        """The structured summary of ``messages`` merged into ``previous``."""
        old = _parse_previous(previous) if previous else _Parsed("", (), (), (), Facts())
        users = [m.text.strip() for m in messages if m.role == "user" and m.text.strip()]
        prose = "\n".join(m.text for m in messages if m.role in ("user", "assistant"))
        facts = old.facts.merge(extract_facts(messages_text(messages)))
        goal = old.goal or (_clip(" ".join(users[0].split()), self.max_chars) if users else "")
        constraints = self._recent(
            [
                *old.constraints,
                *(
                    _clip(" ".join(s.split()), 200)
                    for m in messages
                    if m.role == "user"
                    for s in _CONSTRAINT.found(m.text)
                    if s.strip()
                ),
            ]
        )
        decisions = self._recent(
            [
                *old.decisions,
                *(
                    f"**{_clip(' '.join(s.split()), 200)}**"
                    for s in _DECISION.found(prose)
                    if s.strip()
                ),
            ]
        )
        done = self._recent(
            [
                *old.done,
                *(
                    _clip(f"{c.name} {' '.join(c.arguments.split())}", 160)
                    for m in messages
                    for c in m.tool_calls
                ),
            ]
        )
        blocked = facts.errors[-3:]
        last_request = _clip(" ".join(users[-1].split()), self.max_chars) if users else ""
        # With no new request the previous summary's open work still stands.
        in_progress = [last_request] if last_request else list(old.in_progress)
        next_steps = [last_request] if last_request else list(old.next_steps)
        lines = ["## Goal", goal or "(none)", "", "## Constraints & Preferences"]
        lines += _bullets(constraints)
        lines += ["", "## Progress", "### Done"]
        lines += _bullets(done, "- [x] ")
        lines += ["", "### In Progress"]
        lines += _bullets(in_progress, "- [ ] ")
        lines += ["", "### Blocked"]
        lines += _bullets(blocked)
        lines += ["", "## Key Decisions"]
        lines += _bullets(decisions)
        lines += ["", "## Next Steps"]
        lines += [f"{i}. {step}" for i, step in enumerate(next_steps, 1)] or ["(none)"]
        lines += ["", "## Critical Context"]
        context = [
            f"- {label}: {_ticked(getattr(facts, name))}"
            for name, label in _LABELS.items()
            if getattr(facts, name)
        ]
        lines += context or ["(none)"]
        return "\n".join(lines)

    def _recent(self, items: Sequence[str]) -> tuple[str, ...]:
        unique = _unique(items)
        return unique[-self.max_items :]
