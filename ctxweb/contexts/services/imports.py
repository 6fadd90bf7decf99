"""Transcript import: a transcript file's sessions stored as sessions of turns.

The file is parsed whole first (:func:`compaction.transcripts.parse_transcript`), so a malformed
file writes nothing. Each session is then stored in its own transaction, whole or not at all, one
turn per model call through :func:`~ctxweb.contexts.services.turn_ingest`. A turn's ``turn_id`` is
its position in the transcript session (``import:<n>``), so importing the same file again creates
no turn, and importing a longer version of a file (a session that went on) adds only the new turns.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from compaction.errors import FormatError
from compaction.messages import message_to_dict
from compaction.transcripts import TRANSCRIPT_FORMATS as TRANSCRIPT_FORMATS  # for interfaces
from compaction.transcripts import ImportedSession, detect_format, parse_transcript
from ctxweb.accounts.models import Project
from ctxweb.contexts.models import Session, Turn
from ctxweb.contexts.services import turn_ingest

#: The longest ``external_id`` a session may have (``Session.external_id``).
EXTERNAL_ID_MAX = Session._meta.get_field("external_id").max_length or 200

#: An imported turn's ``turn_id`` is this and its position in the transcript session.
TURN_ID_PREFIX = "import:"

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class SessionImport:
    """What importing one transcript session did.

    ``turns`` were created, ``skipped`` were already stored (a re-import). ``peak_tokens`` is the
    largest turn total and ``compactions`` the compaction events over the session's imported turns,
    skipped ones included.
    """

    external_id: str
    turns: int
    skipped: int
    peak_tokens: int = 0
    compactions: int = 0


@dataclass(frozen=True)
class ImportResult:
    """What importing one transcript file did: its format and one entry per session, in order."""

    format: str
    sessions: list[SessionImport]

    @property
    def turns(self) -> int:
        return sum(s.turns for s in self.sessions)

    @property
    def skipped(self) -> int:
        return sum(s.skipped for s in self.sessions)


def _external_id(prefix: str, session: ImportedSession, position: int) -> str:
    external_id = prefix + session.external_id
    if not external_id:
        raise FormatError(f"sessions.{position}.external_id", "is empty")
    if len(external_id) > EXTERNAL_ID_MAX:
        raise FormatError(
            f"sessions.{position}.external_id",
            f"{external_id[:40]!r}… is longer than {EXTERNAL_ID_MAX} characters with its prefix",
        )
    if "\x00" in external_id:
        raise FormatError(f"sessions.{position}.external_id", "contains a NUL character")
    return external_id


def _imported_turns(*, project: Project, external_id: str) -> dict[str, tuple[int, list[Any]]]:
    """The session's turns already imported: ``turn_id`` -> (total tokens, events)."""
    rows = Turn.objects.filter(
        session__project=project,
        session__external_id=external_id,
        turn_id__startswith=TURN_ID_PREFIX,
    ).values_list("turn_id", "total_tokens", "events")
    return {turn_id: (total, events) for turn_id, total, events in rows if turn_id}


def _session_import(
    *,
    project: Project,
    session: ImportedSession,
    external_id: str,
    position: int,
    on_turn: Callable[[], None],
) -> SessionImport:
    created = skipped = peak = compactions = 0
    with transaction.atomic():
        # A re-import skips what is stored without rebuilding it; turn_ingest still checks the
        # turn_id under the session's lock, so a concurrent import of the same file is safe.
        known = _imported_turns(project=project, external_id=external_id)
        for index, turn in enumerate(session.turns):
            turn_id = f"{TURN_ID_PREFIX}{index}"
            if turn_id in known:
                total, events = known[turn_id]
                skipped += 1
            else:
                try:
                    result = turn_ingest(
                        project=project,
                        external_id=external_id,
                        context=turn.context,
                        model=session.model,
                        response=[message_to_dict(m) for m in turn.response] or None,
                        usage=turn.usage,
                        turn_id=turn_id,
                        unknown=sorted(turn.unknown),
                        events=turn.events,
                        source=session.source,
                    )
                except FormatError as error:
                    # Name the turn; the sessions before this one stay stored.
                    raise FormatError(
                        f"sessions.{position}.turns.{index}.{error.path}".rstrip("."),
                        f"{error.reason} (session {external_id!r}; earlier sessions were imported)",
                    ) from error
                total, events = result.turn.total_tokens, result.turn.events
                if result.created:
                    created += 1
                else:
                    skipped += 1
            peak = max(peak, total)
            compactions += sum(1 for e in events if e.get("type") == "compaction")
            on_turn()
    return SessionImport(external_id, created, skipped, peak, compactions)


def transcript_import(
    *,
    project: Project,
    data: bytes,
    name: str,
    format: str = "auto",
    external_id_prefix: str = "",
    progress: Progress | None = None,
) -> ImportResult:
    """Import a transcript file's sessions into ``project``; idempotent per session and turn.

    Args:
        project: the project that owns the new sessions.
        data: the file's bytes.
        name: the file name (a format detection hint, and the session id when the file has none).
        format: a transcript format of :data:`compaction.transcripts.TRANSCRIPT_FORMATS`, or
            ``"auto"``.
        external_id_prefix: put before every session's own id (e.g. ``"import/"``).
        progress: called as ``progress(done, total)`` after every turn, with the file's turn count.

    Raises:
        FormatError: unknown format or malformed content (nothing stored), or a turn that cannot be
            stored (its session is not stored; the sessions before it are).

    Example:
        >>> result = transcript_import(project=p, data=path.read_bytes(), name=path.name)
        >>> [(s.external_id, s.turns, s.skipped) for s in result.sessions]
        [('task-0-trial-0', 15, 0), ('task-1-trial-0', 5, 0), ...]
    """
    if format == "auto":
        format = detect_format(name, data)
    sessions = parse_transcript(data, format=format, name=name)
    ids = [_external_id(external_id_prefix, s, i) for i, s in enumerate(sessions)]
    total = sum(len(s.turns) for s in sessions)
    done = 0

    def on_turn() -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(done, total)

    if progress is not None:
        progress(0, total)
    results = [
        _session_import(
            project=project, session=s, external_id=external_id, position=i, on_turn=on_turn
        )
        for i, (s, external_id) in enumerate(zip(sessions, ids, strict=True))
    ]
    return ImportResult(format, results)


__all__ = ["ImportResult", "SessionImport", "transcript_import"]
