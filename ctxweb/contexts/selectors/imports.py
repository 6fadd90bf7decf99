"""Import jobs: a project's, newest first, and one of them (never the file they carry)."""

from __future__ import annotations

from django.db.models import QuerySet

from ctxweb.accounts.models import Project
from ctxweb.contexts.models import ImportJob


def import_job_list(*, project: Project) -> QuerySet[ImportJob]:
    """The project's import jobs, newest first."""
    return ImportJob.objects.filter(project=project).defer("data").order_by("-created_at", "-pk")


def import_job_get(*, project: Project, job_id: int) -> ImportJob | None:
    """Import job ``job_id`` if it belongs to ``project`` (another project's is not found)."""
    return ImportJob.objects.filter(project=project, pk=job_id).defer("data").first()
