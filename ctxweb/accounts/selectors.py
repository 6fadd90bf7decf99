"""Reads for projects, members and API keys; the one place access is decided."""

from __future__ import annotations

import contextlib
import hmac
import logging

from django.contrib.auth.models import AnonymousUser, User
from django.core.cache import cache
from django.db.models import QuerySet

from ctxweb.accounts.models import ApiKey, Membership, Project, hash_key

logger = logging.getLogger(__name__)

#: How long an active key stays in the shared cache. Any change to a key or its project removes
#: it at once (:func:`api_key_forget`), so this only bounds what a missed removal could cost.
KEY_CACHE_SECONDS = 300


def api_key_cache_name(key_hash: str) -> str:
    return f"apikey:{key_hash}"


def api_key_get_active(*, raw_key: str) -> ApiKey | None:
    """The active key with this raw value, with its project, or None.

    Every request with a key asks this, so an active key is kept in the shared cache (local
    memory in the embedded shape, Redis in production) under its hash: a lookup is one cache
    read. Revoking, changing or deleting a key, or changing or deleting its project, removes the
    entry in every process at once (the ``accounts`` signal handlers call
    :func:`api_key_forget`). An unreachable cache falls back to the database.
    """
    key_hash = hash_key(raw_key)
    name = api_key_cache_name(key_hash)
    try:
        cached = cache.get(name)
    except Exception:  # a cache outage must not take authentication down
        logger.warning("API key cache unavailable: looking the key up in the database")
        cached = None
    # The lookup is by hash, so no secret is compared byte by byte; the check is constant-time
    # anyway, for an entry that would not be this key's.
    if isinstance(cached, ApiKey) and hmac.compare_digest(cached.key_hash, key_hash):
        return cached
    key = (
        ApiKey.objects.select_related("project")
        .filter(key_hash=key_hash, revoked_at__isnull=True)
        .first()
    )
    if key is not None:
        with contextlib.suppress(Exception):  # unreachable: the next lookup reads again
            cache.set(name, key, KEY_CACHE_SECONDS)
    return key


def api_key_forget(*, key_hashes: list[str]) -> None:
    """Remove these keys from the key cache (their next use reads the database)."""
    try:
        cache.delete_many([api_key_cache_name(h) for h in key_hashes])
    except Exception:
        logger.warning("API key cache unavailable: could not remove %d key(s)", len(key_hashes))


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
