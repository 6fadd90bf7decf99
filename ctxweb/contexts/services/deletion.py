"""Deleting what ctxweb stores: a session (:func:`session_delete`) with everything only it holds,
the sessions a project's retention has expired (:func:`sessions_expire`), and the import files
and jobs past theirs (:func:`imports_expire`).

A failed import keeps its uploaded file (raw, secrets unmasked) until one of the sessions the file
holds is deleted (the deletion drops it, in the same transaction) or ``CTXWEB_FAILED_IMPORT_HOURS``
have passed; a project's retention also deletes its import jobs finished before its cutoff.

A session's turns, operations and managed contexts go with it (cascades); its artifacts, and the
messages and tool sets that no other session of the project refers to, are deleted with it, in
the same transaction. An artifact that a message kept for another session still points at
(``[EXTERNALIZED:id]`` in a message two sessions share: an agent that continued from its managed
context, then forked) stays, as a project's artifact, until no kept message points at it.

A project's deletion deletes everything in it (its cascades; the links from turns and managed
contexts to messages are ``RESTRICT``, which a cascade from the same deletion passes).
"""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from compaction.regions import find_artifact_pointers
from ctxweb.accounts.models import Project
from ctxweb.contexts import events
from ctxweb.contexts.models import (
    Artifact,
    AuditEvent,
    ImportJob,
    ManagedContext,
    Message,
    Operation,
    Session,
    ToolSet,
    Turn,
    UnreadCall,
)
from ctxweb.contexts.selectors.artifacts import keys_named
from ctxweb.contexts.services._recent import _recent_forget
from ctxweb.contexts.services._rewrites import _rewrites_forget
from ctxweb.contexts.services.audit import RETENTION, audit_record
from ctxweb.contexts.services.unread import unread_calls_delete

logger = logging.getLogger(__name__)

#: Rows deleted per statement (SQLite takes at most 32,766 parameters).
_BATCH = 1_000


@dataclass(frozen=True)
class Deleted:
    """What one deletion removed, by kind of row."""

    turns: int
    operations: int
    managed_contexts: int
    artifacts: int
    messages: int
    toolsets: int
    #: Failed imports' uploaded files dropped because they hold the session.
    uploads: int = 0
    #: Calls kept unread on the session, or on the project naming the session.
    unread_calls: int = 0

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


def _referenced(turns: Any, managed: Any) -> tuple[set[int], set[int]]:
    """The message ids and tool set ids that ``turns`` and ``managed`` (querysets) refer to."""
    messages: set[int] = set()
    toolsets: set[int] = set()
    rows = itertools.chain(
        turns.values_list("tail", "system_id", "toolset_id").iterator(chunk_size=2_000),
        managed.values_list("message_ids", "system_id", "toolset_id").iterator(chunk_size=2_000),
    )
    for ids, system_id, toolset_id in rows:
        messages.update(ids)
        if system_id is not None:
            messages.add(system_id)
        if toolset_id is not None:
            toolsets.add(toolset_id)
    return messages, toolsets


def _delete_ids(model: Any, ids: Iterable[int]) -> int:
    wanted = sorted(ids)
    deleted = 0
    for start in range(0, len(wanted), _BATCH):
        batch = model.objects.filter(pk__in=wanted[start : start + _BATCH]).only("id")
        count, _ = batch.delete()
        deleted += count
    return deleted


def _pointed_at(message_ids: set[int], keys: set[str]) -> set[str]:
    """The artifact ``keys`` that messages ``message_ids`` point at."""
    found: set[str] = set()
    if not keys:
        return found
    wanted = sorted(message_ids)
    ordered = sorted(keys)
    for start in range(0, len(wanted), _BATCH):
        rows = Message.objects.filter(pk__in=wanted[start : start + _BATCH]).values_list(
            "data", flat=True
        )
        for data in rows:
            text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
            if "EXTERNALIZED" in text or any(key in text for key in keys):
                # a pointer names its key whole or, as ctxweb-auto writes it, by a short id
                found |= keys_named((key for _, _, key in find_artifact_pointers(text)), ordered)
    return found


