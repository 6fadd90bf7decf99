"""The admin's view of stored sessions and the audit log. Deleting a session or a project here
goes through the deletion services (what only it holds goes too; the audit log records it)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from ctxweb.contexts.models import AuditEvent, Session
from ctxweb.contexts.services import deletion


@admin.register(Session)
class SessionAdmin(admin.ModelAdmin[Session]):
    COLUMNS = ("external_id", "project", "model", "turn_count", "secret_count", "last_activity_at")
    list_display = COLUMNS
    list_filter = ["project"]
    search_fields = ["external_id", "model"]
    fields = COLUMNS
    readonly_fields = COLUMNS

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> Any:
        """What goes, counted, without loading every turn to list it."""
        sessions = list(objs)
        summary = [
            f"{s}: {s.turn_count} turns, their operations, managed contexts and artifacts, and"
            " the messages no other session of its project shares"
            for s in sessions
        ]
        return summary, {"sessions": len(sessions)}, set(), []

    def delete_model(self, request: HttpRequest, obj: Session) -> None:
        deletion.session_delete(session=obj, actor=request.user)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Session]) -> None:
        for session in queryset:
            deletion.session_delete(session=session, actor=request.user)


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin[AuditEvent]):
    COLUMNS = (
        "created_at",
        "project",
        "action",
        "actor_name",
        "session_external_id",
        "operation_id",
    )
    list_display = COLUMNS
    list_filter = ["action", "project"]
    search_fields = ["session_external_id", "actor_name"]
    readonly_fields = (*COLUMNS, "actor", "detail")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
