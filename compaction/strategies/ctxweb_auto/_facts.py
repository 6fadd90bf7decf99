"""The facts ``ctxweb-auto`` keeps visible when it takes text out of a context, and the lines
that carry them.

A fact is a file path, an exception name, a URL or an identifier (a snake_case, camelCase or
PascalCase name, a dotted call, or a code of capitals and digits such as a ticket, flight or
reservation id). Unlike the summarizer's sample (:func:`compaction.summarizers.extract_facts`,
capped per kind), every fact is found, so a placeholder, digest or summary can carry every fact
of what it replaced that the rest of the context no longer shows, each once.

A carried fact is written as readable text the model can use: one ``facts:`` line of kinds
(``files``, ``errors``, ``urls``, ``names``), or, for several tool calls at once, one line per
file the calls worked on with the facts found around it. When room is short, a long URL can be
written short (:func:`short_url`): its host and path, or its host and its path's last segment.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Sequence

from compaction.messages.model import Message, Part, TextPart, ToolCallPart, ToolResultPart

__all__ = [
    "KINDS",
    "Fact",
    "fact_line",
    "forget",
    "grouped_lines",
    "message_facts",
    "part_facts",
    "short_url",
    "text_facts",
]

#: A fact: (kind, text). The kinds, in the order a line lists them.
Fact = tuple[str, str]
KINDS = ("files", "errors", "urls", "names")

_URL = re.compile(r"\bhttps?://[^\s\"'<>()\[\]{}`|\\,]+")
_EXTENSIONS = (
    "py|pyi|ipynb|js|jsx|ts|tsx|mjs|cjs|go|rs|java|kt|scala|c|h|cc|cpp|hpp|rb|php|cs|swift|sh|"
    "bash|zsh|md|rst|txt|json|jsonl|yaml|yml|toml|ini|cfg|conf|lock|html|css|scss|sql|xml|csv|"
    "proto|dockerfile|env|log|pony|lua|r|pl|ex|exs|vue|svelte"
)
# Every pattern matches within one whitespace-separated token (none matches a space, and each
# looks around only at characters a space ends), so a text's facts are those of its distinct
# tokens: see text_facts. A path starts only where a run of path characters does, and a name
# where a word does: each of these two patterns captures its fact in its one group, or else
# takes the whole run or word (an empty group), so a scan steps over a word at once instead of
# trying every character of it. Quantifiers are possessive (*+, ++) wherever what follows them can
# never match what they would give back: the same matches, without the backtracking.
_PATH = re.compile(
    r"(?<![\w./@+-])(?:("
    r"(?:~|\.{1,2})?/?(?:[\w.@+-]++/)++[\w.@+-]*+"
    r"|[\w-][\w.-]*\.(?:" + _EXTENSIONS + r")(?![\w])"
    r")|[\w./@+-]++)",
    re.IGNORECASE,
)
_EXCEPTION = re.compile(r"\b[A-Z][A-Za-z0-9]*(?:Error|Exception|Warning)\b")
_NAME = re.compile(
    r"\b(?:("
    r"[A-Za-z][A-Za-z0-9]*+(?:_[A-Za-z0-9]++)++_?\b"  # snake_case (and SCREAMING_CASE)
    r"|[a-z][a-z0-9]*+[A-Z][A-Za-z0-9]*+\b"  # camelCase
    r"|[A-Z][a-z0-9]++[A-Z][A-Za-z0-9]*+\b"  # PascalCase with an inner capital
    # a dotted call: os.path.join( -- only from the start of a dotted chain, so a long chain
    # with no call in it is scanned once, not once per segment (quadratic: seconds per 80 KB)
    r"|(?<!\.)[A-Za-z_]\w*+(?:\.[A-Za-z_]\w*+)++(?=\()"
    r"|(?=[0-9]*+[A-Z])(?=[A-Z]*+[0-9])[A-Z0-9]{5,}+\b"  # a code: HAT001, ZFA04Y
    r")|\w++)"
)
_TRAILING = ".,:;!?'\")]}>`"
#: The patterns again, each behind an alternative that matches the newline between two tokens
#: (which none of them can match), so one scan of many tokens joined by newlines tells which
#: token each fact is in (the fact in the second group, a newline in the first).
_PATH_BY_TOKEN = re.compile(r"(\n)|" + _PATH.pattern, _PATH.flags)
_EXCEPTION_BY_TOKEN = re.compile(r"(\n)|(" + _EXCEPTION.pattern + ")")
_NAME_BY_TOKEN = re.compile(r"(\n)|" + _NAME.pattern)
#: A newline, tab or carriage return written as a JSON string escape (``\n`` in a tool call's
#: arguments): a reader sees a line break there, so it ends a fact as whitespace does (else
#: ``"cat a.py\nsrc/b.py"`` would give the path ``nsrc/b.py``). An escaped backslash before
#: it (``C:\\new``) is no escape.
_ESCAPED_SPACE = re.compile(r"(?<!\\)\\[nrt]")


def _may_name_an_error(text: str) -> bool:
    return "Error" in text or "Exception" in text or "Warning" in text


#: A token's facts before a text's own filters (a name that is an error, or part of a path).
_Raw = tuple[Fact, ...]
#: What a token that may hold a fact holds: every match of every pattern above holds a "/",
#: ".", "_" or a capital letter.
_MAY_HOLD_CHAR = re.compile(r"[/._A-Z]")
#: Each distinct whitespace token's facts, shared by every text (most tokens of a context recur
#: across its texts: a file read twice, ``self.assertEqual`` in every test output); kept for
#: tokens up to :data:`_TOKEN_MEMO_CHARS` characters, emptied when it holds
#: :data:`_TOKEN_MEMO_MAX` of them.
_TOKEN_FACTS: dict[str, _Raw] = {}
_TOKEN_MEMO_CHARS = 128
_TOKEN_MEMO_MAX = 65_536


def _tokens_facts(tokens: list[str]) -> list[_Raw]:
    """The facts of each of ``tokens`` (whitespace-free), before the filters of the text holding
    it, in one scan of them all per pattern. A URL is taken out of its token before the other
    patterns look (what it holds is part of it)."""
    found: list[list[Fact]] = [[] for _ in tokens]
    scanned = list(tokens)
    for k, token in enumerate(tokens):
        if "http" in token:
            urls = _URL.findall(token)
            if urls:
                found[k] += [("urls", url) for url in urls]
                scanned[k] = _URL.sub(" ", token)
    joined = "\n".join(scanned)
    scans = [("files", _PATH_BY_TOKEN), ("names", _NAME_BY_TOKEN)]
    if _may_name_an_error(joined):
        scans.append(("errors", _EXCEPTION_BY_TOKEN))
    for kind, pattern in scans:
        k = 0
        for newline, fact in pattern.findall(joined):
            if newline:
                k += 1
            elif fact:
                found[k].append((kind, fact))
    out: list[_Raw] = []
    for facts in found:
        kept = set()
        for kind, fact in facts:
            # trailing punctuation off; what is shorter than three characters is no fact
            fact = fact.rstrip(_TRAILING)
            if len(fact) < 3:
                continue
            if kind == "files" and (fact.startswith("//") or not any(c.isalpha() for c in fact)):
                continue
            kept.add((kind, fact))
        out.append(tuple(kept))
    return out


@functools.lru_cache(maxsize=65_536)
def text_facts(text: str) -> frozenset[Fact]:
    """Every fact in ``text``.

    Example:
        >>> sorted(text_facts("ValueError in src/app.py from load_config, see https://x.org/a"))
        [('errors', 'ValueError'), ('files', 'src/app.py'), ('names', 'load_config'), \
('urls', 'https://x.org/a')]
    """
    if not text:
        return frozenset()
    if "\\" in text:
        text = _ESCAPED_SPACE.sub(" ", text)
    # No pattern crosses a space, so a text's facts are those of its distinct tokens, each
    # scanned once for all texts (the 200K-token coding context of the benchmark: 41,000
    # distinct tokens in its texts, 8,700 in all), then the text's own filters.
    memo = _TOKEN_FACTS
    if len(memo) > _TOKEN_MEMO_MAX:
        memo.clear()
    raw: set[Fact] = set()
    new: list[str] = []
    for token in set(text.split()):
        found = memo.get(token)
        if found is None:
            if _MAY_HOLD_CHAR.search(token):
                new.append(token)
                continue
            found = ()
            if len(token) <= _TOKEN_MEMO_CHARS:
                memo[token] = found
        if found:
            raw.update(found)
    if new:
        for token, found in zip(new, _tokens_facts(new), strict=True):
            if len(token) <= _TOKEN_MEMO_CHARS:
                memo[token] = found
            raw.update(found)
    return _assembled(raw)


def forget() -> None:
    """Empty the memos of the facts found (each text's and each token's): a benchmark's cold
    run starts from nothing."""
    text_facts.cache_clear()
    _TOKEN_FACTS.clear()


def _assembled(raw: Iterable[Fact]) -> frozenset[Fact]:
    """A text's facts from what its tokens hold: a name that is also an error, or part of one
    of the text's paths, is not a name of its own."""
    facts = set(raw)
    names = [fact for fact in facts if fact[0] == "names"]
    if not names:
        return frozenset(facts)
    errors = {text for kind, text in facts if kind == "errors"}
    paths = "\n".join(text for kind, text in facts if kind == "files")
    for fact in names:
        # a path's own parts (file_name in src/file_name.py) are carried by the path
        if fact[1] in errors or (paths and fact[1] in paths):
            facts.discard(fact)
    return frozenset(facts)


