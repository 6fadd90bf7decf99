"""The facts a benchmark looks for, and whether a plan keeps them visible in the context.

Written here, apart from the library's ``compaction.summarizers.extract_facts`` that ctxweb-auto
uses for its digests and summaries, so a strategy is not graded by its own definition of a fact.
A fact is one of:

- a **URL** (``http://`` or ``https://`` up to a space, quote or bracket);
- a **file path**: a token with a ``/`` and a file extension, or an absolute or ``./`` path, or a
  bare file name with a common source or data extension (``setup.py``);
- an **exception name**: a CamelCase word ending in ``Error``, ``Exception`` or ``Warning``;
- an **identifier**: a snake_case name (a letter, an underscore, at least 5 characters), a
  camelCase or PascalCase name with an inner capital, a dotted call (``os.path.join``), or a code
  of capitals and digits (``ZFA04Y``, a reservation or ticket id).

A newline, tab or carriage return written as a JSON escape (``\\n`` inside a tool call's
arguments) separates facts as whitespace does: the model reads a line break there, so
``cat a.py\\nsrc/b.py`` holds ``src/b.py``, not ``nsrc/b.py``.

A fact of the input is **kept** when the same regexes find it in the plan's context (every text
the model would read: system prompt, messages, tool-call arguments and tool results). What sits
only in an artifact does not count: the model cannot read it without a tool.

A URL not kept whole may still be **written short** (:func:`urls_written_short`): the context
shows a URL with its scheme and host and either its path (its query and fragment gone) or its
path's last segment. That is reported beside the count, never in it: the URL itself is lost.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

from compaction.messages.model import Context, TextPart

__all__ = [
    "KINDS",
    "context_facts",
    "context_texts",
    "facts_of",
    "kept_by_kind",
    "urls_written_short",
    "visible_share",
]

#: The kinds of fact, as each fact's prefix names them.
KINDS = ("path", "error", "url", "id")

_URL = re.compile(r"https?://[^\s\"'<>()\[\]{}`|\\]+")
_EXT = (
    r"(?:py|pyi|js|jsx|ts|tsx|mjs|go|rs|java|kt|c|h|cc|cpp|hpp|rb|php|cs|swift|sh|bash|md|rst|"
    r"txt|json|jsonl|yaml|yml|toml|ini|cfg|lock|html|css|scss|sql|xml|csv|proto|dockerfile|env)"
)
_PATH = re.compile(
    r"(?<![\w./-])(?:(?:~|\.{1,2})?/)?(?:[\w.@+-]+/)+[\w.@+-]+"  # a/b/c or /a/b
    r"|(?<![\w./-])[\w-][\w.-]*\." + _EXT + r"(?![\w])"  # name.ext
)
_EXCEPTION = re.compile(r"\b[A-Z][A-Za-z0-9]*(?:Error|Exception|Warning)\b")
_IDENTIFIER = re.compile(
    r"\b[A-Za-z][A-Za-z0-9]*_[A-Za-z0-9_]+\b"  # snake_case
    r"|\b[a-z]+[A-Z][A-Za-z0-9]*\b"  # camelCase
    r"|\b[A-Z][a-z0-9]+[A-Z][A-Za-z0-9]*\b"  # PascalCase with an inner capital
    r"|\b[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+(?=\()"  # dotted call
    r"|\b(?=[A-Z0-9]*[A-Z])(?=[A-Z0-9]*[0-9])[A-Z0-9]{5,}\b"  # a code of capitals and digits
)
_TRAILING = ".,:;!?'\")]}>`"
_ESCAPED_SPACE = re.compile(r"(?<!\\)\\[nrt]")  # a JSON-escaped newline, tab or return


def _clean(found: Iterable[str]) -> set[str]:
    out = set()
    for fact in found:
        fact = fact.rstrip(_TRAILING)
        if len(fact) >= 3:
            out.add(fact)
    return out


@functools.lru_cache(maxsize=16384)
def facts_of(text: str, *, shown: bool = False) -> frozenset[str]:
    """Every fact in ``text``, each prefixed by its kind (``url:``, ``path:``, ``error:``,
    ``id:``) so one string found as two kinds counts twice. With ``shown``, the facts ``text``
    lets a reader see: an identifier also inside one of its paths is kept as well (an input's
    ``TodoItem`` is still visible in ``names TodoItem; files src/TodoItem.tsx``).

    Example:
        >>> sorted(facts_of("ValueError in src/app.py, see https://x.org/a"))
        ['error:ValueError', 'path:src/app.py', 'url:https://x.org/a']
    """
    text = _ESCAPED_SPACE.sub(" ", text)
    urls = _clean(_URL.findall(text))
    without_urls = _URL.sub(" ", text)
    paths = {
        p
        for p in _clean(_PATH.findall(without_urls))
        if not p.startswith("//") and any(c.isalpha() for c in p)
    }
    errors = _clean(_EXCEPTION.findall(text))
    identifiers = _clean(_IDENTIFIER.findall(without_urls)) - errors
    if not shown:
        # a path's own parts (file_name in src/file_name.py) are not separate identifiers
        identifiers = {i for i in identifiers if not any(i in p for p in paths)}
    return frozenset(
        [f"url:{u}" for u in urls]
        + [f"path:{p}" for p in paths]
        + [f"error:{e}" for e in errors]
        + [f"id:{i}" for i in identifiers]
    )


def context_texts(context: Context) -> list[str]:
    """Every text of ``context`` the model reads, one per part."""
    texts = [p.text for p in context.system if isinstance(p, TextPart)]
    for message in context.messages:
        for part in message.parts:
            if part.kind == "text":
                texts.append(part.text)
            elif part.kind == "tool_call":
                texts.append(f"{part.name} {part.arguments}")
            elif part.kind == "tool_result" or part.kind == "reasoning":
                texts.append(part.text)
    return [t for t in texts if t.strip()]


def context_facts(context: Context, *, shown: bool = False) -> set[str]:
    """Every fact of ``context`` (with ``shown``, every fact a reader sees in it)."""
    found: set[str] = set()
    for text in context_texts(context):
        found |= facts_of(text, shown=shown)
    return found


def visible_share(before: Context, after: Context) -> tuple[int, int]:
    """(facts of ``before`` still visible in ``after``, facts of ``before``)."""
    wanted = context_facts(before)
    seen = context_facts(after, shown=True)
    return len(wanted & seen), len(wanted)


def kept_by_kind(before: Context, after: Context) -> dict[str, tuple[int, int]]:
    """Per kind (:data:`KINDS`): (facts of ``before`` still visible in ``after``, facts of
    ``before``)."""
    wanted = context_facts(before)
    seen = context_facts(after, shown=True)
    out = {}
    for kind in KINDS:
        mine = {f for f in wanted if f.startswith(f"{kind}:")}
        out[kind] = (len(mine & seen), len(mine))
    return out


def _url_parts(url: str) -> tuple[str, str, str]:
    """(scheme and host, path without query and fragment, the path's last segment)."""
    scheme, _, rest = url.partition("://")
    rest = re.split(r"[?#]", rest, maxsplit=1)[0]
    host, _, path = rest.partition("/")
    segments = [s for s in path.split("/") if s]
    return f"{scheme}://{host}", path, segments[-1] if segments else ""


def urls_written_short(before: Context, after: Context) -> int:
    """URLs of ``before`` not visible whole in ``after`` but written short there: ``after``
    shows a URL with the same scheme and host and either the same path (query and fragment
    gone) or, when the path has a last segment, one that ends with it."""
    wanted = {f[4:] for f in context_facts(before) if f.startswith("url:")}
    seen = {f[4:] for f in context_facts(after, shown=True) if f.startswith("url:")}
    shown: dict[str, list[tuple[str, str]]] = {}
    for url in seen:
        head, path, _last = _url_parts(url)
        shown.setdefault(head, []).append((path, url))
    count = 0
    for url in wanted - seen:
        head, path, last = _url_parts(url)
        for other_path, other in shown.get(head, ()):
            if other_path == path or (last and other.endswith("/" + last)):
                count += 1
                break
    return count
