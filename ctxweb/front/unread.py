"""Dashboard downloads of calls ctxweb relayed but could not read: the raw exchange of one, from
its session's page or, for a call on no session, from the sessions list. Project access is
checked as for artifacts: another project's call does not exist for the caller."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.urls import reverse

from ctxweb.contexts.selectors import unread as unread_selectors
from ctxweb.front.access import page_access, page_session
from ctxweb.shapes import unread_call_download

if TYPE_CHECKING:
    pass


def unread_rows(calls: Any) -> list[dict[str, Any]]:
    """Unread calls as the pages list them: the call and the link to its raw exchange (under
    its session when it has one)."""
    rows = []
    for call in calls:
        if call.session_id is not None:
            url = reverse("session-unread-call-raw", args=[call.session.external_id, call.pk])
        else:
            url = reverse("unread-call-raw", args=[call.pk])
        rows.append({"call": call, "raw_url": url})
    return rows


@login_required
def session_unread_call_raw(request: HttpRequest, external_id: str, unread_id: str) -> HttpResponse:
    """The raw exchange of one of the session's unread calls, as a zip download."""
    access = page_access(request)
    session = page_session(access, external_id)
    call = unread_selectors.unread_call_get(
        project=access.project, unread_id=unread_id, session=session
    )
    if call is None:
        raise Http404("Unread call not found")
    return unread_call_download(call)


@login_required
def unread_call_raw(request: HttpRequest, unread_id: str) -> HttpResponse:
    """The raw exchange of one of the project's unread calls, as a zip download."""
    access = page_access(request)
    call = unread_selectors.unread_call_get(project=access.project, unread_id=unread_id)
    if call is None:
        raise Http404("Unread call not found")
    return unread_call_download(call)
