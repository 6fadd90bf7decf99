"""Input and output shapes of the REST API."""

from __future__ import annotations

from rest_framework import serializers

from ctxweb.contexts.services import FORMATS


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


class SessionOutput(serializers.Serializer):  # type: ignore[type-arg]
    external_id = serializers.CharField()
    format = serializers.CharField()
    model = serializers.CharField()
    context_window = serializers.IntegerField()
    output_reserve = serializers.IntegerField()
    usable = serializers.IntegerField()
    encoding = serializers.CharField()
    approximate = serializers.BooleanField()
    turn_count = serializers.IntegerField()
    last_total_tokens = serializers.IntegerField()
    fill = serializers.FloatField()
    compaction_count = serializers.IntegerField()
    source = serializers.CharField()  # type: ignore[assignment]
    created_at = serializers.DateTimeField()
    last_activity_at = serializers.DateTimeField()


class SessionPageOutput(serializers.Serializer):  # type: ignore[type-arg]
    count = serializers.IntegerField()
    limit = serializers.IntegerField()
    offset = serializers.IntegerField()
    results = SessionOutput(many=True)


class TurnSummaryOutput(serializers.Serializer):  # type: ignore[type-arg]
    index = serializers.IntegerField()
    total_tokens = serializers.IntegerField()
    regions = serializers.DictField(child=serializers.IntegerField())
    reported_input_tokens = serializers.IntegerField(allow_null=True)
    events = serializers.ListField(child=serializers.DictField())
    context_window = serializers.IntegerField()
    max_output_tokens = serializers.IntegerField(allow_null=True)
    created_at = serializers.DateTimeField()
