"""Account pages: switching the project the dashboard acts in."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from ctxweb.accounts.access import SESSION_PROJECT_KEY, access_for_user
from ctxweb.numbers import parse_whole


@login_required
@require_POST
def project_switch(request: HttpRequest) -> HttpResponse:
    """Remember the chosen project in the session; only a project the user is a member of.

    Goes back to the sessions list: the page the user was on belongs to the previous project.
    """
    raw = request.POST.get("project", "")
    project_id = parse_whole(raw)
    access = (
        access_for_user(request.user, project_id=project_id) if project_id is not None else None
    )
    if access is None:
        messages.error(request, "You are not a member of that project.")
        return redirect("home")
    request.session[SESSION_PROJECT_KEY] = access.project.pk
    messages.success(request, f"Now showing project {access.project.name}.")
    return redirect("home")
