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
"""

from __future__ import annotations

import json
import random
import string
from dataclasses import dataclass, field
from typing import Any, Literal

from compaction.regions import BASEAGENT_SUMMARY_PREFIX

__all__ = ["CHARS_PER_TOKEN", "SUMMARY_PREFIXES", "coding_session", "estimate_tokens"]

DemoFormat = Literal["openai-chat", "anthropic-messages"]

#: Characters per token of the generated text (code, logs, prose) under o200k and cl100k: the
#: generator sizes its outputs with it and reports usage from it.
CHARS_PER_TOKEN = 3.6

#: How the summary message of a compaction begins: BaseAgent's prefix or LLM4S's marker.
SUMMARY_PREFIXES = {
    "baseagent": BASEAGENT_SUMMARY_PREFIX,
    "history": "[HISTORY_SUMMARY]\n",
}

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


def estimate_tokens(text: str) -> int:
    """The generator's estimate of the tokens of ``text`` (:data:`CHARS_PER_TOKEN`)."""
    return int(len(text) / CHARS_PER_TOKEN)


@dataclass
class _Call:
    id: str
    name: str
    arguments: dict[str, Any]


@dataclass
class _Step:
    """One neutral message: user text, assistant text and calls, or the results of calls."""

    kind: Literal["user", "assistant", "results"]
    text: str = ""
    calls: list[_Call] = field(default_factory=list)
    results: list[tuple[str, str]] = field(default_factory=list)  # (call id, content)

    def size(self) -> int:
        calls = sum(len(c.name) + len(json.dumps(c.arguments)) for c in self.calls)
        return len(self.text) + calls + sum(len(r) for _, r in self.results) + 12


