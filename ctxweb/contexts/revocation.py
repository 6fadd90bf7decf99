"""Access revoked at once: when a membership is removed, or a user deactivated or deleted, the
user's open session sockets are told to check their access again (and close if it is gone);
connected when the app loads (:mod:`ctxweb.contexts.apps`). Published after the transaction
commits, so the check reads the change."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from ctxweb.contexts import events


def _tell(user_id: int | None) -> None:
    if user_id is not None:
        transaction.on_commit(lambda: events.access_changed(user_id))


def membership_removed(sender: Any, instance: Any, **kwargs: Any) -> None:
    _tell(instance.user_id)


def user_saved(sender: Any, instance: Any, created: bool = False, **kwargs: Any) -> None:
    if not created and not instance.is_active:
        _tell(instance.pk)


def user_deleted(sender: Any, instance: Any, **kwargs: Any) -> None:
    _tell(instance.pk)
