"""Input and output shapes of the REST API."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from ctxweb.contexts.services import FORMATS
from ctxweb.shapes import AuditEventOutput, SessionOutput, UnreadCallOutput

# JSON bodies are typed: a number is not text, text is not a number, 1 is not true. DRF's fields
# convert between them; these refuse what the schema says is the wrong type.


class TextField(serializers.CharField):
    """Text only (DRF's ``CharField`` turns ``0`` into ``"0"``)."""

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class WholeField(serializers.IntegerField):
    """A JSON integer only (DRF's ``IntegerField`` takes ``"5"``, ``5.0`` and ``true``)."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


class FlagField(serializers.BooleanField):
    """``true`` or ``false`` only (DRF's ``BooleanField`` takes ``"yes"`` and ``1``)."""

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, bool):
            self.fail("invalid")
        return data


#: The longest ``turn_id`` and ``model`` (their columns' length).
_TEXT_MAX = 200
#: The largest ``context_window`` a turn may claim.
_WINDOW_MAX = 100_000_000
_FORMAT_NAMES = frozenset(FORMATS)


class TurnIngestInput(serializers.Serializer):  # type: ignore[type-arg]
    format = serializers.ChoiceField(choices=FORMATS)
    request = serializers.DictField()
    response = serializers.JSONField(required=False, allow_null=True)
    usage = serializers.DictField(required=False, allow_null=True)
    turn_id = TextField(required=False, allow_null=True, max_length=_TEXT_MAX, min_length=1)
    model = TextField(required=False, allow_blank=True, max_length=_TEXT_MAX)
    context_window = WholeField(required=False, allow_null=True, min_value=1, max_value=_WINDOW_MAX)
    allow_orphans = FlagField(
        required=False,
        default=False,
        help_text=(
            "Store a context whose tool calls or results lack their other half (refused with a"
            " 400 naming the field otherwise)."
        ),
    )


def _plain_text(value: Any, *, blank: bool) -> bool:
    """Whether ``TextField`` takes ``value`` unchanged: text without surrounding whitespace (it
    would be stripped), NUL or lone surrogates, of at most :data:`_TEXT_MAX` characters."""
    if not isinstance(value, str) or len(value) > _TEXT_MAX or "\x00" in value:
        return False
    if not value:
        return blank
    if value != value.strip():
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate
        return False
    return True


def turn_ingest_input(data: dict[str, Any]) -> dict[str, Any] | None:
    """What :class:`TurnIngestInput` validates ``data`` to, for a body whose fields it would take
    unchanged (the common case), without building the serializer (its fields are deep-copied for
    every instance: a fifth of a small turn's Python time in the view); None for any other body,
    which the serializer then validates, or refuses with its own messages.

    A test holds the two equal on generated bodies: None, or exactly the serializer's
    ``validated_data``.
    """
    format, request = data.get("format"), data.get("request")
    if not isinstance(format, str) or format not in _FORMAT_NAMES or type(request) is not dict:
        return None
    out: dict[str, Any] = {"format": format, "request": dict(request)}
    if "response" in data:
        if data["response"] is not None:
            return None  # the serializer checks that it dumps to JSON
        out["response"] = None
    if "usage" in data:
        usage = data["usage"]
        if usage is not None and type(usage) is not dict:
            return None
        out["usage"] = None if usage is None else dict(usage)
    if "turn_id" in data:
        turn_id = data["turn_id"]
        if turn_id is not None and not _plain_text(turn_id, blank=False):
            return None
        out["turn_id"] = turn_id
    if "model" in data:
        if not _plain_text(data["model"], blank=True):
            return None
        out["model"] = data["model"]
    if "context_window" in data:
        window = data["context_window"]
        if window is not None and (type(window) is not int or not 1 <= window <= _WINDOW_MAX):
            return None
        out["context_window"] = window
    orphans = data.get("allow_orphans", False)
    if type(orphans) is not bool:
        return None
    out["allow_orphans"] = orphans
    return out


class TurnIngestOutput(serializers.Serializer):  # type: ignore[type-arg]
    session = serializers.CharField()
    index = serializers.IntegerField()
    total_tokens = serializers.IntegerField()
    regions = serializers.DictField(child=serializers.IntegerField())
    context_window = serializers.IntegerField()
    usage_ratio = serializers.FloatField()
    reported_input_tokens = serializers.IntegerField(allow_null=True)
    events = serializers.ListField(child=serializers.DictField())


class SessionPageOutput(serializers.Serializer):  # type: ignore[type-arg]
    count = serializers.IntegerField()
    limit = serializers.IntegerField()
    offset = serializers.IntegerField()
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    results = SessionOutput(many=True)


class AuditPageOutput(serializers.Serializer):  # type: ignore[type-arg]
    count = serializers.IntegerField()
    limit = serializers.IntegerField()
    offset = serializers.IntegerField()
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    results = AuditEventOutput(many=True)


class UnreadCallPageOutput(serializers.Serializer):  # type: ignore[type-arg]
    count = serializers.IntegerField()
    limit = serializers.IntegerField()
    offset = serializers.IntegerField()
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    results = UnreadCallOutput(many=True)
