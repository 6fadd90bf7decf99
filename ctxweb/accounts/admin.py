from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from ctxweb.accounts.models import ApiKey, Membership, Project
from ctxweb.contexts.services import deletion


class MembershipInline(admin.TabularInline[Membership, Project]):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin[Project]):
    list_display = ["name", "mask_secrets", "retention_days", "created_at"]
    search_fields = ["name"]
    inlines = [MembershipInline]

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> Any:
        """What goes, counted (Django's cascade would load every row to list it, and reads the
        RESTRICT links from turns to messages as protecting them)."""
        projects = list(objs)
        summary = [
            f"{p}: {p.sessions.count()} sessions, their turns, operations and artifacts,"
            f" {p.messages.count()} messages, {p.api_keys.count()} API keys"
            for p in projects
        ]
        return summary, {"projects": len(projects)}, set(), []

    def delete_model(self, request: HttpRequest, obj: Project) -> None:
        deletion.project_delete(project=obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Project]) -> None:
        for project in queryset:
            deletion.project_delete(project=project)


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin[ApiKey]):
    list_display = ["prefix", "project", "role", "name", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["role", "project"]
    search_fields = ["prefix", "name"]
    readonly_fields = ["prefix", "key_hash", "created_at", "last_used_at"]

    def has_add_permission(self, request: object) -> bool:
        # A key's raw value must be shown once: create keys with `create_api_key`.
        return False
