"""Who may do what, decided in one place for every interface (API, pages, WebSocket).

Each condition sits on its own line so tests prove every branch. An outsider is told "not found",
never "forbidden": the existence of another project's data does not leak.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AnonymousUser

from ctxweb.accounts.models import ApiKey, Membership, Project, Role
from ctxweb.numbers import parse_whole


@dataclass(frozen=True)
class Access:
    """The project a request acts in and what it may do there.

    ``can_write``: post turns and import transcripts (every API key; members above viewer).
    """

    project: Project
    can_operate: bool
    can_admin: bool = False
    can_write: bool = True


SESSION_PROJECT_KEY = "ctxweb_project_id"


def access_for_key(key: ApiKey) -> Access:
    """An API key acts in its own project; operator keys may apply operations."""
    return Access(project=key.project, can_operate=key.can_operate)


def access_for_user(user: Any, *, project_id: int | None = None) -> Access | None:
    """A dashboard user acts in ``project_id`` if a member, else in their first project."""
    if isinstance(user, AnonymousUser) or not user.is_authenticated:
        return None
    memberships = Membership.objects.select_related("project").filter(user=user)
    if project_id is not None:
        memberships = memberships.filter(project_id=project_id)
    membership = memberships.order_by("project__name").first()
    if membership is None:
        return None
    return Access(
        project=membership.project,
        can_operate=membership.role in (Role.OPERATOR, Role.ADMIN),
        can_admin=membership.role == Role.ADMIN,
        can_write=membership.role in (Role.OPERATOR, Role.ADMIN),
    )


def access_for_request(request: Any) -> Access | None:
    """The access of a DRF or Django request: its API key, else its logged-in user."""
    auth = getattr(request, "auth", None)
    if isinstance(auth, ApiKey):
        return access_for_key(auth)
    project_id = None
    raw = request.GET.get("project") if hasattr(request, "GET") else None
    if raw and parse_whole(str(raw)) is not None:
        project_id = parse_whole(str(raw))
    elif hasattr(request, "session"):
        project_id = request.session.get(SESSION_PROJECT_KEY)
    access = access_for_user(request.user, project_id=project_id)
    if access is None and project_id is not None and raw is None:
        access = access_for_user(request.user)  # the remembered project was left
    return access


def actor_for_request(request: Any) -> Any:
    """The API key behind a request, else its dashboard user."""
    auth = getattr(request, "auth", None)
    return auth if isinstance(auth, ApiKey) else request.user


def caller_ident(request: Any) -> str | None:
    """Who a request counts against for rate limits: its API key, else its logged-in user; None
    if anonymous.

    The key's hash and the user's join time ride along with the ids, so a row id that the
    database hands out again (SQLite reuses a deleted last id) starts with a fresh budget.
    """
    auth = getattr(request, "auth", None)
    if isinstance(auth, ApiKey):
        return f"key:{auth.pk}:{auth.key_hash[:16]}"
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated and getattr(user, "pk", None) is not None:
        joined = getattr(user, "date_joined", None)
        return f"user:{user.pk}:{joined.timestamp() if joined else ''}"
    return None
