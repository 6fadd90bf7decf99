"""Procedurally generated coding-agent sessions, for the demo data and the benchmarks.

:func:`coding_session` returns, for each model call of an imaginary coding agent, the body it
would post to ``POST /api/v1/sessions/{external_id}/turns``: a system prompt, a handful of coding
tools, and messages that grow call by call: the user's task, tool calls (``read_file``,
``run_tests``, ``grep``, ``edit_file``, ``run_command``) with realistic arguments, their results
(Python files, pytest output with failures and tracebacks, grep hits, long logs), now and then a
report and a new request from the user, and reported usage close to the context's size. Options
add a compaction in the middle (the context drops to the system prompt and one summary message
carrying a known summary marker) and size the session to end near its window.

Pure: no database, no files, no network; the text comes from a small vocabulary of identifiers,
paths and error messages, and the same arguments always give the same bodies.

Example:
    >>> bodies = coding_session(3, seed=1, target_tokens=2_000)
    >>> [len(b["request"]["messages"]) for b in bodies]
    [2, 4, 6]

The parts: the generated sessions (``_sessions``), the imaginary agent (``_agent``), the
repository and tool outputs it writes (``_writing``), and the vocabulary, system prompt and
tools they are made of (``_vocabulary``).
"""

from __future__ import annotations

from ctxweb.contexts.demo._sessions import (
    CHARS_PER_TOKEN,
    SUMMARY_PREFIXES,
    DemoFormat,
    coding_session,
    estimate_tokens,
)
from ctxweb.contexts.demo._vocabulary import SYSTEM_PROMPT

__all__ = [
    "CHARS_PER_TOKEN",
    "SUMMARY_PREFIXES",
    "SYSTEM_PROMPT",
    "DemoFormat",
    "coding_session",
    "estimate_tokens",
]
