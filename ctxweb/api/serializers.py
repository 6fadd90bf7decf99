"""Input and output shapes of the REST API."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from ctxweb.contexts.services import FORMATS
from ctxweb.shapes import AuditEventOutput, SessionOutput

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


class TurnIngestInput(serializers.Serializer):  # type: ignore[type-arg]
    format = serializers.ChoiceField(choices=FORMATS)
    request = serializers.DictField()
    response = serializers.JSONField(required=False, allow_null=True)
    usage = serializers.DictField(required=False, allow_null=True)
    turn_id = TextField(required=False, allow_null=True, max_length=200, min_length=1)
    model = TextField(required=False, allow_blank=True, max_length=200)
    context_window = WholeField(required=False, allow_null=True, min_value=1, max_value=100_000_000)
    allow_orphans = FlagField(
        required=False,
        default=False,
        help_text=(
            "Store a context whose tool calls or results lack their other half (refused with a"
            " 400 naming the field otherwise)."
        ),
    )


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
