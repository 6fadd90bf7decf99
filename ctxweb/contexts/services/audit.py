"""The audit log: who applied, undid or deleted what, and when (:class:`AuditEvent`).

Written inside the transaction of what it records, so a rolled-back action leaves no entry and a
committed one always has its entry.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ctxweb.contexts.models import AuditEvent

#: The actor name of what the retention task deletes.
RETENTION = "retention"


def _actor(actor: Any) -> tuple[Any, str]:
    """(the user or None, a name): a dashboard user, an API key (by prefix), else ``system``."""
    if actor is None:
        return None, "system"
    if isinstance(actor, str):
        return None, actor
    if getattr(actor, "is_authenticated", False) and hasattr(actor, "get_username"):
        return actor, actor.get_username()
    prefix = getattr(actor, "prefix", None)
    if prefix is None and hasattr(actor, "key"):  # ctxweb.authentication.ApiKeyUser
        prefix = getattr(actor.key, "prefix", None)
    if prefix:
        return None, f"key {prefix}"
    return None, "system"


def audit_record(
    *,
    project_id: int,
    action: str,
    actor: Any = None,
    session_external_id: str = "",
    operation_id: int | None = None,
    detail: Mapping[str, Any] | None = None,
) -> AuditEvent:
    """Record ``action`` (an :class:`AuditEvent.Action`) by ``actor`` (a user, an API key, a
    name such as :data:`RETENTION`, or None for ctxweb itself)."""
    user, name = _actor(actor)
    return AuditEvent.objects.create(
        project_id=project_id,
        action=action,
        actor=user,
        actor_name=name[:200],
        session_external_id=session_external_id,
        operation_id=operation_id,
        detail=dict(detail or {}),
    )
