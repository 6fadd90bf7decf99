"""An import that fails halfway leaves nothing for ever (issue 34, item 5): its uploaded file, raw
with whatever secrets it holds, is dropped as soon as one of the sessions it holds is deleted,
and retention drops it ``CTXWEB_FAILED_IMPORT_HOURS`` after the failure; an import whose worker
was lost is failed and its file dropped after as long; a project's retention deletes its import
jobs too."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone

from ctxweb import tasks
from ctxweb.contexts.models import AuditEvent, ImportJob, Session
from tests.support.world import World

pytestmark = pytest.mark.django_db

SECRET = "AKIAIOSFODNN7EXAMPLE"


@pytest.fixture(autouse=True)
def inline_tasks(settings: Any) -> None:
    settings.CTXWEB_TASKS_INLINE = True
    settings.CTXWEB_FAILED_IMPORT_HOURS = 24


def transcript(*, bad: bool) -> bytes:
    """Two OpenAI-chat sessions: ``good`` (with a secret), then ``broken``, whose second call
    holds a NUL that cannot be stored when ``bad``."""
    good = [
        {"role": "user", "content": f"Deploy with key {SECRET} please."},
        {"role": "assistant", "content": "Deployed."},
    ]
    broken = [
        {"role": "user", "content": "step 0"},
        {"role": "assistant", "content": "ok 0"},
        {"role": "user", "content": "step 1" + ("\x00" if bad else "")},
        {"role": "assistant", "content": "ok 1"},
    ]
    return json.dumps(
        [{"id": "good", "messages": good}, {"id": "broken", "messages": broken}]
    ).encode()


def upload(world: World, data: bytes) -> Any:
    return world.api(world.ingest_key).post(
        "/api/v1/import", {"file": SimpleUploadedFile("t.json", data)}
    )


def failed_import(world: World) -> ImportJob:
    response = upload(world, transcript(bad=True))
    assert response.status_code == 400, response.content
    job = ImportJob.objects.get(project=world.project)
    assert job.status == ImportJob.Status.FAILED
    assert SECRET.encode() in bytes(job.data), "the failed import keeps its file (for now)"
    assert Session.objects.filter(project=world.project, external_id="good").exists()
    return job


def test_deleting_a_session_a_failed_import_holds_deletes_the_uploaded_file(
    world: World,
) -> None:
    job = failed_import(world)
    operator = world.api(world.operator_key)
    assert operator.delete("/api/v1/sessions/good").status_code == 204
    job.refresh_from_db()
    assert bytes(job.data) == b""
    entry = AuditEvent.objects.get(action="session.delete")
    assert entry.detail["uploads"] == 1
    # The job still says what happened; the file is gone.
    shown = world.api(world.ingest_key).get(f"/api/v1/imports/{job.pk}").json()
    assert shown["status"] == "failed"


def test_deleting_a_session_the_file_does_not_hold_keeps_it(world: World) -> None:
    job = failed_import(world)
    client = world.api(world.ingest_key)
    other = {
        "format": "openai-chat",
        "request": {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]},
    }
    posted = client.post(
        "/api/v1/sessions/unrelated/turns", data=json.dumps(other), content_type="application/json"
    )
    assert posted.status_code == 201
    assert world.api(world.operator_key).delete("/api/v1/sessions/unrelated").status_code == 204
    job.refresh_from_db()
    assert SECRET.encode() in bytes(job.data)


def test_another_projects_session_of_the_same_name_does_not_touch_the_file(
    world: World,
) -> None:
    job = failed_import(world)
    outsider = world.api(world.outsider_key)
    other = {
        "format": "openai-chat",
        "request": {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]},
    }
    posted = outsider.post(
        "/api/v1/sessions/good/turns", data=json.dumps(other), content_type="application/json"
    )
    assert posted.status_code == 201
    Session.objects.get(project=world.other_project, external_id="good")
    from ctxweb.contexts.services.deletion import session_delete

    session_delete(session=Session.objects.get(project=world.other_project, external_id="good"))
    job.refresh_from_db()
    assert SECRET.encode() in bytes(job.data)


def test_retention_deletes_a_failed_imports_file_after_the_setting(world: World) -> None:
    job = failed_import(world)
    tasks.sessions_expire()
    job.refresh_from_db()
    assert SECRET.encode() in bytes(job.data), "within CTXWEB_FAILED_IMPORT_HOURS: kept"
    ImportJob.objects.filter(pk=job.pk).update(finished_at=timezone.now() - timedelta(hours=25))
    tasks.sessions_expire()
    job.refresh_from_db()
    assert bytes(job.data) == b""
    assert job.status == ImportJob.Status.FAILED
    assert Session.objects.filter(project=world.project, external_id="good").exists(), (
        "the sessions it stored follow their project's retention, not the file's"
    )


def test_an_import_whose_worker_was_lost_is_failed_and_its_file_deleted(world: World) -> None:
    stuck = ImportJob.objects.create(
        project=world.project,
        name="t.json",
        size=len(transcript(bad=False)),
        data=transcript(bad=False),
        status=ImportJob.Status.RUNNING,
    )
    tasks.sessions_expire()
    stuck.refresh_from_db()
    assert stuck.status == ImportJob.Status.RUNNING, "a running import is left to run"
    ImportJob.objects.filter(pk=stuck.pk).update(created_at=timezone.now() - timedelta(hours=25))
    tasks.sessions_expire()
    stuck.refresh_from_db()
    assert (stuck.status, bytes(stuck.data)) == (ImportJob.Status.FAILED, b"")
    assert "24 hours" in stuck.error


def test_a_projects_retention_deletes_its_import_jobs_with_its_sessions(world: World) -> None:
    assert upload(world, transcript(bad=False)).status_code == 201
    job = ImportJob.objects.get(project=world.project)
    world.project.retention_days = 7
    world.project.save()
    tasks.sessions_expire()
    assert ImportJob.objects.filter(pk=job.pk).exists(), "finished within the retention"
    ImportJob.objects.filter(pk=job.pk).update(finished_at=timezone.now() - timedelta(days=8))
    Session.objects.filter(project=world.project).update(
        last_activity_at=timezone.now() - timedelta(days=8)
    )
    assert tasks.sessions_expire() == {"alpha": 2}
    assert not ImportJob.objects.filter(pk=job.pk).exists()
    assert not Session.objects.filter(project=world.project).exists()
