"""The REST API of strategies, previews and artifacts: list the strategies, preview a plan on a
posted request or on a session's context, download an artifact. A preview writes nothing."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from ctxweb.api.access import require_access, require_session
from ctxweb.api.errors import ApiError
from ctxweb.api.schema import example
from ctxweb.api.serializers import TextField, WholeField
from ctxweb.contexts import services
from ctxweb.contexts.services import planning

# --- shapes -----------------------------------------------------------------------------------

#: Every strategy's id, as the schema lists them.
STRATEGY_IDS = [entry["id"] for entry in planning.strategy_catalog()]


@extend_schema_field({"type": "string", "enum": STRATEGY_IDS})
class StrategyField(TextField):
    """A strategy's id: the schema lists them; the planner names an unknown one."""


class ParamOutput(serializers.Serializer):  # type: ignore[type-arg]
    name = serializers.CharField()
    type = serializers.ChoiceField(choices=["int", "float", "bool", "str", "str-list"])
    default = serializers.JSONField(allow_null=True)
    min = serializers.FloatField(allow_null=True)
    max = serializers.FloatField(allow_null=True)
    choices = serializers.ListField(child=serializers.JSONField(), allow_null=True)
    help = serializers.CharField()


class StrategyOutput(serializers.Serializer):  # type: ignore[type-arg]
    id = serializers.CharField()
    description = serializers.CharField()
    source = serializers.CharField()  # type: ignore[assignment]
    params = ParamOutput(many=True)


class PreviewInput(serializers.Serializer):  # type: ignore[type-arg]
    format = serializers.ChoiceField(choices=services.FORMATS)
    request = serializers.DictField()
    strategy = StrategyField(max_length=64, min_length=1)
    params = serializers.DictField(required=False, allow_null=True)


class SessionPreviewInput(serializers.Serializer):  # type: ignore[type-arg]
    strategy = StrategyField(max_length=64, min_length=1)
    params = serializers.DictField(required=False, allow_null=True)
    turn = WholeField(required=False, allow_null=True, min_value=0)


class TotalsOutput(serializers.Serializer):  # type: ignore[type-arg]
    regions = serializers.DictField(child=serializers.IntegerField())
    total = serializers.IntegerField()


class EditOutput(serializers.Serializer):  # type: ignore[type-arg]
    kind = serializers.CharField()
    message_index = serializers.IntegerField()
    part_index = serializers.IntegerField(allow_null=True)
    tokens_before = serializers.IntegerField()
    tokens_after = serializers.IntegerField()
    tokens_saved = serializers.IntegerField()
    detail = serializers.CharField()
    artifact_id = serializers.CharField(allow_null=True)


class ArtifactSummaryOutput(serializers.Serializer):  # type: ignore[type-arg]
    id = serializers.CharField()
    kind = serializers.CharField()
    size = serializers.IntegerField()
    tokens = serializers.IntegerField()
    summary = serializers.CharField()


class ContextOutput(serializers.Serializer):  # type: ignore[type-arg]
    format = serializers.CharField()
    request = serializers.DictField()


class PricesOutput(serializers.Serializer):  # type: ignore[type-arg]
    input = serializers.FloatField()
    cache_write = serializers.FloatField()
    cache_read = serializers.FloatField()
    per = serializers.CharField()
    as_of = serializers.CharField(help_text="the date of the built-in table, or the setting")


class CacheOutput(serializers.Serializer):  # type: ignore[type-arg]
    """What the plan does to the provider's prompt cache."""

    prefix_messages = serializers.IntegerField(help_text="leading messages kept byte-identical")
    prefix_tokens = serializers.IntegerField(
        help_text="leading tokens kept byte-identical: what the prompt cache still serves"
    )
    rewrite_tokens = serializers.IntegerField(
        help_text="tokens the next call writes to the cache again"
    )
    model = serializers.CharField(allow_null=True)
    priced_as = serializers.CharField(allow_null=True, help_text="the price table's entry")
    prices = PricesOutput(allow_null=True)
    next_call_cost_before = serializers.FloatField(
        allow_null=True, help_text="USD: the whole context read from the cache"
    )
    next_call_cost_after = serializers.FloatField(
        allow_null=True, help_text="USD: the kept prefix read, the rest written to the cache"
    )


class PlanOutput(serializers.Serializer):  # type: ignore[type-arg]
    strategy = serializers.CharField()
    params = serializers.DictField()
    encoding = serializers.CharField()
    context = ContextOutput()  # type: ignore[assignment]
    before = TotalsOutput()
    after = TotalsOutput()
    tokens_saved = serializers.IntegerField()
    regions_saved = serializers.DictField(child=serializers.IntegerField())
    edits = EditOutput(many=True)
    warnings = serializers.ListField(child=serializers.CharField())
    artifacts = ArtifactSummaryOutput(many=True)
    cache = CacheOutput()


class SessionPlanOutput(PlanOutput):
    session = serializers.CharField()
    turn = serializers.IntegerField(allow_null=True)


def _body(request: Request) -> dict[str, Any]:
    if not isinstance(request.data, dict):
        raise ApiError("The body must be a JSON object.", fields={"request": "expected an object"})
    return request.data


# --- views ------------------------------------------------------------------------------------


class StrategyListApi(APIView):
    """Every strategy: id, description, source, parameters with defaults and ranges."""

    @extend_schema(responses={200: StrategyOutput(many=True)})
    def get(self, request: Request) -> Response:
        require_access(request)
        return Response(planning.strategy_catalog())


class PreviewApi(APIView):
    """Stateless preview: the plan a strategy makes for a posted request. Writes nothing."""

    @extend_schema(request=PreviewInput, responses={200: PlanOutput}, examples=[example("preview")])
    def post(self, request: Request) -> Response:
        require_access(request)
        data = PreviewInput(data=_body(request))
        data.is_valid(raise_exception=True)
        body = data.validated_data
        context, encoding = planning.preview_request_context(
            format=body["format"], request=body["request"]
        )
        plan = planning.preview_plan(
            context=context,
            strategy=body["strategy"],
            params=body.get("params"),
            encoding=encoding,
        )
        return Response(
            {
                **planning.plan_to_json(plan),
                "encoding": encoding,
                "cache": planning.plan_cache(context=context, plan=plan, encoding=encoding),
            }
        )


class SessionPreviewApi(APIView):
    """The plan a strategy makes for a session's latest context, or for turn ``turn``'s."""

    @extend_schema(
        request=SessionPreviewInput,
        responses={200: SessionPlanOutput},
        examples=[example("session_preview")],
    )
    def post(self, request: Request, external_id: str) -> Response:
        session = require_session(require_access(request), external_id)
        data = SessionPreviewInput(data=_body(request))
        data.is_valid(raise_exception=True)
        body = data.validated_data
        turn = body.get("turn")
        try:
            context = planning.session_preview_context(session=session, turn=turn)
        except planning.PreviewUnavailable as error:
            raise ApiError(str(error), fields=error.fields()) from None
        plan = planning.preview_plan(
            context=context,
            strategy=body["strategy"],
            params={
                **planning.session_defaults(session=session, strategy=body["strategy"]),
                **(body.get("params") or {}),
            },
            encoding=session.encoding,
        )
        return Response(
            {
                **planning.plan_to_json(plan),
                "encoding": session.encoding,
                "cache": planning.plan_cache(
                    context=context,
                    plan=plan,
                    encoding=session.encoding,
                    model=session.model or None,
                ),
                "session": session.external_id,
                "turn": turn,
            }
        )
