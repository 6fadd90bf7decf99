"""Debian's Chromium for the browser tests, driven by Playwright (no browser is ever downloaded),
and what those tests share: logging in, screenshots, calls made off Playwright's event loop.

Without Chromium the browser tests skip with the reason, except under ``CI=true``, where they fail.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest

CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-output" / "screenshots"
#: The dashboard login every browser test uses.
USERNAME = "operator"
PASSWORD = "pw-operator-123"
T = TypeVar("T")
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


@contextmanager
def orm_beside_playwright() -> Iterator[None]:
    """Let the ORM run in this thread while sync Playwright keeps an event loop in it: Django's
    live server runs in another thread, and would otherwise refuse ORM calls here."""
    before = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = before


def shot(page: Any, name: str) -> Path:
    """Save a screenshot of the viewport (a long inspector page takes seconds in full)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path))
    return path


def log_in(page: Any, base: str) -> None:
    """Log in as :data:`USERNAME` from the login page the dashboard redirects to."""
    page.goto(f"{base}/")
    assert "/accounts/login/" in page.url
    page.fill("#id_username", USERNAME)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/")


def off_loop(function: Callable[..., T], *args: Any) -> T:
    """Run ``function`` in a thread without an event loop: ingestion publishes live events with
    ``async_to_sync``, which refuses to run beside sync Playwright's loop."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(function, *args).result()
