"""Who may see a page: the caller's project (404 for a member of none) and a session of it (404
otherwise: another project's session does not exist for them)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.http import Http404, HttpRequest

from ctxweb.accounts.access import Access, access_for_request
from ctxweb.contexts import selectors

if TYPE_CHECKING:
    from ctxweb.contexts.models import Session


def page_access(request: HttpRequest) -> Access:
    """The logged-in caller's access to their current project; 404 for a member of none."""
    access = access_for_request(request)
    if access is None:  # a member of no project: nothing of any project exists for them
        raise Http404("Not found")
    return access


def page_session(access: Access, external_id: str) -> Session:
    """Session ``external_id`` of the caller's project; 404 otherwise."""
    session = selectors.session_get(project=access.project, external_id=external_id)
    if session is None:
        raise Http404("Session not found")
    return session
