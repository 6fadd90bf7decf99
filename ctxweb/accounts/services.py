"""Writes for projects, members and API keys."""

from __future__ import annotations

import secrets

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from ctxweb.accounts.models import ApiKey, KeyRole, Membership, Project, Role, hash_key

KEY_PREFIX = "ctx_"


@transaction.atomic
def project_create(*, name: str, owner: User | None = None) -> Project:
    """Create a project; its owner, if given, becomes an admin member."""
    project = Project.objects.create(name=name)
    if owner is not None:
        Membership.objects.create(project=project, user=owner, role=Role.ADMIN)
    return project


#: The roles an API key may have (``ingest`` posts and reads; ``operator`` may also apply).
KEY_ROLES: tuple[str, ...] = tuple(KeyRole.values)


def membership_set(*, project: Project, user: User, role: str) -> Membership:
    """Add a user to a project or change their role."""
    membership, _ = Membership.objects.update_or_create(
        project=project, user=user, defaults={"role": role}
    )
    return membership


def api_key_create(
    *, project: Project, role: str = KeyRole.INGEST, name: str = ""
) -> tuple[ApiKey, str]:
    """Create a key and return it with its raw value, which is never stored nor shown again."""
    raw = KEY_PREFIX + secrets.token_urlsafe(32)
    key = ApiKey.objects.create(
        project=project, name=name, prefix=raw[:12], key_hash=hash_key(raw), role=role
    )
    return key, raw


def api_key_revoke(*, key: ApiKey) -> ApiKey:
    """Revoke a key: it stops authenticating at once."""
    if key.revoked_at is None:
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])
    return key


def api_key_touch(*, key: ApiKey) -> None:
    """Record that a key was used, at most once a minute to spare the database."""
    now = timezone.now()
    if key.last_used_at is None or (now - key.last_used_at).total_seconds() > 60:
        ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
        key.last_used_at = now


def user_get_or_create(*, username: str) -> User:
    """Fetch a user by name, creating one without a usable password if needed."""
    user_model = get_user_model()
    user, created = user_model.objects.get_or_create(username=username)
    if created:
        user.set_unusable_password()
        user.save()
    return user
