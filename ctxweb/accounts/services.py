"""Writes for projects, members and API keys."""

from __future__ import annotations

import logging
import secrets
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.db import DatabaseError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from ctxweb.accounts.models import ApiKey, KeyRole, Membership, Project, Role, hash_key
from ctxweb.dbwrites import sqlite_writing

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


logger = logging.getLogger(__name__)

#: How often a key's ``last_used_at`` is written at most, in seconds.
TOUCH_EVERY = 60
#: This process's last record of each key's use (by primary key and hash: SQLite hands a deleted
#: last id out again): a key is written once a minute per process at most, whatever its row said
#: when the request read it.
_TOUCHED: dict[tuple[int, str], datetime] = {}
_TOUCHED_LOCK = threading.Lock()
#: One thread, its own database connection: a request never waits on this write (on SQLite a
#: read would otherwise queue behind a long import's write lock).
_TOUCHER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ctxweb-key-touch")


def api_key_touch(*, key: ApiKey) -> Future[None] | None:
    """Record that ``key`` was used, off the request's path: at most once a minute, in a
    background thread (inline with ``CTXWEB_TASKS_INLINE``). Returns the pending write, if any.

    Losing a record (the database busy or down) costs ``last_used_at`` a minute of accuracy,
    never the request: the failure is logged.
    """
    now = timezone.now()
    with _TOUCHED_LOCK:
        ident = (key.pk, key.key_hash)
        seen = [t for t in (key.last_used_at, _TOUCHED.get(ident)) if t is not None]
        if seen and (now - max(seen)).total_seconds() <= TOUCH_EVERY:
            return None
        _TOUCHED[ident] = now
    key.last_used_at = now
    if getattr(settings, "CTXWEB_TASKS_INLINE", False):
        _api_key_record_use(key.pk, now, close=False)
        return None
    return _TOUCHER.submit(_api_key_record_use, key.pk, now)


def api_key_touches_wait(timeout: float = 30) -> None:
    """Wait until every recorded use so far is written (tests, and a process shutting down)."""
    _TOUCHER.submit(lambda: None).result(timeout=timeout)


def _api_key_record_use(pk: int, when: datetime, *, close: bool = True) -> None:
    try:
        with sqlite_writing():
            ApiKey.objects.filter(pk=pk).filter(
                Q(last_used_at__isnull=True) | Q(last_used_at__lt=when)
            ).update(last_used_at=when)
    except DatabaseError as error:
        logger.warning("could not record the use of API key %s: %s", pk, error)
    finally:
        if close:
            connection.close()  # this thread's own connection


def user_get_or_create(*, username: str) -> User:
    """Fetch a user by name, creating one without a usable password if needed."""
    user_model = get_user_model()
    user, created = user_model.objects.get_or_create(username=username)
    if created:
        user.set_unusable_password()
        user.save()
    return user
