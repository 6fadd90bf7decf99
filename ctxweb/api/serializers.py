"""Input and output shapes of the REST API."""

from __future__ import annotations

from rest_framework import serializers

from ctxweb.contexts.services import FORMATS
from ctxweb.shapes import SessionOutput


class TurnIngestInput(serializers.Serializer):  # type: ignore[type-arg]
    format = serializers.ChoiceField(choices=FORMATS)
    request = serializers.DictField()
    response = serializers.JSONField(required=False, allow_null=True)
    usage = serializers.DictField(required=False, allow_null=True)
    turn_id = serializers.CharField(required=False, allow_null=True, max_length=200)
    model = serializers.CharField(required=False, allow_blank=True, max_length=200)
    context_window = serializers.IntegerField(
        required=False, allow_null=True, min_value=1, max_value=100_000_000
    )
    allow_orphans = serializers.BooleanField(
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
