"""Reads of the calls ctxweb relayed but could not read (:class:`UnreadCall`): a session's, a
project's, those on no session, and one with its bodies. Lists leave the bodies unread."""

from __future__ import annotations

import io
import json
import zipfile

from django.db.models import QuerySet

from ctxweb.accounts.models import Project
from ctxweb.contexts.models import Session, UnreadCall

#: The heavy columns, read only by :func:`unread_call_get`.
_BODIES = ("request_body", "response_body")


def unread_call_list(*, project: Project, unattached: bool = False) -> QuerySet[UnreadCall]:
    """The project's unread calls, newest first (only those on no session with
    ``unattached``), without their bodies."""
    calls = UnreadCall.objects.filter(project=project)
    if unattached:
        calls = calls.filter(session__isnull=True)
    return calls.defer(*_BODIES).select_related("session").order_by("-created_at", "-pk")


def unread_call_list_for_session(*, session: Session) -> QuerySet[UnreadCall]:
    """The session's unread calls, newest first, without their bodies."""
    return (
        UnreadCall.objects.filter(session=session)
        .defer(*_BODIES)
        .select_related("session")
        .order_by("-created_at", "-pk")
    )


def unread_call_get(
    *, project: Project, unread_id: object, session: Session | None = None
) -> UnreadCall | None:
    """Unread call ``unread_id`` of ``project`` (and of ``session`` when given), bodies
    included; None when there is none (an id that is no number included)."""
    text = str(unread_id)
    if not (text.isascii() and text.isdigit()) or len(text) > 18:
        return None
    calls = UnreadCall.objects.filter(project=project, pk=int(text))
    if session is not None:
        calls = calls.filter(session=session)
    return calls.select_related("session").first()


#: The file name of a kept-compressed answer in the archive, by its encoding.
_SUFFIXES = {"gzip": "gz", "zstd": "zst", "deflate": "deflate"}


def unread_call_archive(*, call: UnreadCall) -> tuple[str, bytes]:
    """The raw exchange as a download: (its file name, a zip of ``request.json`` as sent,
    the answer as relayed (``response.json``, ``response.sse`` when streamed, or
    ``response.gz`` / ``.zst`` / ``.deflate`` / ``.bin`` when it is kept compressed) and
    ``call.json``, what ctxweb knows of the call)."""
    if call.content_encoding:
        answer = f"response.{_SUFFIXES.get(call.content_encoding, 'bin')}"
    else:
        answer = "response.sse" if call.streamed else "response.json"
    about = {
        "id": call.pk,
        "created_at": call.created_at.isoformat(),
        "format": call.format,
        "source": call.source,
        "error": call.error,
        "error_path": call.error_path,
        "external_id": call.external_id,
        "session": call.session.external_id if call.session is not None else None,
        "streamed": call.streamed,
        "content_encoding": call.content_encoding,
        "truncated": call.truncated,
    }
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("request.json", bytes(call.request_body))
        archive.writestr(answer, bytes(call.response_body))
        archive.writestr("call.json", json.dumps(about, indent=2) + "\n")
    return f"unread-call-{call.pk}.zip", buffer.getvalue()


__all__ = [
    "unread_call_archive",
    "unread_call_get",
    "unread_call_list",
    "unread_call_list_for_session",
]
