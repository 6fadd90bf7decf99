"""Transcript import: a transcript file's sessions stored as sessions of turns.

The file is parsed whole first (:func:`compaction.transcripts.parse_transcript`), so a malformed
file writes nothing. Its sessions are then stored one turn per model call through
:func:`~ctxweb.contexts.services.turn_ingest`, committed every :data:`CHUNK_TURNS` turns so that
no import holds the database's write lock for long. A turn's ``turn_id`` is
its position in the transcript session (``import:<n>``), so importing the same file again creates
no turn, and importing a longer version of a file (a session that went on) adds only the new turns.

Each turn is dated by the transcript's timestamp of its call (``Turn.occurred_at``), so the
project overview counts it on the day it happened, not the day of the import; importing a file
again dates the turns an older ctxweb stored undated, and rebuilds their session's rollups.
"""

from __future__ import annotations

import datetime
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from compaction.errors import FormatError
from compaction.messages import message_to_dict
from compaction.transcripts import TRANSCRIPT_FORMATS as TRANSCRIPT_FORMATS  # for interfaces
from compaction.transcripts import ImportedSession, detect_format, parse_transcript
from ctxweb.accounts.models import Project
from ctxweb.contexts.models import ImportJob, Session, Turn
from ctxweb.contexts.services import turn_ingest
from ctxweb.contexts.services._background import schedule_after_commit
from ctxweb.contexts.services.attribution import attribution_rebuild
from ctxweb.contexts.services.moments import occurred_at_parse

logger = logging.getLogger(__name__)

#: The Celery task that runs an import job, sent by name.
IMPORT_TASK = "ctxweb.tasks.import_run"
#: A running job writes its progress at most this often (seconds), besides its first and last.
PROGRESS_EVERY = 0.5

#: The longest ``external_id`` a session may have (``Session.external_id``).
EXTERNAL_ID_MAX = Session._meta.get_field("external_id").max_length or 200

#: An imported turn's ``turn_id`` is this and its position in the transcript session.
TURN_ID_PREFIX = "import:"

#: Turns stored per transaction: a long session never holds the database's write lock for long
#: (on SQLite, every other writer waits for it), and a failed import resumes after its last chunk.
CHUNK_TURNS = 50

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


#: A stored imported turn: its total tokens, its events and whether it is dated (occurred_at).
_Known = tuple[int, list[Any], bool]


def _imported_turns(*, project: Project, external_id: str) -> dict[str, _Known]:
    """The session's turns already imported: ``turn_id`` -> (total tokens, events, dated)."""
    rows = Turn.objects.filter(
        session__project=project,
        session__external_id=external_id,
        turn_id__startswith=TURN_ID_PREFIX,
    ).values_list("turn_id", "total_tokens", "events", "occurred_at")
    return {
        turn_id: (total, events, occurred is not None)
        for turn_id, total, events, occurred in rows
        if turn_id
    }


def _turns_date(
    *, project: Project, external_id: str, moments: dict[str, datetime.datetime]
) -> None:
    """Date the stored turns of ``moments`` (``turn_id`` -> when it happened), imported before
    turns were dated, and rebuild the session's rollups so that its days follow."""
    session = Session.objects.get(project=project, external_id=external_id)
    turns = list(Turn.objects.filter(session=session, turn_id__in=moments).only("pk", "turn_id"))
    for turn in turns:
        assert turn.turn_id is not None
        turn.occurred_at = moments[turn.turn_id]
    with transaction.atomic():
        Turn.objects.bulk_update(turns, ["occurred_at"], batch_size=500)
        attribution_rebuild(session=session)


def _session_import(
    *,
    project: Project,
    session: ImportedSession,
    external_id: str,
    position: int,
    on_turn: Callable[[], None],
) -> SessionImport:
    created = skipped = peak = compactions = 0
    # A re-import skips what is stored without rebuilding it; turn_ingest still checks the
    # turn_id under the session's lock, so a concurrent import of the same file is safe.
    known = _imported_turns(project=project, external_id=external_id)
    # Turns stored before turns were dated, which the file dates: dated once it is imported.
    undated: dict[str, datetime.datetime] = {}
    for start in range(0, len(session.turns), CHUNK_TURNS):
        with transaction.atomic():
            counted = _chunk_import(
                project=project,
                session=session,
                external_id=external_id,
                position=position,
                start=start,
                known=known,
                on_turn=on_turn,
                undated=undated,
            )
        created += counted[0]
        skipped += counted[1]
        peak = max(peak, counted[2])
        compactions += counted[3]
    if undated:
        _turns_date(project=project, external_id=external_id, moments=undated)
    return SessionImport(external_id, created, skipped, peak, compactions)


