"""The one shape of each resource, as DRF serializers: what the API answers, what the session
WebSocket sends and what the pages draw are the same fields built by the same code.

Each serializer reads a model instance or the row values a live event carries
(:func:`ctxweb.contexts.events.turn_row`, :func:`~ctxweb.contexts.events.operation_row`): the
domain publishes rows, the interfaces shape them.

The attribution tables' shapes are in :mod:`ctxweb.tables`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.http import HttpResponse
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from ctxweb.contexts.selectors import unread as unread_selectors


class _DateTime(serializers.DateTimeField):
    """A time as the API writes it, from a datetime or from the ISO text a live event carries."""

    def to_representation(self, value: Any) -> Any:
        if isinstance(value, str):
            value = datetime.fromisoformat(value)
        return super().to_representation(value)


class SessionOutput(serializers.Serializer):  # type: ignore[type-arg]
    """A session: its model, window, reserve and usable limit, its fill and activity."""

    external_id = serializers.CharField()
    format = serializers.CharField()
    model = serializers.CharField()
    context_window = serializers.IntegerField()
    context_window_source = serializers.ChoiceField(
        choices=["request", "model", "default"],
        help_text="request: a turn stated the window (the REST context_window, a request header"
        " such as anthropic-beta: context-1m-..., or a model name ending [1m]); model: guessed"
        " from ctxweb's table of model windows; default: guessed, the model being unknown",
    )
    output_reserve = serializers.IntegerField()
    usable = serializers.SerializerMethodField()
    encoding = serializers.CharField()
    approximate = serializers.BooleanField()
    turn_count = serializers.IntegerField()
    last_total_tokens = serializers.IntegerField()
    fill = serializers.FloatField(source="last_fill")
    compaction_count = serializers.IntegerField()
    secret_count = serializers.IntegerField(
        help_text="secrets found in the messages its turns brought"
    )
    unread_calls = serializers.IntegerField(
        source="unread_call_count",
        help_text="its calls ctxweb relayed but could not read, kept raw:"
        " GET sessions/{external_id}/unread-calls lists them",
    )
    source = serializers.CharField()  # type: ignore[assignment]
    created_at = serializers.DateTimeField()
    last_activity_at = serializers.DateTimeField()

    def get_usable(self, session: Any) -> int:
        return max(0, int(session.context_window) - int(session.output_reserve))


class UnreadCallOutput(serializers.Serializer):  # type: ignore[type-arg]
    """A call ctxweb relayed but could not read, kept raw: when, its format, why (``error``
    names the field at fault when the request or answer had a malformed one), the session it
    named or joined (``session``: null when the project has none of that name) and where to
    download the raw exchange (``raw_url``: a zip of the request and the answer as relayed).
    The context's ``raw_url`` function (the call -> its URL) builds the link."""

    id = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    format = serializers.CharField()
    source = serializers.CharField()  # type: ignore[assignment]
    error = serializers.CharField()
    error_path = serializers.CharField(help_text="the field at fault, when one was named")
    external_id = serializers.CharField(help_text="the session id the call named or joined")
    session = serializers.SerializerMethodField()
    streamed = serializers.BooleanField()
    request_bytes = serializers.IntegerField(source="request_size")
    response_bytes = serializers.IntegerField(source="response_size")
    content_encoding = serializers.CharField(
        help_text="the answer's encoding when it is kept compressed (it did not decompress)"
    )
    truncated = serializers.BooleanField(help_text="a body was cut at the body cap")
    raw_url = serializers.SerializerMethodField()

    @extend_schema_field({"type": "string", "nullable": True})
    def get_session(self, call: Any) -> str | None:
        return call.session.external_id if call.session_id is not None else None

    @extend_schema_field({"type": "string"})
    def get_raw_url(self, call: Any) -> str:
        return str(self.context["raw_url"](call))


class SecretOutput(serializers.Serializer):  # type: ignore[type-arg]
    """A secret found in a message: its kind and what it is, never its value. ``start`` and
    ``end`` are offsets in the stored text at ``field`` of the message at ``position`` (null:
    the top-level system prompt); when the project masks secrets they span the mask."""

    kind = serializers.CharField()
    message = serializers.CharField()
    start = serializers.IntegerField()
    end = serializers.IntegerField()
    position = serializers.IntegerField(allow_null=True, required=False, default=None)
    field = serializers.CharField()


