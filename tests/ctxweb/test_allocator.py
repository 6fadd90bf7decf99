"""The web process's allocator settings (:func:`ctxweb.serving.tune_allocator`)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

# Run in a process of its own: the settings are the process's, for good.
PROBE = textwrap.dedent(
    """
    import resource, sys
    from ctxweb.serving import tune_allocator
    if not tune_allocator():
        print("untuned")
        sys.exit(0)
    def faults():
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    size = int(sys.argv[1])
    for _ in range(5):  # the heap grows to its working size first
        block = b"x" * size
        del block
    before = faults()
    for _ in range(50):
        block = b"x" * size  # every page written
        del block
    print((faults() - before) / 50)
    """
)


def _faults_per_block(size: int) -> float | None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(size)], capture_output=True, text=True, check=True
    )
    out = done.stdout.strip()
    return None if out == "untuned" else float(out)


def test_a_block_under_the_mmap_threshold_reuses_the_heap_request_after_request() -> None:
    """A late turn's body (hundreds of KB) is allocated and freed by every request: the freed
    memory stays in the heap for the next one. With glibc's trim threshold left at 128 KB it was
    given back and faulted in again page by page (a 740 KB block: 181 faults every time)."""
    faults = _faults_per_block(740_000)
    if faults is None:
        pytest.skip("not glibc: the allocator is not tuned")
    assert faults < 20


def test_a_block_over_the_mmap_threshold_still_goes_back_to_the_system() -> None:
    """Blocks of megabytes (a 24 MB managed call) are mapped and unmapped: a process does not
    keep the memory of its largest bodies (each is faulted in anew: the price of that bound)."""
    faults = _faults_per_block(4 * 1024 * 1024)
    if faults is None:
        pytest.skip("not glibc: the allocator is not tuned")
    assert faults > 4 * 1024 * 1024 // 4096 * 0.9
