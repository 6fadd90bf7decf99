"""Reads for projects, members and API keys; the one place access is decided."""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import QuerySet

from ctxweb.accounts.models import ApiKey, Membership, Project, hash_key


def api_key_get_active(*, raw_key: str) -> ApiKey | None:
    """The active key with this raw value, with its project, or None."""
    return (
        ApiKey.objects.select_related("project")
        .filter(key_hash=hash_key(raw_key), revoked_at__isnull=True)
        .first()
    )


def project_list_for_user(*, user: User | AnonymousUser) -> QuerySet[Project]:
    """The projects a user is a member of."""
    if not user.is_authenticated:
        return Project.objects.none()
    return Project.objects.filter(memberships__user=user).order_by("name")


def membership_get(*, user: User | AnonymousUser, project: Project) -> Membership | None:
    """The user's membership of a project, or None."""
    if not user.is_authenticated:
        return None
    return Membership.objects.filter(user=user, project=project).first()


def project_get_by_name(*, name: str) -> Project | None:
    """The project named ``name``, or None."""
    return Project.objects.filter(name=name).first()


def project_any_exists() -> bool:
    """Whether any project exists (an empty database has none)."""
    return Project.objects.exists()