def shape_secrets(secrets: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Secrets as the API and the pages show them."""
    if not secrets:  # most turns: no serializer built (each one copies its fields)
        return []
    return list(SecretOutput(secrets, many=True).data)


class TurnOutput(serializers.Serializer):  # type: ignore[type-arg]
    """A turn's summary: an item of ``GET sessions/{id}/turns``, the ``turn`` of a
    ``turn.created`` event and a turn of the session chart. With ``nonzero_regions`` in the
    context (the chart of a 2,000-turn page), regions of zero tokens are left out."""

    index = serializers.IntegerField()
    total_tokens = serializers.IntegerField()
    counted_tokens = serializers.IntegerField()
    regions = serializers.DictField(child=serializers.IntegerField())
    reported_input_tokens = serializers.IntegerField(allow_null=True)
    events = serializers.ListField(child=serializers.DictField())
    context_window = serializers.IntegerField()
    max_output_tokens = serializers.IntegerField(allow_null=True)
    created_at = _DateTime(allow_null=True, help_text="when ctxweb recorded the call")
    occurred_at = _DateTime(
        allow_null=True,
        help_text="when the call happened by its source's clock (an imported transcript's"
        " timestamp, a span's or generation's start); null when the source did not say",
    )

    def to_representation(self, instance: Any) -> dict[str, Any]:
        data: dict[str, Any] = super().to_representation(instance)
        if self.context.get("nonzero_regions"):
            data["regions"] = {k: v for k, v in data["regions"].items() if v}
        return data


class OperationOutput(serializers.Serializer):  # type: ignore[type-arg]
    """An operation: ``GET operations/{id}``, and the ``operation`` of the WebSocket's
    ``operation.progress``, ``operation.finished`` and ``operation.undone`` events."""

    id = serializers.IntegerField()
    session = serializers.CharField(source="session.external_id")
    strategy = serializers.CharField()
    params = serializers.DictField()
    status = serializers.CharField()
    automatic = serializers.BooleanField()
    progress = serializers.DictField()
    result = serializers.DictField(allow_null=True)
    error = serializers.SerializerMethodField()
    attempts = serializers.IntegerField()
    base_version = serializers.IntegerField(allow_null=True)
    result_version = serializers.IntegerField(allow_null=True)
    created_at = _DateTime(allow_null=True)
    started_at = _DateTime(allow_null=True)
    finished_at = _DateTime(allow_null=True)
    undone_at = _DateTime(allow_null=True)

    def get_error(self, operation: Any) -> str | None:
        error = operation["error"] if isinstance(operation, dict) else operation.error
        return error or None


class ImportSessionOutput(serializers.Serializer):  # type: ignore[type-arg]
    external_id = serializers.CharField()
    turns = serializers.IntegerField(help_text="turns created")
    skipped = serializers.IntegerField(help_text="turns already stored (a re-import)")
    peak_tokens = serializers.IntegerField()
    compactions = serializers.IntegerField()


class ImportResultOutput(serializers.Serializer):  # type: ignore[type-arg]
    format = serializers.CharField(help_text="the transcript format, as detected or given")
    sessions = ImportSessionOutput(many=True)


class ImportProgressOutput(serializers.Serializer):  # type: ignore[type-arg]
    done = serializers.IntegerField(help_text="turns stored or skipped so far")
    total = serializers.IntegerField(allow_null=True, help_text="the file's turns, once parsed")
    percent = serializers.IntegerField(allow_null=True)


class ImportJobOutput(serializers.Serializer):  # type: ignore[type-arg]
    """An import job: ``GET imports/{id}``, the list, and ``POST import``'s answer."""

    id = serializers.IntegerField()
    name = serializers.CharField(help_text="the uploaded file's name")
    format = serializers.SerializerMethodField(help_text="the format detected, else as asked")
    prefix = serializers.CharField()
    size = serializers.IntegerField(help_text="bytes")
    status = serializers.CharField(help_text="queued, running, succeeded or failed")
    progress = serializers.SerializerMethodField()
    sessions = serializers.SerializerMethodField()
    error = serializers.SerializerMethodField()
    created_at = _DateTime()
    started_at = _DateTime(allow_null=True)
    finished_at = _DateTime(allow_null=True)

    def get_format(self, job: Any) -> str:
        return str((job.result or {}).get("format") or job.format)

    @extend_schema_field(ImportProgressOutput)
    def get_progress(self, job: Any) -> dict[str, Any]:
        total = job.turns_total
        percent = None if not total else min(100, job.turns_done * 100 // total)
        if total == 0 and job.status == "succeeded":
            percent = 100
        return {"done": job.turns_done, "total": total, "percent": percent}

    @extend_schema_field(ImportSessionOutput(many=True, allow_null=True))
    def get_sessions(self, job: Any) -> list[dict[str, Any]] | None:
        return (job.result or {}).get("sessions")

    @extend_schema_field(serializers.DictField(allow_null=True))
    def get_error(self, job: Any) -> dict[str, Any] | None:
        if not job.error:
            return None
        return {"message": job.error, "field": job.error_field or None}


#: What the audit log records.
AUDIT_ACTIONS = (
    "operation.apply",
    "operation.undo",
    "session.delete",
    "session.expire",
    "session.policy",
    "project.policy",
)


class AuditEventOutput(serializers.Serializer):  # type: ignore[type-arg]
    """An audit log entry: who (a username, ``key <prefix>``, ``policy`` or ``retention``) did
    what to which session, when, with what it removed or ran."""

    id = serializers.IntegerField()
    action = serializers.CharField()
    actor = serializers.CharField(source="actor_name")
    session = serializers.CharField(source="session_external_id")
    operation = serializers.IntegerField(source="operation_id", allow_null=True)
    detail = serializers.DictField()
    created_at = _DateTime()


def shape_event(event: dict[str, Any]) -> dict[str, Any]:
    """A live event as the WebSocket sends it: its ``turn`` and ``operation`` rows shaped."""
    shaped = dict(event)
    if isinstance(shaped.get("turn"), dict):
        shaped["turn"] = TurnOutput(shaped["turn"]).data
    if isinstance(shaped.get("operation"), dict):
        shaped["operation"] = OperationOutput(shaped["operation"]).data
    return shaped


def unread_call_download(call: Any) -> HttpResponse:
    """An unread call's raw exchange as the API and the pages give it: a zip download the browser
    never renders (``nosniff``) nor keeps (``no-store``)."""
    name, archive = unread_selectors.unread_call_archive(call=call)
    response = HttpResponse(archive, content_type="application/zip")
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    response["X-Content-Type-Options"] = "nosniff"
    response["Cache-Control"] = "private, no-store"
    return response
