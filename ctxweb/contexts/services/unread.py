"""Calls ctxweb relayed but could not read (:class:`UnreadCall`): kept raw, with why, so that a
proxied call is never silently lost.

:func:`unread_call_record` keeps one: on the session the call named or joined when the project
has it (the session's ``unread_call_count`` counts it), else on the project alone. What is kept
is bounded: each body up to ``CTXWEB_MAX_REQUEST_BYTES`` (the body cap of every request), at
most ``CTXWEB_UNREAD_CALLS_PER_PROJECT`` calls per project, the oldest dropped first. A
compressed answer is stored decompressed when it decompresses within that cap, else as relayed
with its ``content_encoding``. Headers are never stored: the provider's key travels in them.
When the project masks secrets, the secrets in both bodies' text are masked before they are
stored (not those of an answer kept compressed).
"""

from __future__ import annotations

import zlib
from datetime import datetime

import zstandard
from django.conf import settings
from django.db import transaction
from django.db.models import Count, F, QuerySet

from compaction.errors import FormatError
from ctxweb.accounts.models import Project
from ctxweb.contexts.models import Session, UnreadCall
from ctxweb.contexts.services._secrets import body_masked

#: The ``source`` of a call the recording proxy relayed.
PROXY = "proxy"
#: Characters of an exception's message kept as the error.
ERROR_CHARS = 1000
#: The first bytes of each encoding the relayed answer may come in.
_MAGIC = {b"\x1f\x8b": "gzip", b"\x28\xb5\x2f\xfd": "zstd"}


def _encoding(body: bytes, compressed: bool) -> str:
    """The encoding ``body`` is in ("" for none), by its first bytes: a JSON or SSE answer never
    starts like gzip or zstd, so an answer the relay did not mark is recognised too. A body
    marked compressed that reads as text is not (the recorder had inflated it already)."""
    for magic, name in _MAGIC.items():
        if body.startswith(magic):
            return name
    if not compressed:
        return ""
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return "deflate"
    return ""


def _inflated(body: bytes, encoding: str, limit: int) -> bytes | None:
    """``body`` decompressed whole within ``limit`` bytes, or None when it does not decompress
    (not of its encoding, cut short, or larger than ``limit``)."""
    if encoding == "zstd":
        # In small pieces, so that no piece inflates far past the limit before it is checked.
        zstd = zstandard.ZstdDecompressor().decompressobj()
        out = bytearray()
        try:
            for start in range(0, len(body), 1024):
                out += zstd.decompress(body[start : start + 1024])
                if len(out) > limit:
                    return None
        except zstandard.ZstdError:
            return None
        return bytes(out) if zstd.eof else None
    # gzip; deflate zlib-wrapped (as HTTP's deflate should be) or raw
    for wbits in (16 + zlib.MAX_WBITS,) if encoding == "gzip" else (zlib.MAX_WBITS, -15):
        inflater = zlib.decompressobj(wbits)
        try:
            data = inflater.decompress(body, limit + 1)
        except zlib.error:
            continue
        if inflater.eof and len(data) <= limit:
            return data
    return None


def _storable(text: str) -> str:
    """``text`` with its NULs and lone surrogates shown as escapes (every database stores it)."""
    text = text.replace("\x00", "\\x00")
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def error_text(error: BaseException) -> tuple[str, str]:
    """(a short message, the field at fault): a :class:`FormatError` names its field and why;
    any other exception gives its type and message, never a traceback."""
    if isinstance(error, FormatError):
        return f"{error.path or 'request'}: {error.reason}"[:ERROR_CHARS], error.path[:300]
    message = str(error).strip()
    text = f"{type(error).__name__}: {message}" if message else type(error).__name__
    return text[:ERROR_CHARS], ""


