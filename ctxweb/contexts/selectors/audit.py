"""Reads of the audit log: a project's entries, newest first."""

from __future__ import annotations

from django.db.models import QuerySet

from ctxweb.accounts.models import Project
from ctxweb.contexts.models import AuditEvent


def audit_list(*, project: Project, action: str = "") -> QuerySet[AuditEvent]:
    """The project's audit entries, newest first, of one ``action`` when given."""
    events = AuditEvent.objects.filter(project=project).order_by("-created_at", "-pk")
    if action:
        events = events.filter(action=action)
    return events