def part_facts(part: Part) -> frozenset[Fact]:
    """The facts a model reads in one part (text, a tool call's name and arguments, a tool
    result's text)."""
    if isinstance(part, TextPart):
        return text_facts(part.text)
    if isinstance(part, ToolCallPart):
        return text_facts(f"{part.name} {part.arguments}")
    if isinstance(part, ToolResultPart):
        return text_facts(part.text)
    return frozenset()


def message_facts(message: Message) -> frozenset[Fact]:
    """The facts of every part of ``message``."""
    if len(message.parts) == 1:
        return part_facts(message.parts[0])
    found: set[Fact] = set()
    for part in message.parts:
        found |= part_facts(part)
    return frozenset(found)


#: A URL still longer than this many characters without its query and fragment is written short
#: as its host and its path's last segment: in a package index's or a CDN's URLs (a hash per
#: directory) the last segment is the name that tells one from another.
LONG_URL = 60
#: What stands for the path segments a short URL leaves out.
ELIDED = "…"


def short_url(url: str) -> str | None:
    """``url`` written shorter, for when the room left cannot hold it whole: without its query
    and fragment, and, when still longer than :data:`LONG_URL` characters with three path
    segments or more, as its scheme and host, ``/…/`` and its path's last segment. ``None`` when
    no shorter form keeps its host.

    Example:
        >>> short_url("https://x.org/a/b?session=1f2e3d4c#top")
        'https://x.org/a/b'
        >>> short_url("https://files.pythonhosted.org/packages/3f/6f/e3dd751f/sympy-1.14.0.whl")
        'https://files.pythonhosted.org/…/sympy-1.14.0.whl'
        >>> short_url("https://x.org/a/b") is None
        True
    """
    scheme, separator, rest = url.partition("://")
    if not separator:
        return None
    rest = re.split(r"[?#]", rest, maxsplit=1)[0]
    host, _, path = rest.partition("/")
    if not host:
        return None
    short = f"{scheme}://{rest}".rstrip(_TRAILING)
    segments = [segment for segment in path.split("/") if segment]
    if len(short) > LONG_URL and len(segments) >= 3:
        tail = segments[-1].rstrip(_TRAILING)
        elided = f"{scheme}://{host}/{ELIDED}/{tail}"
        if tail and len(elided) < len(short):
            short = elided
    return short if len(short) < len(url) else None


