"""Fixtures shared by every test: where the real agent transcripts are."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

from tests.support.transcripts import MISSING, find_transcripts

# Property tests draw new examples on every local run (how today's rare counterexamples are found),
# and a failure prints the blob that replays it (@reproduce_failure). Under CI=true they draw the
# same examples every run, derived from each test: a clean clone's check is reproducible and does
# not turn red on a draw no one can replay.
settings.register_profile("dev", print_blob=True)
settings.register_profile("ci", derandomize=True, print_blob=True)
settings.load_profile("ci" if os.environ.get("CI") == "true" else "dev")


#: What a test uses when it touches the pass's database (pytest-django's fixtures).
DATABASE_FIXTURES = {
    "db",
    "transactional_db",
    "django_db_reset_sequences",
    "django_db_serialized_rollback",
    "live_server",
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test marked ``embedded_server`` is left out of the production pass (the Makefile), which
    runs the rest of ``tests/ctxweb`` again on PostgreSQL, Redis and Celery: one that touches the
    pass's database would lose that run unnoticed, so it is an error."""
    wrong = [
        item.nodeid
        for item in items
        if item.get_closest_marker("embedded_server")
        and (
            item.get_closest_marker("django_db")
            or DATABASE_FIXTURES & set(getattr(item, "fixturenames", ()))
        )
    ]
    if wrong:
        raise pytest.UsageError(
            "marked embedded_server but using the pass's database (the production pass would"
            " not run them): " + ", ".join(wrong)
        )


@pytest.fixture
def transcripts() -> Path:
    """The real transcripts folder; skips with a reason when it is absent (a user's clone).

    Under ``CI=true`` a missing folder is a failure, never a skip.
    """
    found = find_transcripts()
    if found is None or not found.is_dir():
        if os.environ.get("CI") == "true":
            pytest.fail(MISSING)
        pytest.skip(MISSING)
    return found
