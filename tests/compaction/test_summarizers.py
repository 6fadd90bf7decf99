"""Fact extraction and the deterministic summarizer."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from compaction.messages.model import Message, TextPart, ToolCallPart, ToolResultPart
from compaction.summarizers import (
    _CONSTRAINT,
    _DECISION,
    SECTIONS,
    FactSummarizer,
    Summarizer,
    SummarizerError,
    extract_facts,
)


def test_it_extracts_paths():
    facts = extract_facts("edited src/app/models.py and ./scripts/run.sh, also README.md")
    assert {"src/app/models.py", "./scripts/run.sh", "README.md"} <= set(facts.paths)


def test_it_extracts_commands():
    facts = extract_facts('$ pytest -q tests\ngit status\n{"command": "make check"}')
    assert {"pytest -q tests", "git status", "make check"} <= set(facts.commands)


def test_it_extracts_error_lines():
    text = "ok\nTraceback (most recent call last):\nValueError: bad id 4242\nall good"
    facts = extract_facts(text)
    assert "Traceback (most recent call last):" in facts.errors
    assert "ValueError: bad id 4242" in facts.errors
    assert "all good" not in facts.errors


def test_it_extracts_test_names():
    facts = extract_facts("FAILED tests/test_api.py::test_rejects_bad_key and test_other ran")
    assert "tests/test_api.py::test_rejects_bad_key" in facts.tests
    assert "test_other" in facts.tests
    assert "tests/test_api.py" in facts.paths


def test_it_extracts_urls():
    facts = extract_facts("see https://example.com/a?b=1, and www.python.org.")
    assert facts.urls == ("https://example.com/a?b=1", "www.python.org")


def test_it_extracts_identifiers_and_numbers():
    facts = extract_facts("call session_list_for_user on ORD-12345 via TokenCounter; took 4242 ms")
    assert {"session_list_for_user", "ORD-12345", "TokenCounter"} <= set(facts.identifiers)
    assert "4242" in facts.numbers


def test_facts_are_unique_and_in_first_seen_order():
    facts = extract_facts("a/b.py c/d.py a/b.py")
    assert facts.paths == ("a/b.py", "c/d.py")


def _conversation() -> list[Message]:
    return [
        Message(
            "user",
            (
                TextPart(
                    "Fix the failing test in tests/test_api.py. You must not touch migrations."
                ),
            ),
        ),
        Message(
            "assistant",
            (
                TextPart("We decided to use pytest-django for this."),
                ToolCallPart("c1", "bash", '{"command": "pytest -q tests/test_api.py"}'),
            ),
        ),
        Message(
            "tool",
            (
                ToolResultPart(
                    "c1", (TextPart("FAILED tests/test_api.py::test_id - KeyError: 'id'"),)
                ),
            ),
        ),
        Message("user", (TextPart("Now also update https://example.com/docs"),)),
    ]


def test_the_summary_has_every_copaw_section_in_order():
    text = FactSummarizer().summarize(_conversation(), previous=None, prompt="")
    lines = text.splitlines()
    positions = [lines.index(section) for section in SECTIONS]
    assert positions == sorted(positions)


def test_the_summary_keeps_the_facts_of_its_input():
    text = FactSummarizer().summarize(_conversation(), previous=None, prompt="")
    for fact in (
        "tests/test_api.py",
        "pytest -q tests/test_api.py",
        "tests/test_api.py::test_id",
        "https://example.com/docs",
        "KeyError: 'id'",
    ):
        assert fact in text, fact
    assert "Fix the failing test" in text.split("## Constraints")[0]
    assert "must not touch migrations" in text
    assert "decided to use pytest-django" in text


def test_an_incremental_summary_keeps_the_old_facts():
    first = FactSummarizer().summarize(_conversation(), previous=None, prompt="")
    later = [Message("user", (TextPart("Then run make check on ctxweb/contexts/llm.py"),))]
    merged = FactSummarizer().summarize(later, previous=first, prompt="")
    assert "Fix the failing test" in merged.split("## Constraints")[0]
    for fact in ("tests/test_api.py", "https://example.com/docs", "ctxweb/contexts/llm.py"):
        assert fact in merged, fact
    assert "must not touch migrations" in merged
    assert merged == FactSummarizer().summarize(later, previous=first, prompt="")


def test_an_incremental_summary_is_a_fixed_point():
    first = FactSummarizer().summarize(_conversation(), previous=None, prompt="")
    assert FactSummarizer().summarize([], previous=first, prompt="") == first


def test_a_free_text_previous_summary_keeps_its_facts():
    merged = FactSummarizer().summarize(
        [Message("user", (TextPart("go on"),))], previous="Worked on lib/x.py", prompt=""
    )
    assert "lib/x.py" in merged


def test_the_summary_is_deterministic_and_implements_the_protocol():
    summarizer = FactSummarizer()
    assert isinstance(summarizer, Summarizer)
    one = summarizer.summarize(_conversation(), previous=None, prompt="a")
    assert one == FactSummarizer().summarize(_conversation(), previous=None, prompt="b")


def test_an_empty_input_gives_empty_sections():
    text = FactSummarizer().summarize([], previous=None, prompt="")
    assert text.splitlines()[:2] == ["## Goal", "(none)"]


def test_summarizer_error_is_a_compaction_error():
    from compaction.errors import CompactionError

    assert issubclass(SummarizerError, CompactionError)


# --- constraint and decision sentences: found line by line, as the whole-text regex finds them --

_SENTENCE_CHAR = r"(?:[^.!?\n]|[.!?](?![\s]|$))"
#: The patterns as written before the line-by-line search, over the whole text.
_WHOLE_TEXT = {
    "constraint": re.compile(
        _SENTENCE_CHAR
        + r"*\b(?:must|should|never|always|don't|do not|cannot|can't|prefer|require[sd]?|only)\b"
        + _SENTENCE_CHAR
        + r"*[.!?]?",
        re.IGNORECASE,
    ),
    "decision": re.compile(
        _SENTENCE_CHAR + r"*\b(?:decided|chose|chosen|selected|will use|going to use"
        r"|switch(?:ed)? to|opt(?:ed)? for)\b" + _SENTENCE_CHAR + r"*[.!?]?",
        re.IGNORECASE,
    ),
}
_WORDS = "must MUST ſhould only don't requires required chose chosen ſelected decided a x_ _ 1 é K"
_PHRASES = ["do not", "Do  not", "will use", "switched to", "opt for", "opted for", "' -"]
_SPACES = [" ", "\n", "\r", "\t", "\u2028", "\x85", ".", "!", "?", ". ", ".\n"]
_PIECES = st.sampled_from([*_WORDS.split(), *_PHRASES, *_SPACES])


@settings(max_examples=500, deadline=None)
@given(st.lists(_PIECES, max_size=40).map("".join))
def test_sentences_are_found_as_the_whole_text_pattern_finds_them(text: str) -> None:
    for name, sentences in (("constraint", _CONSTRAINT), ("decision", _DECISION)):
        whole = [m.group(0) for m in _WHOLE_TEXT[name].finditer(text)]
        assert list(sentences.found(text)) == whole
        assert sentences.pattern.pattern == _WHOLE_TEXT[name].pattern


def test_a_decision_after_long_lines_without_keywords_is_found() -> None:
    prose = ("word " * 2000 + "\n") * 20
    messages = [Message("user", (TextPart(prose + "We decided to use sqlite."),))]
    summary = FactSummarizer().summarize(messages, previous=None, prompt="")
    assert "**We decided to use sqlite.**" in summary
