from django.contrib import admin

from ctxweb.accounts.models import ApiKey, Membership, Project


class MembershipInline(admin.TabularInline[Membership, Project]):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin[Project]):
    list_display = ["name", "created_at"]
    search_fields = ["name"]
    inlines = [MembershipInline]


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin[ApiKey]):
    list_display = ["prefix", "project", "role", "name", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["role", "project"]
    search_fields = ["prefix", "name"]
    readonly_fields = ["prefix", "key_hash", "created_at", "last_used_at"]

    def has_add_permission(self, request: object) -> bool:
        # A key's raw value must be shown once: create keys with `create_api_key`.
        return False
