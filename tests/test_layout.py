"""The layout's promises that import-linter's contracts do not state: no import cycle anywhere in
``ctxweb`` (inside a layer too), counting the imports made inside functions."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[1]

sys.setrecursionlimit(10_000)


def _cycles(graph: grimp.ImportGraph, package: str) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    counter = [0]

    def visit(module: str) -> None:
        index[module] = low[module] = counter[0]
        counter[0] += 1
        stack.append(module)
        on_stack.add(module)
        for imported in graph.find_modules_directly_imported_by(module):
            if not imported.startswith(package):
                continue
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for module in sorted(graph.modules):
        if module.startswith(package) and module not in index:
            visit(module)
    return groups


def test_ctxweb_has_no_import_cycle() -> None:
    graph = grimp.build_graph("ctxweb", include_external_packages=False)
    assert _cycles(graph, "ctxweb") == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = grimp.ImportGraph()
    for module in ("p", "p.a", "p.b", "p.c"):
        graph.add_module(module)
    graph.add_import(importer="p.a", imported="p.b")
    graph.add_import(importer="p.b", imported="p.a")
    graph.add_import(importer="p.c", imported="p.a")
    assert _cycles(graph, "p") == [["p.a", "p.b"]]


@pytest.mark.parametrize(
    "module",
    ["ctxweb.api.pagination", "ctxweb.api.parsers", "ctxweb.api.errors", "ctxweb.api.throttling"],
)
def test_each_module_drf_settings_name_imports_first(module: str) -> None:
    """DRF imports the classes its settings name while its views load: each must import first
    in a fresh process, and Django's checks (what a Celery worker runs as it starts) pass."""
    code = (
        "import django; django.setup(); import importlib; "
        f"importlib.import_module({module!r}); "
        "from django.core.checks import run_checks; run_checks()"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "ctxweb.settings"}
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-3000:]


def test_no_test_module_imports_another_or_a_private_module() -> None:
    """Tests share code through ``tests/support`` (and fixtures through ``conftest.py``), and use
    ctxweb's public modules only."""
    offenders = []
    for path in sorted(Path(__file__).parent.rglob("*.py")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            words = line.strip().split()
            if len(words) < 2 or words[0] not in ("from", "import"):
                continue
            module = words[1]
            parts = module.split(".")
            sibling = module.startswith(("tests.", ".")) and (
                parts[-1].startswith("test_") or parts[-1] == "conftest"
            )
            private = module.startswith("ctxweb.") and any(
                p.startswith("_") and not p.startswith("__") for p in parts
            )
            if sibling or private:
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert offenders == []
