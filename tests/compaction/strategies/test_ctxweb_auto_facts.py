"""ctxweb-auto's fact finder scans each distinct token once, with possessive patterns: it must
find exactly what the plain patterns find over the whole text (written here as they were before
the finder was made fast, so a wrong possessive quantifier or a token split that changes what a
pattern sees fails here)."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from compaction.messages.model import Context, TextPart, ToolCallPart, ToolResultPart
from compaction.strategies.ctxweb_auto._facts import text_facts
from compaction.transcripts import parse_transcript

_EXTENSIONS = (
    "py|pyi|ipynb|js|jsx|ts|tsx|mjs|cjs|go|rs|java|kt|scala|c|h|cc|cpp|hpp|rb|php|cs|swift|sh|"
    "bash|zsh|md|rst|txt|json|jsonl|yaml|yml|toml|ini|cfg|conf|lock|html|css|scss|sql|xml|csv|"
    "proto|dockerfile|env|log|pony|lua|r|pl|ex|exs|vue|svelte"
)
_URL = re.compile(r"\bhttps?://[^\s\"'<>()\[\]{}`|\\,]+")
_PATH = re.compile(
    r"(?<![\w./@+-])(?:~|\.{1,2})?/?(?:[\w.@+-]+/)+[\w.@+-]*"
    r"|(?<![\w./@+-])[\w-][\w.-]*\.(?:" + _EXTENSIONS + r")(?![\w])",
    re.IGNORECASE,
)
_EXCEPTION = re.compile(r"\b[A-Z][A-Za-z0-9]*(?:Error|Exception|Warning)\b")
_NAME = re.compile(
    r"\b[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+_?\b"
    r"|\b[a-z][a-z0-9]*[A-Z][A-Za-z0-9]*\b"
    r"|\b[A-Z][a-z0-9]+[A-Z][A-Za-z0-9]*\b"
    r"|(?<![\w.])[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+(?=\()"
    r"|\b(?=[A-Z0-9]*[A-Z])(?=[A-Z0-9]*[0-9])[A-Z0-9]{5,}\b"
)
_TRAILING = ".,:;!?'\")]}>`"


def _cleaned(found: list[str]) -> list[str]:
    return [f for f in dict.fromkeys(f.rstrip(_TRAILING) for f in found) if len(f) >= 3]


_ESCAPED_SPACE = re.compile(r"(?<!\\)\\[nrt]")


def reference(text: str) -> frozenset[tuple[str, str]]:
    """The facts of ``text`` by the plain patterns, each over the whole text (a JSON-escaped
    newline, tab or return read as the whitespace it stands for)."""
    text = _ESCAPED_SPACE.sub(" ", text)
    urls = _cleaned(_URL.findall(text))
    rest = _URL.sub(" ", text)
    paths = [
        p
        for p in _cleaned(_PATH.findall(rest))
        if not p.startswith("//") and any(c.isalpha() for c in p)
    ]
    errors = _cleaned(_EXCEPTION.findall(rest))
    names = [n for n in _cleaned(_NAME.findall(rest)) if n not in set(errors)]
    names = [n for n in names if not any(n in p for p in paths)]
    return frozenset(
        [("urls", u) for u in urls]
        + [("files", p) for p in paths]
        + [("errors", e) for e in errors]
        + [("names", n) for n in names]
    )


TRICKY = [
    "ValueError in src/app.py from load_config, see https://x.org/a",
    "codes 26T10 HAT001 ZFA04Y 12345 ABCDE A1B2 2026-11-25T10:03:00Z",
    "self.load_config(x) os_path.join(a) x.load_config np.sin(1) a.b.c.(d) HAT001.get(1)",
    "~/notes/todo.md ../lib/x.ts ./run.sh a~/b/c //comment /usr/bin/env user@host/repo",
    "src/ValueError.py raises ValueError; tests/test_load_config.py calls load_config()",
    "snake__case a_b_ _private __dunder__ SCREAMING_CASE camelCase PascalCase Ab",
    "https://example.com/a/b.py?x=1,https://x.org/(y) http://localhost:3000/",
    "nbsp\u00a0src/é_module.py\u00a0café_au_lait\u2028line_sep\x1cfile_sep.json",
    '{"file_path": "/repo/src/app.py", "content": "def load_config():\\n    return 1"}',
    "Traceback (most recent call last):\n  File \"/x/y.py\", line 3\nKeyError: 'name'",
    "import os.path; os.path.join('a', 'b'); obj.method().chain(); `tick_name`",
    "foo.py. bar.PY: baz.tar.gz qux.d.ts README.md, Makefile setup.cfg.",
    '{"cmd": "ls\\napps/web/package.json\\tnpm_run\\r\\nError", "win": "C:\\\\new\\\\x.py"}',
]


@pytest.mark.parametrize("text", TRICKY)
def test_the_token_scan_finds_what_the_plain_patterns_find(text: str) -> None:
    assert text_facts(text) == reference(text)


def test_random_texts_of_the_characters_that_matter() -> None:
    pieces = [
        *"aZ_./@+-~:()[]{}\"' \n\t\u00a0é0159QX,;`",
        "http://",
        "https://x.org/",
        "Error",
        ".py",
        "os.path.join(",
        "ValueError",
        "src/",
        "../",
        "HAT001",
        "camelCase",
        "foo_bar",
        "AB12C",
    ]
    rng = random.Random(20261125)
    for _ in range(4000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 40)))
        assert text_facts(text) == reference(text), text


def _texts(context: Context) -> list[str]:
    texts = [p.text for p in context.system if isinstance(p, TextPart)]
    for message in context.messages:
        for part in message.parts:
            if isinstance(part, ToolCallPart):
                texts.append(f"{part.name} {part.arguments}")
            elif isinstance(part, TextPart | ToolResultPart):
                texts.append(part.text)
    return texts


def test_every_text_of_the_shared_transcripts(transcripts: Path) -> None:
    """Real sessions of every format: the last context of each, every text in it."""
    seen: set[str] = set()
    for path in sorted(transcripts.rglob("*")):
        if not path.is_file() or path.name == "README.md":
            continue
        for session in parse_transcript(path.read_bytes(), name=path.name):
            if not session.turns:
                continue
            for text in _texts(session.turns[-1].context):
                if text not in seen:
                    seen.add(text)
                    assert text_facts(text) == reference(text), text[:300]
    assert len(seen) > 1000


def test_a_json_escaped_newline_ends_a_fact_as_a_line_break_does() -> None:
    found = text_facts('{"cmd": "cat a.py\\napps/web/package.json\\nnext_step"}')
    assert ("files", "apps/web/package.json") in found
    assert ("names", "next_step") in found
    assert not any(text.startswith("napps") or text == "nnext_step" for _, text in found)


def test_a_file_heading_a_group_of_its_own_is_not_listed_again_in_another() -> None:
    from compaction.messages.model import Message
    from compaction.strategies.ctxweb_auto._facts import grouped_lines

    listing = ToolCallPart("c1", "ls", '{"path": "src"}')
    listed = ToolResultPart("c1", (TextPart("src/app.py src/util.py"),))
    read = ToolCallPart("c2", "read", '{"path": "src/app.py"}')
    body = ToolResultPart("c2", (TextPart("def load_config(): pass"),))
    messages = [
        Message("assistant", (listing,)),
        Message("tool", (listed,)),
        Message("assistant", (read,)),
        Message("tool", (body,)),
    ]
    facts = [("files", "src/app.py"), ("files", "src/util.py"), ("names", "load_config")]
    lines = grouped_lines(messages, facts)
    assert lines == ["- src: files src/util.py", "- src/app.py: names load_config"]
    assert "\n".join(lines).count("src/app.py") == 1


def test_compact_lists_hold_the_same_facts_separated_by_spaces_only() -> None:
    from compaction.messages.model import Message
    from compaction.strategies.ctxweb_auto._facts import fact_line, grouped_lines
    from tests.support.messages import COUNTER

    read = ToolCallPart("c1", "read", '{"path": "src/app.py"}')
    body = ToolResultPart(
        "c1", (TextPart("def load_config(): parse_args(); os.path.join(a, b) ValueError"),)
    )
    messages = [Message("assistant", (read,)), Message("tool", (body,))]
    facts = sorted(text_facts(body.text) | {("files", "src/app.py"), ("files", "README.md")})
    wide, compact = grouped_lines(messages, facts), grouped_lines(messages, facts, compact=True)
    assert wide == [
        "- src/app.py: errors ValueError; names load_config, os.path.join(), parse_args",
        "facts: files README.md",
    ]
    assert compact == [
        "- src/app.py: errors ValueError; names load_config os.path.join() parse_args",
        "facts: files README.md",
    ]
    # the same facts read back from either, and the compact one costs less
    for lines in (wide, compact):
        assert text_facts("\n".join(lines)) >= set(facts)
    line = fact_line(facts)
    assert COUNTER.count_text(fact_line(facts, compact=True)) < COUNTER.count_text(line)


def test_the_token_memo_shared_by_texts_changes_nothing_found() -> None:
    from compaction.strategies.ctxweb_auto import _facts

    texts = [*TRICKY, " ".join(TRICKY), "\n".join(reversed(TRICKY))]
    _facts.forget()
    first = [text_facts(text) for text in texts]
    _facts.forget()
    # the other way round: each text now finds most of its tokens scanned for another
    again = [text_facts(text) for text in reversed(texts)][::-1]
    assert first == again == [reference(text) for text in texts]
    assert _facts._TOKEN_FACTS  # the memo was used
