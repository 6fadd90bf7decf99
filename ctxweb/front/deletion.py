"""Deleting a session from its page: ``GET`` asks for confirmation (saying what goes), ``POST``
deletes and returns to the sessions list. Operators and admins only."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseForbidden
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from ctxweb.contexts.services import deletion
from ctxweb.front.access import page_access, page_session


@login_required
@require_http_methods(["GET", "POST"])
def session_delete(request: HttpRequest, external_id: str) -> HttpResponse:
    """``/sessions/{external_id}/delete/``: the confirmation page, and the deletion."""
    access = page_access(request)
    session = page_session(access, external_id)
    if not access.can_operate:
        return HttpResponseForbidden("Only operators may delete sessions.")
    if request.method == "POST":
        deleted = deletion.session_delete(session=session, actor=request.user)
        messages.success(
            request,
            f"Deleted session {external_id}: {deleted.turns} turn{'s' * (deleted.turns != 1)},"
            f" {deleted.messages} message{'s' * (deleted.messages != 1)} no other session"
            f" shared, {deleted.artifacts} artifact{'s' * (deleted.artifacts != 1)}.",
        )
        return redirect("home")
    return render(request, "contexts/session_delete.html", {"access": access, "session": session})