class _Repo:
    """The imaginary repository: a package, its modules, their functions and tests."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.package = rng.choice(_PACKAGES)
        self.root = f"/workspace/{self.package}-service"
        self.modules = rng.sample(_MODULES, 10)
        self.functions = {
            m: [f"{rng.choice(_VERBS)}_{rng.choice(_NOUNS)}" for _ in range(rng.randint(6, 14))]
            for m in self.modules
        }
        self.classes = [
            "".join(w.title() for w in rng.choice(_NOUNS).split("_")) + rng.choice(_SUFFIXES)
            for _ in range(6)
        ]

    def module(self) -> str:
        return self.rng.choice(self.modules)

    def path(self, module: str | None = None) -> str:
        return f"src/{self.package}/{module or self.module()}.py"

    def test_path(self, module: str | None = None) -> str:
        return f"tests/test_{module or self.module()}.py"

    def function(self, module: str | None = None) -> str:
        return self.rng.choice(self.functions[module or self.module()])

    def identifier(self) -> str:
        return self.rng.choice(_NOUNS)


class _Writer:
    """Writes tool outputs of about a given size in characters."""

    def __init__(self, repo: _Repo, rng: random.Random) -> None:
        self.repo = repo
        self.rng = rng
        self.clock = 9 * 3600 + rng.randint(0, 3600)

    def python(self, module: str, chars: int) -> str:
        """A Python module, numbered like ``cat -n``."""
        rng, repo = self.rng, self.repo
        lines = [
            f'"""{module.title()} of the {repo.package} package."""',
            "",
            "from __future__ import annotations",
            "",
            "import logging",
            "from dataclasses import dataclass",
            "from decimal import ROUND_HALF_UP, Decimal",
            "",
            f"from {repo.package}.{rng.choice(repo.modules)} import {rng.choice(repo.classes)}",
            "",
            "logger = logging.getLogger(__name__)",
            "",
        ]
        size = sum(len(line) + 8 for line in lines)
        while size < chars:
            block = self._function(module) if rng.random() < 0.75 else self._class()
            lines.extend(block)
            size += sum(len(line) + 8 for line in block)
        return "\n".join(f"{n:6}\t{line}" for n, line in enumerate(lines, 1))

    def _function(self, module: str) -> list[str]:
        rng = self.rng
        name = self.repo.function(module)
        noun = name.split("_", 1)[1]
        arg, other = rng.choice(_NOUNS), rng.choice(_NOUNS)
        limit = rng.choice(["0", "1", "100", "Decimal('0.01')", "len(items)"])
        body = [
            f"def {name}({arg}: {rng.choice(self.repo.classes)}, *, {other}: int = {limit}) -> "
            f"list[{rng.choice(self.repo.classes)}]:",
            f'    """{name.split("_")[0].title()} the {noun} of a {arg}, {other} at most."""',
            f"    if {arg} is None:",
            f'        raise {rng.choice(_EXCEPTIONS)}(f"{noun} of {{{other}!r}} not found")',
            "    result = []",
            f"    for item in {arg}.{rng.choice(_NOUNS)}s:",
            f"        if item.{rng.choice(_NOUNS)} > {limit}:",
            f'            logger.debug("skipping %s in {name}", item.id)',
            "            continue",
            f"        value = (item.amount * {other}).quantize(Decimal('0.01'), ROUND_HALF_UP)",
            "        result.append(item.replace(amount=value))",
        ]
        if rng.random() < 0.5:
            body += [
                f"    if not result and {other}:",
                f'        logger.warning("{name}: nothing left for %s", {arg}.id)',
            ]
        return [*body, "    return result", "", ""]

    def _class(self) -> list[str]:
        rng = self.rng
        name = rng.choice(self.repo.classes)
        fields = rng.sample(_NOUNS, 4)
        lines = ["@dataclass(frozen=True)", f"class {name}:", f'    """A {fields[0]} view."""', ""]
        lines += [f"    {f}: {rng.choice(['int', 'str', 'Decimal', 'bool'])}" for f in fields]
        lines += ["", "    def total(self) -> Decimal:", f"        return self.{fields[0]} * 2"]
        return [*lines, "", ""]

    def pytest(self, target: str, chars: int, failing: bool) -> str:
        """pytest output: progress, then tracebacks of failures, then the summary."""
        rng, repo = self.rng, self.repo
        tests = [repo.test_path(m) for m in repo.modules[:6]]
        head = [
            "=" * 29 + " test session starts " + "=" * 30,
            "platform linux -- Python 3.12.3, pytest-8.3.4, pluggy-1.5.0",
            f"rootdir: {repo.root}",
            "configfile: pyproject.toml",
            "plugins: cov-6.0.0, xdist-3.6.1, django-4.9.0",
            f"collected {rng.randint(40, 400)} items",
            "",
        ]
        head += [f"{t} {''.join(rng.choice('....F' if failing else '.') for _ in range(30))}"
                 f" [{rng.randint(1, 99):3}%]" for t in tests]  # fmt: skip
        if not failing:
            return "\n".join([*head, "", f"{'=' * 30} {len(tests) * 30} passed in 3.41s ====="])
        body = ["", "=" * 35 + " FAILURES " + "=" * 35]
        failed: list[str] = []
        size = sum(len(line) + 1 for line in head) + 200
        while size < chars or not failed:
            module = repo.module()
            test = f"test_{repo.function(module)}_{rng.choice(['rounds', 'raises', 'keeps'])}"
            error = rng.choice(_EXCEPTIONS)
            frame = self._traceback(module, test, error)
            failed.append(f"FAILED {repo.test_path(module)}::{test} - {error}: {frame[-3][4:]}")
            body += frame
            size += sum(len(line) + 1 for line in frame)
        tail = ["=" * 27 + " short test summary info " + "=" * 28, *failed]
        tail.append(f"{'=' * 10} {len(failed)} failed, {rng.randint(40, 300)} passed in 4.07s")
        return "\n".join(head + body + tail)

    def _traceback(self, module: str, test: str, error: str) -> list[str]:
        rng, repo = self.rng, self.repo
        function = repo.function(module)
        noun = rng.choice(_NOUNS)
        lines = [
            f"{'_' * 20} {test} {'_' * 20}",
            "",
            f"    def {test}({noun}_factory):",
            f"        {noun} = {noun}_factory(amount=Decimal('{rng.randint(1, 999)}.{rng.randint(10, 99)}'))",  # noqa: E501
            f">       assert {function}({noun}, limit={rng.randint(1, 50)}) == expected",
            "",
            f"{repo.test_path(module)}:{rng.randint(10, 400)}: ",
            "_ " * 30,
        ]
        for _ in range(rng.randint(1, 4)):
            inner = repo.module()
            lines += [
                f"{repo.path(inner)}:{rng.randint(10, 600)}: in {repo.function(inner)}",
                f"    value = self.{rng.choice(_NOUNS)}[{rng.choice(_NOUNS)}.id]",
            ]
        message = {
            "KeyError": f"'{rng.choice(_NOUNS)}_{rng.randint(100, 99999)}'",
            "TypeError": f"unsupported operand type(s) for *: 'Decimal' and '{rng.choice(['float', 'NoneType'])}'",  # noqa: E501
            "AttributeError": f"'NoneType' object has no attribute '{rng.choice(_NOUNS)}'",
            "ValueError": f"{noun} must be positive, got -{rng.randint(1, 500)}",
            "ZeroDivisionError": "division by zero",
        }[error]
        return [
            *lines,
            f"E   {error}: {message}",
            "",
            f"{repo.path(module)}:{rng.randint(10, 600)}: {error}",
            "",
        ]

    def grep(self, pattern: str, chars: int) -> str:
        rng, repo = self.rng, self.repo
        lines: list[str] = []
        size = 0
        while size < chars:
            module = repo.module()
            path = repo.path(module) if rng.random() < 0.7 else repo.test_path(module)
            line = f"{path}:{rng.randint(1, 800)}:    {rng.choice(['', 'return ', 'value = '])}"
            line += f"{pattern}({rng.choice(_NOUNS)}, {rng.choice(_NOUNS)}={rng.randint(0, 9)})"
            lines.append(line)
            size += len(line) + 1
        return "\n".join(lines)

    def log(self, chars: int) -> str:
        """A service log, mostly INFO, with warnings and an error traceback now and then."""
        rng, repo = self.rng, self.repo
        lines: list[str] = []
        size = 0
        while size < chars:
            self.clock += rng.randint(0, 3)
            stamp = f"2025-03-14 {self.clock // 3600 % 24:02}:{self.clock // 60 % 60:02}:"
            stamp += f"{self.clock % 60:02},{rng.randint(0, 999):03}"
            where = f"[{rng.choice(_LOGGERS)}-{rng.randint(1, 8)}] {repo.package}.{repo.module()}"
            roll = rng.random()
            if roll < 0.85:
                line = (
                    f"{stamp} INFO {where}: {rng.choice(_VERBS)}d {rng.choice(_NOUNS)} "
                    f"id={rng.randint(1000, 999999)} in {rng.randint(1, 900)}ms"
                )
            elif roll < 0.97:
                line = (
                    f"{stamp} WARNING {where}: retrying {rng.choice(_NOUNS)} "
                    f"id={rng.randint(1000, 999999)} (attempt {rng.randint(2, 5)}/5)"
                )
            else:
                module = repo.module()
                error = rng.choice(_EXCEPTIONS)
                line = "\n".join(
                    [
                        f"{stamp} ERROR {where}: task failed",
                        "Traceback (most recent call last):",
                        f'  File "{repo.root}/{repo.path(module)}", line {rng.randint(10, 600)}, '
                        f"in {repo.function(module)}",
                        f"    {rng.choice(_NOUNS)} = registry[{rng.choice(_NOUNS)}.id]",
                        f"{error}: {rng.choice(_NOUNS)} {rng.randint(1000, 99999)}",
                    ]
                )
            lines.append(line)
            size += len(line) + 1
        return "\n".join(lines)


class _Agent:
    """Decides the next step of the imaginary agent and writes its tool calls and results."""

    def __init__(self, rng: random.Random, call_prefix: str) -> None:
        self.rng = rng
        self.repo = _Repo(rng)
        self.writer = _Writer(self.repo, rng)
        self.call_prefix = call_prefix
        self.focus = self.repo.module()

    def call_id(self) -> str:
        return self.call_prefix + "".join(self.rng.choices(_ALNUM, k=24))

    def task(self) -> str:
        rng, repo = self.rng, self.repo
        self.focus = repo.module()
        function = repo.function(self.focus)
        return rng.choice(
            [
                f"`{repo.test_path(self.focus)}` started failing after the refactor of "
                f"`{repo.path(self.focus)}`: `{function}` now rounds differently. Find the cause "
                "and fix it without changing the public API.",
                f"Add a `strict` option to `{function}` in `{repo.path(self.focus)}` that raises "
                f"instead of skipping invalid {rng.choice(_NOUNS)}s, with tests.",
                f"The worker logs show intermittent {rng.choice(_EXCEPTIONS)}s in "
                f"`{repo.package}.{self.focus}`. Investigate the logs, reproduce it in a test and "
                "fix it.",
                f"Please clean up `{repo.path(self.focus)}`: `{function}` duplicates logic from "
                f"`{repo.function()}`. Deduplicate it and make sure every test still passes.",
            ]
        )

    def report(self) -> str:
        repo = self.repo
        return (
            f"Done. I changed `{repo.function(self.focus)}` in `{repo.path(self.focus)}` so that "
            f"it quantizes once, after applying the {self.rng.choice(_NOUNS)}, and added two tests "
            f"in `{repo.test_path(self.focus)}`. The full suite passes "
            f"({self.rng.randint(120, 400)} tests)."
        )

    def summary(self, prefix: str, turns: int) -> str:
        repo, rng = self.repo, self.rng
        files = sorted({repo.path() for _ in range(6)})
        return prefix + "\n".join(
            [
                "## Goal",
                f"Fix the failures in `{repo.test_path(self.focus)}` and keep the public API of "
                f"`{repo.package}` unchanged.",
                "## Progress",
                f"- {turns} tool calls so far; read {', '.join(f'`{f}`' for f in files)}.",
                f"- Root cause: `{repo.function(self.focus)}` rounds each line before summing.",
                f"- Edited `{repo.path(self.focus)}`; {rng.randint(2, 9)} tests still fail with "
                f"{rng.choice(_EXCEPTIONS)}.",
                "## Next steps",
                f"- Run `{repo.test_path(self.focus)}` again and fix the remaining failures.",
                "- Check the worker log for the intermittent error, then run the full suite.",
            ]
        )

    def step(self, budget: int) -> _Step:
        """An assistant message calling tools, and their results, of about ``budget`` chars."""
        rng = self.rng
        count = 2 if rng.random() < 0.15 else 1
        calls = []
        results = []
        for _ in range(count):
            call, result = self._tool(max(60, budget // count))
            calls.append(call)
            results.append((call.id, result))
        text = ""
        if rng.random() < 0.4:
            text = rng.choice(
                [
                    f"Let me look at how `{self.repo.function(self.focus)}` handles this.",
                    "The traceback points at the rounding step; I'll check the callers first.",
                    "I'll run the tests to see whether the change fixed the failure.",
                    f"Searching for other uses of `{self.repo.identifier()}` before editing.",
                ]
            )
        return _Step("assistant", text=text, calls=calls, results=results)

    def _tool(self, chars: int) -> tuple[_Call, str]:
        rng, repo, writer = self.rng, self.repo, self.writer
        module = self.focus if rng.random() < 0.6 else repo.module()
        if chars < 300:
            kind = rng.choice(["edit_file", "edit_file", "grep"])
        elif chars < 3_000:
            kind = rng.choice(["grep", "run_tests", "read_file", "run_tests"])
        else:
            kind = rng.choice(["read_file", "read_file", "run_tests", "run_command"])
        args: dict[str, Any]
        if kind == "edit_file":
            function = repo.function(module)
            old = "    value = (item.amount * limit).quantize(Decimal('0.01'))\n"
            new = f"    value = {function}(item.amount, limit, rounding=ROUND_HALF_UP)\n"
            args = {"path": repo.path(module), "old_str": old, "new_str": new}
            line = rng.randint(20, 500)
            result = f"Edited {repo.path(module)}: replaced lines {line}-{line + 1} (1 match)."
        elif kind == "grep":
            pattern = repo.function(module)
            args = {"pattern": pattern, "path": "src/", "include": "*.py"}
            result = writer.grep(pattern, chars)
        elif kind == "read_file":
            args = {"path": repo.path(module)}
            result = writer.python(module, chars)
        elif kind == "run_tests":
            args = {"target": repo.test_path(module), "args": ["-x", "-q"][: rng.randint(0, 2)]}
            result = writer.pytest(repo.test_path(module), chars, failing=rng.random() < 0.7)
        else:
            args = {"command": f"tail -n {chars // 90} logs/{rng.choice(_LOGGERS)}.log"}
            result = writer.log(chars)
        return _Call(self.call_id(), kind, args), result


def _render_openai(step: _Step) -> list[dict[str, Any]]:
    if step.kind == "user":
        return [{"role": "user", "content": step.text}]
    message: dict[str, Any] = {"role": "assistant", "content": step.text or None}
    if step.calls:
        message["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
            }
            for c in step.calls
        ]
    results = [{"role": "tool", "tool_call_id": i, "content": r} for i, r in step.results]
    return [message, *results]


def _render_anthropic(step: _Step) -> list[dict[str, Any]]:
    if step.kind == "user":
        return [{"role": "user", "content": step.text}]
    content: list[dict[str, Any]] = [{"type": "text", "text": step.text}] if step.text else []
    content += [
        {"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments} for c in step.calls
    ]
    message = {"role": "assistant", "content": content}
    if not step.results:
        return [message]
    results = [{"type": "tool_result", "tool_use_id": i, "content": r} for i, r in step.results]
    return [message, {"role": "user", "content": results}]


def coding_session(
    turns: int,
    *,
    seed: int,
    target_tokens: int = 40_000,
    format: DemoFormat = "openai-chat",
    model: str | None = None,
    max_output_tokens: int | None = None,
    compact_at: int | None = None,
    summary_marker: str = "baseagent",
    user_every: tuple[int, int] = (12, 30),
) -> list[dict[str, Any]]:
    """The ingest bodies of a coding agent's ``turns`` model calls.

    Args:
        turns: how many model calls (bodies) to generate.
        seed: the seed; the same arguments always give the same bodies.
        target_tokens: about how many tokens the last context holds (and the context just before
            a compaction).
        format: ``"openai-chat"`` or ``"anthropic-messages"``.
        model: the model named in the requests (default ``gpt-4o`` or ``claude-sonnet-4-5``).
        max_output_tokens: the request's ``max_tokens`` (default 4,096 or 8,192).
        compact_at: the turn at which the context drops to the system prompt and a summary
            message (``SUMMARY_PREFIXES[summary_marker]``); it then grows to ``target_tokens``
            again by the last turn.
        user_every: after how many calls (a range) the agent reports and the user asks for more.

    Returns:
        One body per call: ``{"format", "model", "turn_id", "request", "usage"}``.

    Example:
        >>> bodies = coding_session(40, seed=7, target_tokens=20_000, compact_at=20)
        >>> bodies[20]["request"]["messages"][1]["content"].startswith("Another language model")
        True
    """
    if format not in ("openai-chat", "anthropic-messages"):
        raise ValueError(f"unsupported format {format!r}")
    if compact_at is not None and not 0 < compact_at < turns:
        raise ValueError("compact_at must be between 0 and turns")
    anthropic = format == "anthropic-messages"
    model = model or ("claude-sonnet-4-5" if anthropic else "gpt-4o")
    max_output_tokens = max_output_tokens or (8_192 if anthropic else 4_096)
    rng = random.Random(seed)
    agent = _Agent(rng, "toolu_01" if anthropic else "call_")
    repo = agent.repo
    system = SYSTEM_PROMPT.format(root=repo.root, python="3.12", package=repo.package)
    render = _render_anthropic if anthropic else _render_openai
    if anthropic:
        tools = [
            {"name": t["name"], "description": t["description"], "input_schema": t["parameters"]}
            for t in _TOOLS
        ]
        head: dict[str, Any] = {
            "model": model,
            "max_tokens": max_output_tokens,
            "system": [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}],
            "tools": tools,
        }
        messages: list[dict[str, Any]] = []
    else:
        tools = [{"type": "function", "function": t} for t in _TOOLS]
        head = {"model": model, "max_tokens": max_output_tokens, "tools": tools}
        messages = [{"role": "system", "content": system}]
    base_chars = len(system) + len(json.dumps(tools))
    first = _Step("user", text=agent.task())
    messages += render(first)
    chars = base_chars + first.size()
    phase_end = compact_at if compact_at is not None else turns
    next_user = rng.randint(*user_every)
    previous_tokens = 0
    bodies: list[dict[str, Any]] = []
    for index in range(turns):
        if index == compact_at:
            summary = _Step("user", text=agent.summary(SUMMARY_PREFIXES[summary_marker], index))
            messages = messages[:1] if not anthropic else []
            messages += render(summary)
            chars = base_chars + summary.size()
            phase_end = turns
        tokens = int(chars / CHARS_PER_TOKEN)
        bodies.append(
            {
                "format": format,
                "model": model,
                "turn_id": f"turn-{index:04d}",
                "request": {**head, "messages": list(messages)},
                "usage": _usage(anthropic, tokens, previous_tokens, rng),
            }
        )
        previous_tokens = tokens
        if index == turns - 1:
            break
        if index + 1 == next_user and index + 1 != compact_at:
            steps = [_Step("assistant", text=agent.report()), _Step("user", text=agent.task())]
            next_user += rng.randint(*user_every)
        else:
            left = max(1, phase_end - index - 1)
            per_turn = (target_tokens * CHARS_PER_TOKEN - chars) / left
            # Outputs vary a lot in size: a few big reads and logs, many small edits and greps.
            budget = int(per_turn * rng.lognormvariate(0, 0.9) / 1.5) - 250
            budget = min(budget, int(max(per_turn, 0) * 8))
            steps = [agent.step(max(60, budget))]
        for step in steps:
            messages += render(step)
            chars += step.size()
    return bodies


def _usage(anthropic: bool, tokens: int, cached: int, rng: random.Random) -> dict[str, Any]:
    """Reported usage for a context of about ``tokens``: the prefix of the last call is cached."""
    output = rng.randint(40, 600)
    cached = min(cached, tokens)
    if anthropic:
        return {
            "input_tokens": 3,
            "cache_read_input_tokens": cached,
            "cache_creation_input_tokens": max(0, tokens - cached - 3),
            "output_tokens": output,
        }
    return {
        "prompt_tokens": tokens,
        "completion_tokens": output,
        "total_tokens": tokens + output,
        "prompt_tokens_details": {"cached_tokens": cached // 128 * 128},
    }
