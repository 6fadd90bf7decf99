"""The imaginary repository and the tool outputs written about it: Python files, pytest
output, grep hits and service logs of about a given size.
"""

from __future__ import annotations

import random

from ctxweb.contexts.demo._vocabulary import (
    _EXCEPTIONS,
    _LOGGERS,
    _MODULES,
    _NOUNS,
    _PACKAGES,
    _SUFFIXES,
    _VERBS,
)


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