def _session_delete(session: Session) -> Deleted:
    """Delete ``session`` and what only it holds (inside the caller's transaction)."""
    turns = Turn.objects.filter(session=session)
    managed = ManagedContext.objects.filter(session=session)
    mine, my_toolsets = _referenced(turns, managed)
    # Turns store their message ids as deltas: a keyframe's tail is its whole list, a later
    # turn's tail what it adds, so the union of tails is every id the session refers to.
    others = Turn.objects.filter(session__project_id=session.project_id).exclude(session=session)
    other_managed = ManagedContext.objects.filter(session__project_id=session.project_id).exclude(
        session=session
    )
    shared, shared_toolsets = _referenced(others, other_managed)
    counts = {
        "turns": turns.count(),
        "operations": session.operations.count(),
        "managed_contexts": managed.count(),
    }
    candidates = Artifact.objects.filter(
        Q(session=session) | Q(session__isnull=True), project_id=session.project_id
    )
    pointed = _pointed_at(shared, set(candidates.values_list("key", flat=True)))
    artifacts, _ = candidates.exclude(key__in=pointed).delete()
    # a call kept before its session existed names it without a link
    unread, _ = UnreadCall.objects.filter(
        Q(session=session) | Q(session__isnull=True, external_id=session.external_id),
        project_id=session.project_id,
    ).delete()
    session.delete()  # turns, operations, managed contexts: cascades; kept artifacts: no session
    messages = _delete_ids(Message, mine - shared)
    toolsets = _delete_ids(ToolSet, my_toolsets - shared_toolsets)
    uploads = _uploads_drop(project_id=session.project_id, external_id=session.external_id)
    return Deleted(
        turns=counts["turns"],
        operations=counts["operations"],
        managed_contexts=counts["managed_contexts"],
        artifacts=artifacts,
        messages=messages,
        toolsets=toolsets,
        uploads=uploads,
        unread_calls=unread,
    )


def _uploads_drop(*, project_id: int, external_id: str) -> int:
    """Drop the uploaded files of the project's failed imports that hold session
    ``external_id`` (as the job noted once it parsed the file); how many."""
    held = (
        ImportJob.objects.filter(project_id=project_id, status=ImportJob.Status.FAILED)
        .exclude(data=b"")
        .values_list("pk", "result")
    )
    jobs = [pk for pk, result in held if external_id in _held_sessions(result)]
    return ImportJob.objects.filter(pk__in=jobs).update(data=b"") if jobs else 0


def _held_sessions(result: Any) -> list[str]:
    ids = result.get("external_ids") if isinstance(result, dict) else None
    return [i for i in ids if isinstance(i, str)] if isinstance(ids, list) else []


def session_delete(*, session: Session, actor: Any = None, action: str = "") -> Deleted:
    """Delete ``session``, its turns, operations, managed contexts and artifacts, and every
    message and tool set no other session of its project shares, in one transaction; record
    it in the audit log (``actor``: the user or API key that asked)."""
    external_id, project_id = session.external_id, session.project_id
    with transaction.atomic():
        locked = Session.objects.select_for_update().filter(pk=session.pk).first()
        if locked is None:  # deleted meanwhile
            return Deleted(0, 0, 0, 0, 0, 0)
        session_pk = locked.pk  # None once deleted
        deleted = _session_delete(locked)
        transaction.on_commit(lambda: events.session_deleted(session_pk))
        audit_record(
            project_id=project_id,
            action=action or AuditEvent.Action.SESSION_DELETE,
            actor=actor,
            session_external_id=external_id,
            detail=deleted.as_dict(),
        )
    _recent_forget((project_id, external_id))
    _rewrites_forget(project_id, external_id)  # other processes drop theirs on their next call
    return deleted


