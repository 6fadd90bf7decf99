"""Who may call: the caller's project (or 404), writers only, a session of that project (or
404). Every API view starts here."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rest_framework import status
from rest_framework.request import Request

from ctxweb.accounts.access import Access, access_for_request
from ctxweb.api.errors import ApiError
from ctxweb.contexts import selectors

if TYPE_CHECKING:
    from ctxweb.contexts.models import Session


def not_found(what: str) -> ApiError:
    return ApiError(f"{what} not found.", code="not_found", status_code=status.HTTP_404_NOT_FOUND)


def require_access(request: Request) -> Access:
    access = access_for_request(request)
    if access is None:  # logged in, but a member of no project
        raise not_found("Project")
    return access


def require_writer(access: Access) -> None:
    """Viewers read: posting turns and importing take an API key or the operator role."""
    if not access.can_write:
        raise ApiError(
            "Viewers read only: post turns and import with an API key, or ask a project admin"
            " for the operator role.",
            code="permission_denied",
            status_code=status.HTTP_403_FORBIDDEN,
        )


def require_session(access: Access, external_id: str) -> Session:
    session = selectors.session_get(project=access.project, external_id=external_id)
    if session is None:
        raise not_found(f"Session {external_id!r}")
    return session
