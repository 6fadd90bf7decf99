"""The imaginary coding agent: its neutral steps (user text, assistant text and tool calls,
their results) and how it decides and writes the next one.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any, Literal

from ctxweb.contexts.demo._vocabulary import _ALNUM, _EXCEPTIONS, _LOGGERS, _NOUNS
from ctxweb.contexts.demo._writing import _Repo, _Writer


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