def project_delete(*, project: Project) -> dict[str, int]:
    """Delete ``project`` and everything in it, in one transaction: each kind of row in one
    statement, dependents first, no content loaded (Django's cascade would load every message
    to check the links to it)."""
    project_id = project.pk
    with transaction.atomic():
        sessions = Session.objects.filter(project=project)
        session_pks = list(sessions.values_list("pk", flat=True))
        transaction.on_commit(lambda: [events.session_deleted(pk) for pk in session_pks])
        counts = {
            "turns": Turn.objects.filter(session__in=sessions).delete()[0],
            "managed_contexts": ManagedContext.objects.filter(session__in=sessions).delete()[0],
            "artifacts": Artifact.objects.filter(project=project).delete()[0],
            "operations": Operation.objects.filter(session__in=sessions).only("id").delete()[0],
        }
        counts["sessions"] = sessions.only("id").delete()[0]
        counts["messages"] = Message.objects.filter(project=project).only("id").delete()[0]
        counts["toolsets"] = ToolSet.objects.filter(project=project).delete()[0]
        counts["import_jobs"] = ImportJob.objects.filter(project=project).only("id").delete()[0]
        project.delete()
    _rewrites_forget(project_id)
    return counts


def sessions_expire(*, now: Any = None) -> dict[str, int]:
    """Delete the sessions idle for longer than their project's ``retention_days``, one
    transaction each; returns how many per project name."""
    now = now or timezone.now()
    expired: dict[str, int] = {}
    for project in Project.objects.filter(retention_days__isnull=False):
        cutoff = now - timedelta(days=project.retention_days or 0)
        stale = Session.objects.filter(project=project, last_activity_at__lt=cutoff)
        for session in stale.only("id", "external_id", "project_id").iterator():
            session_delete(
                session=session, actor=RETENTION, action=AuditEvent.Action.SESSION_EXPIRE
            )
            expired[project.name] = expired.get(project.name, 0) + 1
    if expired:
        logger.info("retention deleted sessions: %s", expired)
    return expired


def imports_expire(*, now: Any = None) -> dict[str, int]:
    """Drop the uploaded files of imports that failed more than ``CTXWEB_FAILED_IMPORT_HOURS``
    ago, fail (and drop the file of) imports queued or running for longer than that (no import
    runs that long: its worker is gone), and delete the import jobs of projects with a
    ``retention_days`` finished before their cutoff, and the unread calls kept before it (those
    on a session usually went with it). Returns how many files, jobs and calls went."""
    now = now or timezone.now()
    cutoff = now - timedelta(hours=int(settings.CTXWEB_FAILED_IMPORT_HOURS))
    failed = ImportJob.objects.filter(status=ImportJob.Status.FAILED, finished_at__lt=cutoff)
    uploads = failed.exclude(data=b"").update(data=b"")
    stuck = ImportJob.objects.filter(
        status__in=[ImportJob.Status.QUEUED, ImportJob.Status.RUNNING], created_at__lt=cutoff
    )
    uploads += stuck.update(
        status=ImportJob.Status.FAILED,
        error=f"not finished within {settings.CTXWEB_FAILED_IMPORT_HOURS} hours: its worker was"
        " lost; the file was deleted (import it again: it resumes)",
        finished_at=now,
        data=b"",
    )
    jobs = unread = 0
    kept = Project.objects.filter(retention_days__isnull=False).only("id", "retention_days")
    for project in kept:
        expired = now - timedelta(days=project.retention_days or 0)
        jobs += (
            ImportJob.objects.filter(project=project, finished_at__lt=expired)
            .only("id")
            .delete()[0]
        )
        unread += unread_calls_delete(project=project, before=expired)
    if uploads or jobs or unread:
        logger.info(
            "retention dropped %d import files, deleted %d import jobs and %d unread calls",
            uploads,
            jobs,
            unread,
        )
    return {"uploads": uploads, "jobs": jobs, "unread_calls": unread}
