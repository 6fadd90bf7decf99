"""The imports page: upload a transcript (members who may write) and follow every import of the
project, newest first, with a progress bar that updates while a job runs."""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, HttpResponseForbidden
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from compaction.errors import FormatError
from ctxweb.contexts import selectors
from ctxweb.contexts.services import imports
from ctxweb.front.access import page_access
from ctxweb.front.paging import page_number
from ctxweb.shapes import ImportJobOutput

PER_PAGE = 25
FORMAT_CHOICES = [("auto", "detect it"), *((f, f) for f in imports.TRANSCRIPT_FORMATS)]


class ImportForm(forms.Form):
    file = forms.FileField(
        help_text="Claude Code, Codex, SWE-agent, OpenHands, OpenAI or Anthropic JSON, tau-bench…"
    )
    format = forms.ChoiceField(choices=FORMAT_CHOICES, initial="auto", required=False)
    prefix = forms.CharField(  # type: ignore[assignment]
        required=False,
        max_length=100,
        help_text="put before every session's id, e.g. import/",
    )


@login_required
@require_http_methods(["GET", "POST"])
def import_list(request: HttpRequest) -> HttpResponse:
    """``/imports/``: the upload form and the project's imports."""
    access = page_access(request)
    form = ImportForm()
    if request.method == "POST":
        if not access.can_write:
            return HttpResponseForbidden("Viewers read only: ask a project admin to import.")
        form = ImportForm(request.POST, request.FILES)
        if form.is_valid():
            upload = form.cleaned_data["file"]
            try:
                job = imports.import_job_create(
                    project=access.project,
                    data=upload.read(),
                    name=upload.name or "",
                    format=form.cleaned_data["format"] or "auto",
                    prefix=form.cleaned_data["prefix"],
                    actor=request.user,
                )
            except FormatError as error:
                form.add_error("format", error.reason)
            else:
                messages.success(request, f"Importing {job.name}: follow it below.")
                return redirect(reverse("imports"))
    jobs = selectors.import_job_list(project=access.project)
    paginator = Paginator(jobs, PER_PAGE)
    number, _ = page_number(request, "page", paginator.count, PER_PAGE)
    page = paginator.page(number)
    rows = [ImportJobOutput(job).data for job in page.object_list]
    return render(
        request,
        "contexts/imports.html",
        {
            "access": access,
            "form": form,
            "page": page,
            "rows": rows,
            "can_write": access.can_write,
            "max_bytes": settings.CTXWEB_MAX_REQUEST_BYTES,
        },
        status=400 if form.errors else 200,
    )