def _ordered(facts: Iterable[Fact]) -> list[Fact]:
    return sorted(set(facts), key=lambda f: (KINDS.index(f[0]), f[1]))


def _shown(kind: str, text: str) -> str:
    """A fact as a line writes it: a dotted name was found as a call, and is one only with
    its parenthesis (``os.path.join()``), so the line still holds the fact it carries."""
    return f"{text}()" if kind == "names" and "." in text else text


def fact_line(facts: Iterable[Fact], label: str = "facts", *, compact: bool = False) -> str:
    """One line listing ``facts`` by kind, files first; ``compact``, separated by spaces only.

    A fact never holds a space (every pattern above matches within one whitespace-separated
    token), so a compact list reads as unambiguously and costs about a token less per fact:
    the comma is a token of its own, the space joins the next fact's first token.

    Example:
        >>> fact_line([("names", "load_config"), ("files", "src/app.py"), ("names", "np.sin")])
        'facts: files src/app.py; names load_config, np.sin()'
        >>> fact_line([("names", "load_config"), ("names", "np.sin")], compact=True)
        'facts: names load_config np.sin()'
    """
    by_kind: dict[str, list[str]] = {}
    for kind, text in _ordered(facts):
        by_kind.setdefault(kind, []).append(_shown(kind, text))
    if not by_kind:
        return ""
    separator = " " if compact else ", "
    return f"{label}: " + "; ".join(f"{k} {separator.join(v)}" for k, v in by_kind.items())


