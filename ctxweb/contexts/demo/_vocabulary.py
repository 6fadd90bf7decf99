"""What the generated sessions are made of: the vocabulary of identifiers, modules, errors
and loggers, the coding agent's system prompt, and its tools.
"""

from __future__ import annotations

import string
from typing import Any

_ALNUM = string.ascii_letters + string.digits

# fmt: off
_PACKAGES = ["billing", "ledger", "shipping", "inventory", "payroll", "catalog", "scheduler"]
_NOUNS = ["invoice", "customer", "order", "payment", "account", "line_item", "discount",
    "tax_rate", "currency", "refund", "report", "batch", "record", "session", "token", "window",
    "quota", "price", "warehouse", "shipment", "carrier", "ledger_entry", "balance", "statement"]
_VERBS = ["load", "save", "compute", "validate", "apply", "render", "parse", "merge", "resolve",
    "normalize", "fetch", "build", "reconcile", "refresh", "expire", "format", "split", "round"]
_MODULES = ["models", "services", "selectors", "api", "tasks", "pricing", "rounding", "exporters",
    "importers", "validators", "cache", "events", "reports", "settings", "currency", "storage"]
_EXCEPTIONS = ["ValueError", "KeyError", "TypeError", "AttributeError", "ZeroDivisionError"]
_SUFFIXES = ["Service", "Repository", "Calculator", "Exporter", "Validator", "Policy", "Builder"]
_LOGGERS = ["worker", "scheduler", "api", "db.pool", "cache", "http.client", "exporter"]
# fmt: on


SYSTEM_PROMPT = """\
You are an autonomous software engineering agent working in the repository at {root}.
You solve the user's task by reading code, running tests and editing files with the tools
provided. Work in small, verifiable steps.

# Rules
- Read a file before you edit it. Never guess the content of a file you have not read.
- Keep changes minimal and focused on the task; do not reformat unrelated code.
- After every edit, run the relevant tests. A task is done only when the tests pass.
- Prefer `grep` to find definitions and usages before reading whole files.
- Never run destructive commands (rm -rf, git push --force, dropping databases).
- When a test fails, read the traceback carefully and fix the cause, not the symptom.
- Keep the public API of the package unchanged unless the user asks otherwise.
- Summarize what you changed and why when you finish a task.

# Environment
- Repository: {root} (Python {python}, package `{package}`)
- Tests: pytest, configured in pyproject.toml; run them with the run_tests tool.
- Style: ruff, line length 100, type hints everywhere, docstrings on public functions.
- Today's date: 2025-03-14. The working tree may contain uncommitted changes by the user.

# Output
Answer in concise Markdown. Quote file paths and identifiers in backticks. When you show code,
show only the lines that matter, with their path.
"""


_TOOLS: list[dict[str, Any]] = [
    {
        "name": "read_file",
        "description": "Read a text file of the repository. Returns the content with line "
        "numbers. Use offset and limit for large files.",
        "parameters": {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Path relative to the repository"},
                "offset": {"type": "integer", "description": "First line to read (1-based)"},
                "limit": {"type": "integer", "description": "How many lines to read"},
            },
            "required": ["path"],
        },
    },
    {
        "name": "edit_file",
        "description": "Replace an exact string in a file with another. old_str must occur "
        "exactly once in the file.",
        "parameters": {
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "old_str": {"type": "string", "description": "The exact text to replace"},
                "new_str": {"type": "string", "description": "The replacement text"},
            },
            "required": ["path", "old_str", "new_str"],
        },
    },
    {
        "name": "grep",
        "description": "Search the repository for a regular expression; returns matching lines "
        "as path:line:text.",
        "parameters": {
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "A Python regular expression"},
                "path": {"type": "string", "description": "Folder or file to search"},
                "include": {"type": "string", "description": "Glob of files, e.g. *.py"},
            },
            "required": ["pattern"],
        },
    },
    {
        "name": "run_tests",
        "description": "Run pytest on a path or node id and return its output.",
        "parameters": {
            "type": "object",
            "properties": {
                "target": {"type": "string", "description": "tests/ path or node id"},
                "args": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["target"],
        },
    },
    {
        "name": "run_command",
        "description": "Run a shell command in the repository (no network) and return its "
        "stdout and stderr, truncated to 30,000 characters.",
        "parameters": {
            "type": "object",
            "properties": {
                "command": {"type": "string"},
                "timeout": {"type": "integer", "description": "Seconds, default 120"},
            },
            "required": ["command"],
        },
    },
]
