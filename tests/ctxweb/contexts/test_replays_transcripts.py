"""Every real transcript in ``../shared/data/transcripts``, imported, and every session of it
replayed to its last turn under every preset and as recorded, through the service a user's replay
runs (``replay_create``, its columns run inline as the embedded shape's background thread runs
them). Skipped with the reason when the folder is absent (a failure under ``CI=true``).

Each session's window is set just above its peak (5% over it, plus the output reserve), so that
every preset's trigger fires on real content: on their own windows (128K to 200K tokens) these
sessions are too short for most presets to compact at all.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ctxweb.contexts.models import Replay, Session, Turn
from ctxweb.contexts.services import replays
from ctxweb.contexts.services.imports import transcript_import
from tests.support.replays import column_problems
from tests.support.transcripts import find_transcripts
from tests.support.world import World

pytestmark = pytest.mark.django_db

_FOUND = find_transcripts()
#: Every transcript file (relative to the folder); one placeholder when the folder is absent, for
#: the ``transcripts`` fixture to skip with its reason.
FILES = (
    sorted(
        str(p.relative_to(_FOUND))
        for p in _FOUND.rglob("*")
        if p.is_file() and p.name != "README.md"
    )
    if _FOUND is not None and _FOUND.is_dir()
    else ["absent"]
)


@pytest.fixture(autouse=True)
def inline_tasks(settings: Any) -> None:
    settings.CTXWEB_TASKS_INLINE = True
    settings.CTXWEB_REPLAYS_ACTIVE_PER_PROJECT = 10


def tighten(session: Session) -> list[int]:
    """Set the session's window just above its peak; its stored totals, in order."""
    stored = list(
        Turn.objects.filter(session=session)
        .order_by("index")
        .values_list("total_tokens", flat=True)
    )
    window = max(stored) * 21 // 20 + session.output_reserve
    Session.objects.filter(pk=session.pk).update(context_window=window)
    Turn.objects.filter(session=session).update(context_window=window)
    session.refresh_from_db()
    return stored


def test_the_transcripts_folder_is_read_whole(transcripts: Path) -> None:
    # The parametrization below found the folder the fixture finds, every file of it.
    files = sorted(str(p.relative_to(transcripts)) for p in transcripts.rglob("*") if p.is_file())
    assert [f for f in files if not f.endswith("README.md")] == FILES
    assert len(FILES) >= 20


@pytest.mark.parametrize("relative", FILES)
def test_every_session_replays_to_the_end_under_every_preset(
    world: World, transcripts: Path, relative: str, django_capture_on_commit_callbacks: Any
) -> None:
    path = transcripts / relative
    imported = transcript_import(project=world.project, data=path.read_bytes(), name=path.name)
    assert imported.sessions, relative
    sessions = list(Session.objects.filter(project=world.project).order_by("pk"))
    assert len(sessions) == len(imported.sessions)
    compacting = beyond = reported = 0
    for session in sessions:
        stored = tighten(session)
        indexes = list(
            Turn.objects.filter(session=session).order_by("index").values_list("index", flat=True)
        )
        counted = list(
            Turn.objects.filter(session=session)
            .order_by("index")
            .values_list("counted_tokens", flat=True)
        )
        beyond += sum(total != count for total, count in zip(stored, counted, strict=True))
        usage = Turn.objects.filter(session=session, reported_input_tokens__isnull=False)
        reported += usage.count()
        presets = replays.replay_presets(session=session)
        assert len(presets) == 11, (session.external_id, [p["label"] for p in presets])
        columns: list[dict[str, Any]] = []
        for batch in (presets[: replays.MAX_POLICIES], presets[replays.MAX_POLICIES :]):
            with django_capture_on_commit_callbacks(execute=True):
                replay = replays.replay_create(session=session, policies=batch)
            replay.refresh_from_db()
            where = (relative, session.external_id)
            assert replay.status == Replay.Status.SUCCEEDED, (*where, replay.error)
            assert replay.done == replay.total == len(stored) * (len(batch) + 1), where
            recorded, *replayed = replay.results
            # As recorded is the stored session exactly: every call's total, and the totals.
            assert [t["total"] for t in recorded["turns"]] == stored, where
            assert recorded["totals"]["input_tokens"] == sum(stored), where
            assert recorded["totals"]["peak_tokens"] == max(stored), where
            assert stored[-1] == session.last_total_tokens, where
            assert recorded["totals"]["compactions"] == recorded["facts_lost"]["count"] == 0
            assert [c["label"] for c in replayed] == [p["label"] for p in batch]
            columns += [recorded, *replayed]
        for column in columns:
            assert column_problems(column, indexes=indexes) == [], (relative, session.external_id)
        if len(stored) >= 4 and any(c["totals"]["compactions"] for c in columns):
            compacting += 1
    long = [s for s in sessions if s.turn_count >= 4]
    # The window just above the peak: some preset compacts every session of four calls or more.
    assert compacting == len(long), relative
    if relative.startswith("claude-code/") and reported:
        # Claude Code's files record no system prompt or tools: the usage the provider reported
        # counts more than the context ctxweb sees, and as recorded kept it (asserted above).
        assert beyond > 0, relative