def _call_file(call: ToolCallPart) -> str | None:
    """The first file a tool call's arguments name (``path``, ``file_path``... or any path)."""
    try:
        data = json.loads(call.arguments)
    except (ValueError, RecursionError):
        data = None
    if isinstance(data, dict):
        for key in ("file_path", "path", "filename", "file", "notebook_path"):
            value = data.get(key)
            if isinstance(value, str) and value.strip():
                return value.strip()
    files = sorted(f for k, f in text_facts(call.arguments) if k == "files")
    return files[0] if files else None


def grouped_lines(
    messages: Sequence[Message], facts: Iterable[Fact], *, compact: bool = False
) -> list[str]:
    """``facts`` (found in ``messages``) as lines grouped by the file each tool call worked on:
    ``- <file>: <facts of the call and its output>``, then one ``facts:`` line for the rest
    (``compact``: see :func:`fact_line`).

    Example:
        >>> from compaction.messages.model import ToolCallPart, ToolResultPart
        >>> call = ToolCallPart("c1", "read", '{"path": "src/app.py"}')
        >>> out = ToolResultPart("c1", (TextPart("def load_config(): raise KeyError"),))
        >>> grouped_lines([Message("assistant", (call,)), Message("tool", (out,))],
        ...               [("files", "src/app.py"), ("names", "load_config")])
        ['- src/app.py: names load_config']
    """
    wanted = set(facts)
    files: dict[str, set[Fact]] = {}
    call_files: dict[str, str] = {}
    for message in messages:
        for part in message.parts:
            if isinstance(part, ToolCallPart):
                path = _call_file(part)
                if path is not None:
                    call_files[part.id] = path
                    files.setdefault(path, set()).update(part_facts(part) & wanted)
            elif isinstance(part, ToolResultPart) and part.tool_call_id in call_files:
                files[call_files[part.tool_call_id]].update(part_facts(part) & wanted)
    lines = []
    # a file that heads a group of its own is written there only, not again in another's list
    heads = {("files", path) for path in files} & wanted
    placed: set[Fact] = set()
    for path, found in files.items():
        found = found - placed - heads
        # the file itself is listed as the group's head
        head = ("files", path) in wanted and ("files", path) not in placed
        if not found and not head:
            continue
        placed |= found
        if head:
            placed.add(("files", path))
        line = fact_line(found, label="", compact=compact)[2:]
        lines.append(f"- {path}: {line}".rstrip(": "))
    rest = wanted - placed
    if rest:
        lines.append(fact_line(rest, compact=compact))
    return lines
