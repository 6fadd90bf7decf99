"""Debian's Chromium for the browser tests, driven by Playwright (no browser is ever downloaded).

Without it the browser tests skip with the reason, except under ``CI=true``, where they fail.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def require_chromium() -> None:
    """Skip the test (fail it under ``CI=true``) when Chromium is not installed."""
    if CHROMIUM.exists():
        return
    reason = f"Chromium not found at {CHROMIUM} (apt-get install chromium)"
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless Chromium browser, closed on exit."""
    require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=ARGS
        )
        try:
            yield browser
        finally:
            browser.close()
