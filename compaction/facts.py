"""The facts a reader needs to go on with a task: file paths, error names, URLs and names.

A fact is a ``(kind, text)`` pair of one of :data:`KINDS`: ``files`` (paths and file names),
``errors`` (exception names), ``urls`` and ``names`` (snake_case, camelCase and PascalCase
identifiers, dotted calls, codes such as ``HAT001``). This is the fact finder ``ctxweb-auto``
uses to keep what it removes visible, made public so other measures (a replay's facts lost for
good, :mod:`compaction.replay`) count facts exactly as the strategy does. Every fact of a text is
found (no cap per kind, unlike :func:`compaction.summarizers.extract_facts`'s sample).

Example:
    >>> sorted(text_facts("ValueError in src/app.py, see https://x.org/a"))
    [('errors', 'ValueError'), ('files', 'src/app.py'), ('urls', 'https://x.org/a')]
"""

from __future__ import annotations

from compaction.strategies.ctxweb_auto._facts import (
    KINDS,
    Fact,
    message_facts,
    part_facts,
    text_facts,
)

__all__ = ["KINDS", "Fact", "message_facts", "part_facts", "text_facts"]