def unread_call_record(
    *,
    project: Project,
    session_external_id: str | None,
    format: str,
    request_body: bytes,
    response_body: bytes,
    streamed: bool,
    compressed: bool,
    error: BaseException | str,
    source: str = PROXY,
    content_encoding: str = "",
) -> UnreadCall:
    """Keep a call that could not be read, raw, on its session when the project has one named
    ``session_external_id``, else on the project; drop the project's oldest past the bound.

    Args:
        project: the project whose key relayed the call.
        session_external_id: the session the call named or joined ("" or None: none).
        format: the call's request format (``anthropic-messages``, ...).
        request_body: the request as sent upstream.
        response_body: the answer as relayed (compressed when ``compressed``).
        streamed: whether the answer was an event stream.
        compressed: whether the relay marked the answer compressed.
        error: why it could not be read (an exception, or its text).
        content_encoding: the answer's ``Content-Encoding`` as relayed, when known (else it is
            recognised by its first bytes); one ctxweb does not read is kept as it is, named.

    Example:
        >>> unread_call_record(project=p, session_external_id="s1", format="openai-chat",
        ...     request_body=b"{...}", response_body=b"{...}", streamed=False,
        ...     compressed=False, error=FormatError("messages.0.content", "expected text"))
    """
    cap = int(settings.CTXWEB_MAX_REQUEST_BYTES)
    named = content_encoding.strip().lower()
    encoding = named[:16] if named not in ("", "identity") else ""
    encoding = encoding or _encoding(bytes(response_body), compressed)
    response = bytes(response_body)
    if encoding in _MAGIC.values() or encoding == "deflate":
        inflated = _inflated(response, encoding, cap)
        if inflated is not None:
            response, encoding = inflated, ""
    request = bytes(request_body)
    if project.mask_secrets:
        # Masked like everything else stored (before the cap, so no secret is cut in two); an
        # answer still compressed cannot be read, and is kept as relayed.
        request = body_masked(request)
        if not encoding:
            response = body_masked(response)
    truncated = len(request) > cap or len(response) > cap
    request, response = request[:cap], response[:cap]
    message, path = (error[:ERROR_CHARS], "") if isinstance(error, str) else error_text(error)
    # what a caller sent may hold a NUL or a lone surrogate, which no text column stores: the
    # reason must not lose the call it explains
    message, path = _storable(message), _storable(path)
    external_id = _storable((session_external_id or "")[:200])
    with transaction.atomic():
        session = (
            Session.objects.filter(project=project, external_id=external_id).first()
            if external_id
            else None
        )
        call = UnreadCall.objects.create(
            project=project,
            session=session,
            external_id=external_id,
            source=source[:32],
            format=format[:32],
            request_body=request,
            response_body=response,
            request_size=len(request),
            response_size=len(response),
            content_encoding=encoding,
            truncated=truncated,
            streamed=streamed,
            error=message,
            error_path=path,
        )
        if session is not None:
            Session.objects.filter(pk=session.pk).update(
                unread_call_count=F("unread_call_count") + 1
            )
        keep = max(1, int(settings.CTXWEB_UNREAD_CALLS_PER_PROJECT))
        oldest = list(
            UnreadCall.objects.filter(project=project)
            .order_by("-pk")
            .values_list("pk", flat=True)[keep:]
        )
        if oldest:
            _delete(UnreadCall.objects.filter(pk__in=oldest))
    return call


def _delete(calls: QuerySet[UnreadCall]) -> int:
    """Delete ``calls``, their sessions' counts following; how many were deleted. Inside the
    caller's transaction."""
    per_session = calls.exclude(session=None).values("session").annotate(n=Count("pk")).order_by()
    for row in per_session:
        Session.objects.filter(pk=row["session"]).update(
            unread_call_count=F("unread_call_count") - row["n"]
        )
    deleted, _ = calls.delete()
    return deleted


def unread_call_delete(*, unread_call: UnreadCall) -> None:
    """Delete one unread call (its session's count follows)."""
    with transaction.atomic():
        _delete(UnreadCall.objects.filter(pk=unread_call.pk))


def unread_calls_delete(
    *, project: Project, session: Session | None = None, before: datetime | None = None
) -> int:
    """Delete a project's unread calls (only ``session``'s when given, only those kept
    ``before`` a time when given); how many there were."""
    with transaction.atomic():
        calls = UnreadCall.objects.filter(project=project)
        if session is not None:
            calls = calls.filter(session=session)
        if before is not None:
            calls = calls.filter(created_at__lt=before)
        return _delete(calls)


__all__ = [
    "PROXY",
    "error_text",
    "unread_call_delete",
    "unread_call_record",
    "unread_calls_delete",
]