def _chunk_import(
    *,
    project: Project,
    session: ImportedSession,
    external_id: str,
    position: int,
    start: int,
    known: dict[str, _Known],
    on_turn: Callable[[], None],
    undated: dict[str, datetime.datetime],
) -> tuple[int, int, int, int]:
    """Store turns ``start`` to ``start + CHUNK_TURNS`` of ``session``, in the caller's
    transaction: (created, skipped, peak tokens, compaction events). Stored turns without a
    date that the file dates are added to ``undated``."""
    created = skipped = peak = compactions = 0
    for index in range(start, min(start + CHUNK_TURNS, len(session.turns))):
        turn = session.turns[index]
        turn_id = f"{TURN_ID_PREFIX}{index}"
        if turn_id in known:
            total, events, dated = known[turn_id]
            skipped += 1
            moment = None if dated else occurred_at_parse(turn.timestamp)
            if moment is not None:
                undated[turn_id] = moment
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
                    occurred_at=turn.timestamp,
                )
            except FormatError as error:
                # Name the turn; what was committed before it stays stored.
                raise FormatError(
                    f"sessions.{position}.turns.{index}.{error.path}".rstrip("."),
                    f"{error.reason} (session {external_id!r}; what came before was imported,"
                    " and importing again resumes after it)",
                ) from error
            total, events = result.turn.total_tokens, result.turn.events
            if result.created:
                created += 1
            else:
                skipped += 1
        peak = max(peak, total)
        compactions += sum(1 for e in events if e.get("type") == "compaction")
        on_turn()
    return created, skipped, peak, compactions


