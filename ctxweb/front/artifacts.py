"""Dashboard page: an artifact's metadata and its content, escaped, in pages."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from ctxweb.contexts import selectors
from ctxweb.front.access import page_access
from ctxweb.front.paging import page_number

#: Characters of an artifact shown per page (about 100 KB of ASCII).
ARTIFACT_PAGE_CHARS = 100_000


@login_required
def artifact_detail(request: HttpRequest, artifact_id: str) -> HttpResponse:
    """An artifact's metadata and its content, escaped, in pages of 100,000 characters."""
    access = page_access(request)
    try:
        artifact = selectors.artifact_get(project=access.project, artifact_id=artifact_id)
    except selectors.ArtifactAmbiguous as error:
        return HttpResponse(str(error), status=409, content_type="text/plain; charset=utf-8")
    if artifact is None:
        raise Http404("Artifact not found")
    chars = int(getattr(artifact, "content_chars", 0) or 0)
    number, pages = page_number(request, "page", chars, ARTIFACT_PAGE_CHARS)
    start = (number - 1) * ARTIFACT_PAGE_CHARS
    content = selectors.artifact_content(artifact=artifact, start=start, length=ARTIFACT_PAGE_CHARS)
    return render(
        request,
        "contexts/artifact.html",
        {
            "artifact": artifact,
            "content": content,
            "chars": chars,
            "page": number,
            "pages": pages,
            "first_char": start + 1 if chars else 0,
            "last_char": start + len(content),
            "previous_page": number - 1 if number > 1 else None,
            "next_page": number + 1 if number < pages else None,
        },
    )
