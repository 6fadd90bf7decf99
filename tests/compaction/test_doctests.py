"""The examples in the ``compaction`` docstrings run, so they stay true."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import compaction


def _modules() -> list[str]:
    found = pkgutil.walk_packages(compaction.__path__, prefix="compaction.")
    return sorted(["compaction", *(info.name for info in found)])


@pytest.mark.parametrize("name", _modules())
def test_the_docstring_examples_hold(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, report=False, verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"