def transcript_import(
    *,
    project: Project,
    data: bytes,
    name: str,
    format: str = "auto",
    external_id_prefix: str = "",
    progress: Progress | None = None,
    parsed: Callable[[str, list[str]], None] | None = None,
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
        parsed: called as ``parsed(format, external_ids)`` once the file is parsed, before any
            turn is stored: the sessions the file holds.

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
    if parsed is not None:
        parsed(format, ids)

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


def import_result_data(result: ImportResult) -> dict[str, Any]:
    """An import's result as stored on its job and returned by the API."""
    return {
        "format": result.format,
        "sessions": [
            {
                "external_id": s.external_id,
                "turns": s.turns,
                "skipped": s.skipped,
                "peak_tokens": s.peak_tokens,
                "compactions": s.compactions,
            }
            for s in result.sessions
        ],
    }


def import_job_create(
    *,
    project: Project,
    data: bytes,
    name: str,
    format: str = "auto",
    prefix: str = "",
    actor: Any = None,
    background: bool = True,
) -> ImportJob:
    """Record an uploaded transcript's import job (the file kept with it until imported).

    With ``background`` the job runs once the caller's transaction commits: on a Celery worker,
    or in a thread of this process in the embedded shape. Without, the caller runs it
    (:func:`import_job_run`), as the API does for small files. ``actor`` is the dashboard user
    or the API key that uploaded it.

    Raises:
        FormatError: ``format`` is neither ``auto`` nor a transcript format.
    """
    if format != "auto" and format not in TRANSCRIPT_FORMATS:
        raise FormatError("format", f"unknown transcript format {format!r}")
    user = actor if getattr(actor, "is_authenticated", False) else None
    key_prefix = getattr(actor, "prefix", "") if user is None and actor is not None else ""
    job = ImportJob.objects.create(
        project=project,
        name=(name or "upload")[:255],
        format=format,
        prefix=prefix,
        size=len(data),
        created_by=user,
        key_prefix=key_prefix,
        data=data,
    )
    if background:
        schedule_after_commit(
            task=IMPORT_TASK,
            job_id=job.pk,
            run=lambda pk: import_job_run(job_id=pk),
            unsent=lambda pk, error: _import_fail(pk, f"could not reach the task broker: {error}"),
        )
    return job


def import_start(
    *,
    project: Project,
    data: bytes,
    name: str,
    format: str = "auto",
    prefix: str = "",
    actor: Any = None,
    background: bool = False,
) -> ImportJob:
    """Import a transcript now if it is small (up to ``CTXWEB_IMPORT_INLINE_BYTES``) and
    ``background`` is not asked for, else queue it; the job, finished or queued.

    Raises:
        FormatError: ``format`` is neither ``auto`` nor a transcript format.
    """
    from django.conf import settings

    later = background or len(data) > int(settings.CTXWEB_IMPORT_INLINE_BYTES)
    job = import_job_create(
        project=project,
        data=data,
        name=name,
        format=format,
        prefix=prefix,
        actor=actor,
        background=later,
    )
    if later:
        return job
    done = import_job_run(job_id=job.pk)
    assert done is not None  # created just now
    return done


def import_job_run(*, job_id: int) -> ImportJob | None:
    """Run import job ``job_id``: parse its file, note the sessions it holds
    (``result["external_ids"]``), store them in chunks, record progress, then the result (the
    file dropped) or the error. A failed job's file is kept until one of the sessions it holds is
    deleted, or ``CTXWEB_FAILED_IMPORT_HOURS`` have passed
    (:func:`~ctxweb.contexts.services.deletion.imports_expire`); importing it again resumes.

    A job already finished is left as it is; a running one is run again (a worker lost with it
    delivers it again: turns already stored are skipped). Returns the job, or None if it is gone.
    """
    started = timezone.now()
    claimed = ImportJob.objects.filter(
        pk=job_id, status__in=[ImportJob.Status.QUEUED, ImportJob.Status.RUNNING]
    ).update(status=ImportJob.Status.RUNNING, started_at=started)
    job = ImportJob.objects.select_related("project").filter(pk=job_id).first()
    if job is None or not claimed:
        return ImportJob.objects.defer("data").filter(pk=job_id).first()
    last = 0.0
    counts: dict[str, Any] = {"turns_done": 0}

    def progress(done: int, total: int) -> None:
        nonlocal last
        counts.update(turns_done=done, turns_total=total)
        now = time.monotonic()
        if done in (0, total) or now - last >= PROGRESS_EVERY:
            last = now
            ImportJob.objects.filter(pk=job_id).update(**counts)

    def parsed(format: str, external_ids: list[str]) -> None:
        # Known before any turn is stored: deleting any of these sessions deletes the file
        ImportJob.objects.filter(pk=job_id).update(
            result={"format": format, "external_ids": external_ids}
        )

    try:
        result = transcript_import(
            project=job.project,
            data=bytes(job.data),
            name=job.name,
            format=job.format,
            external_id_prefix=job.prefix,
            progress=progress,
            parsed=parsed,
        )
    except FormatError as error:
        return _import_fail(job_id, error.reason, field=error.path, **counts)
    except Exception as error:
        logger.exception("import job %s failed", job_id)
        return _import_fail(job_id, f"unexpected error: {error}", **counts)
    ImportJob.objects.filter(pk=job_id).update(
        status=ImportJob.Status.SUCCEEDED,
        result=import_result_data(result),
        turns_done=result.turns + result.skipped,
        turns_total=result.turns + result.skipped,
        finished_at=timezone.now(),
        data=b"",
    )
    return ImportJob.objects.defer("data").get(pk=job_id)


def _import_fail(job_id: int, error: str, *, field: str = "", **counts: Any) -> ImportJob | None:
    ImportJob.objects.filter(pk=job_id).update(
        **counts,
        status=ImportJob.Status.FAILED,
        error=error,
        error_field=field[:300],
        finished_at=timezone.now(),
    )
    return ImportJob.objects.defer("data").filter(pk=job_id).first()


__all__ = [
    "IMPORT_TASK",
    "ImportResult",
    "SessionImport",
    "import_job_create",
    "import_job_run",
    "import_result_data",
    "import_start",
    "transcript_import",
]
