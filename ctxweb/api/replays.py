"""The REST API of replays: replay a session under one to six policies in the background, list and
read the replays, the presets (each seed agent's own policy), apply a replayed policy to the
session or as the project's default; and the project's default policy itself. Every member and
key reads; only operators replay, apply and set policies (viewers and ingest keys are told so:
403); outsiders see nothing (404)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.urls import reverse
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import BaseThrottle
from rest_framework.views import APIView

from compaction.errors import StrategyError
from ctxweb.api.access import not_found, require_access, require_session
from ctxweb.api.errors import ApiError, error_response
from ctxweb.api.operations import POLICY_SCHEMA, PolicyField, actor_of, conflict, require_operator
from ctxweb.api.pagination import StrictLimitOffsetPagination, page_parameters
from ctxweb.api.schema import example
from ctxweb.api.strategies import STRATEGY_IDS
from ctxweb.api.throttling import ApiRateThrottle
from ctxweb.contexts import selectors
from ctxweb.contexts.services import replays
from ctxweb.numbers import parse_whole

if TYPE_CHECKING:
    from ctxweb.accounts.access import Access
    from ctxweb.contexts.models import Replay, Session


#: A trigger as the schema documents it (a policy's).
TRIGGER_SCHEMA: dict[str, Any] = POLICY_SCHEMA["properties"]["trigger"]

#: A replayed policy as a caller gives it.
REPLAY_POLICY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["strategy"],
    "properties": {
        "label": {
            "type": "string",
            "nullable": True,
            "maxLength": replays.MAX_LABEL,
            "description": "made of the strategy and trigger when absent, null or empty",
        },
        "strategy": {
            "type": "string",
            "enum": STRATEGY_IDS,
            "description": "a strategy id (GET strategies)",
        },
        "params": {"type": "object", "nullable": True, "additionalProperties": True},
        "trigger": TRIGGER_SCHEMA,
    },
}


@extend_schema_field(
    {
        "type": "array",
        "minItems": 1,
        "maxItems": replays.MAX_POLICIES,
        "items": REPLAY_POLICY_SCHEMA,
    }
)
class PoliciesField(serializers.Field):  # type: ignore[type-arg]
    """The policies as given: the replay service checks them and names the field at fault
    (``policies[2].trigger.fraction``)."""

    def to_internal_value(self, data: Any) -> Any:
        return data

    def to_representation(self, value: Any) -> Any:
        return value


class ReplayInput(serializers.Serializer):  # type: ignore[type-arg]
    policies = PoliciesField()


class ReplayColumnOutput(serializers.Serializer):  # type: ignore[type-arg]
    label = serializers.CharField()  # type: ignore[assignment]  # a field, not the label
    strategy = serializers.CharField(allow_null=True, help_text="None: the session as recorded")
    params = serializers.DictField()
    trigger = serializers.DictField(allow_null=True)


class ReplayOutput(serializers.Serializer):  # type: ignore[type-arg]
    """A replay as :func:`ctxweb.contexts.selectors.replay_data` gives it (lists: no results)."""

    id = serializers.IntegerField()
    status = serializers.ChoiceField(choices=["queued", "running", "succeeded", "failed"])
    done = serializers.IntegerField(help_text="turns walked, over every column")
    total = serializers.IntegerField(help_text="turns times columns")
    policies = ReplayColumnOutput(many=True, help_text="column 0 is the session as recorded")
    created_by = serializers.CharField(allow_null=True)
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    error = serializers.CharField(allow_null=True)


class ReplayDetailOutput(ReplayOutput):
    results = serializers.ListField(
        child=serializers.DictField(allow_null=True),
        help_text="one a column, in the policies' order: None until that column finished, then"
        " its turns, compactions, errors, totals and facts lost",
    )


class ReplayCreatedOutput(ReplayOutput):
    url = serializers.CharField()


class ReplayPageOutput(serializers.Serializer):  # type: ignore[type-arg]
    count = serializers.IntegerField()
    limit = serializers.IntegerField()
    offset = serializers.IntegerField()
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    results = ReplayOutput(many=True)


def replay_url(session: Session, replay: Replay) -> str:
    return reverse("api-replay", args=[session.external_id, str(replay.pk)])


class ReplayCreateApi(APIView):
    """Replay the session under ``{"policies": [...]}`` in the background."""

    @extend_schema(
        request=ReplayInput,
        responses={202: ReplayCreatedOutput},
        examples=[example("replay")],
    )
    def post(self, request: Request, external_id: str) -> Response:
        """Replay the session under one to six policies ``{"label"?, "strategy", "params"?,
        "trigger"?}`` (operators and operator keys): ``202`` with the replay to follow at
        ``url`` (also ``Location``); column 0 is the session as recorded. A session without
        turns is a 409; a session of more than ``CTXWEB_REPLAY_MAX_TURNS`` turns, a 400
        naming its count (``fields.session``); a project already running
        ``CTXWEB_REPLAYS_ACTIVE_PER_PROJECT`` replays, a 429."""
        access = require_access(request)
        session = require_session(access, external_id)
        require_operator(access)
        data = ReplayInput(data=request.data)
        data.is_valid(raise_exception=True)
        actor = actor_of(request)
        try:
            replay = replays.replay_create(
                session=session,
                policies=data.validated_data["policies"],
                created_by=actor,
                key_name=getattr(actor, "prefix", "") or "",
            )
        except replays.ReplayUnavailable as exc:
            raise conflict(exc.reason, exc.path) from None
        except replays.ReplayTooLong as exc:
            return error_response("invalid", str(exc), status.HTTP_400_BAD_REQUEST, exc.fields())
        except replays.ReplayBusy as exc:
            busy = error_response("busy", str(exc), status.HTTP_429_TOO_MANY_REQUESTS)
            busy["Retry-After"] = "5"
            return busy
        replay.refresh_from_db()
        url = replay_url(session, replay)
        return Response(
            {**selectors.replay_data(replay), "url": url},
            status=status.HTTP_202_ACCEPTED,
            headers={"Location": url},
        )


class ReplayListApi(APIView):
    """The session's replays, newest first, in pages, without their results."""

    @extend_schema(
        parameters=page_parameters(),
        responses={200: ReplayPageOutput},
        operation_id="v1_sessions_replays_list",
    )
    def get(self, request: Request, external_id: str) -> Response:
        """The session's replays, newest first, in pages (each without its results: read one
        for them). Every member and key of the project reads it."""
        session = require_session(require_access(request), external_id)
        paginator = StrictLimitOffsetPagination()
        found = selectors.replay_list(session=session)
        page = paginator.paginate_queryset(found, request, view=self) or []
        return paginator.get_paginated_response([selectors.replay_data(r) for r in page])


class SessionReplaysApi(ReplayListApi, ReplayCreateApi):
    """``sessions/{external_id}/replays``: GET lists the session's replays, POST starts one."""

    def get_throttles(self) -> list[BaseThrottle]:
        # Starting a replay walks a whole session several times (the costly budget); reading
        # the list is as cheap as any other read, so it counts against the general limit only.
        throttles = super().get_throttles()
        if self.request.method in ("GET", "HEAD", "OPTIONS"):
            return [t for t in throttles if type(t) is ApiRateThrottle]
        return throttles


def require_replay(access: Access, external_id: str, replay_id: str) -> Replay:
    """The session's replay ``replay_id`` (a whole number), or a 404."""
    session = require_session(access, external_id)
    pk = parse_whole(replay_id)
    replay = None if pk is None else selectors.replay_get(session=session, replay_id=pk)
    if replay is None:
        raise not_found(f"Replay {replay_id}")
    return replay


class ReplayDetailApi(APIView):
    """A replay's status, progress and, column by column, its results."""

    @extend_schema(responses={200: ReplayDetailOutput})
    def get(self, request: Request, external_id: str, replay_id: str) -> Response:
        replay = require_replay(require_access(request), external_id, replay_id)
        return Response(selectors.replay_data(replay, results=True))


class ReplayPresetsOutput(serializers.Serializer):  # type: ignore[type-arg]
    presets = ReplayColumnOutput(many=True)


class ReplayPresetsApi(APIView):
    """Each seed agent's own policy and ctxweb-auto at three targets, sized to the session."""

    @extend_schema(responses={200: ReplayPresetsOutput})
    def get(self, request: Request, external_id: str) -> Response:
        session = require_session(require_access(request), external_id)
        return Response({"presets": replays.replay_presets(session=session)})


class ReplayApplyInput(serializers.Serializer):  # type: ignore[type-arg]
    column = serializers.IntegerField(min_value=0, max_value=replays.MAX_POLICIES)
    to = serializers.ChoiceField(choices=["session", "project"])


class ReplayApplyOutput(serializers.Serializer):  # type: ignore[type-arg]
    to = serializers.CharField()
    column = serializers.IntegerField()
    policy = PolicyField()


class ReplayApplyApi(APIView):
    """Set a replayed column's policy as the session's automatic policy or the project's
    default."""

    @extend_schema(request=ReplayApplyInput, responses={200: ReplayApplyOutput})
    def post(self, request: Request, external_id: str, replay_id: str) -> Response:
        """``{"column": n, "to": "session"}`` makes column ``n``'s policy the session's
        automatic policy; ``"to": "project"``, the project's default for new sessions (its
        window and reserve parameters left out: each session takes its own). Column 0, as
        recorded, clears the automatic policy. Operators only."""
        access = require_access(request)
        replay = require_replay(access, external_id, replay_id)
        require_operator(access)
        data = ReplayApplyInput(data=request.data)
        data.is_valid(raise_exception=True)
        column, to = data.validated_data["column"], data.validated_data["to"]
        actor = actor_of(request)
        if to == "session":
            session = replays.replay_set_session_policy(replay=replay, column=column, actor=actor)
            policy = session.policy
        else:
            project = replays.replay_set_project_default(replay=replay, column=column, actor=actor)
            policy = project.default_policy
        return Response({"to": to, "column": column, "policy": policy})


class ProjectOutput(serializers.Serializer):  # type: ignore[type-arg]
    name = serializers.CharField()
    default_policy = PolicyField(help_text="what a new session of the project starts with")


class ProjectInput(serializers.Serializer):  # type: ignore[type-arg]
    default_policy = PolicyField()


class ProjectApi(APIView):
    """``project``: the caller's project; PATCH sets its default policy (operators)."""

    @extend_schema(responses={200: ProjectOutput})
    def get(self, request: Request) -> Response:
        """The caller's project: its name and the policy its new sessions start with."""
        project = require_access(request).project
        return Response({"name": project.name, "default_policy": project.default_policy or {}})

    @extend_schema(request=ProjectInput, responses={200: ProjectOutput})
    def patch(self, request: Request) -> Response:
        """Set ``{"default_policy": {"auto"?, "trigger"?}}``, checked as a session's policy
        (a 400 names the field): new sessions start with it; existing ones keep theirs."""
        access = require_access(request)
        require_operator(access)
        if isinstance(request.data, dict):
            for key in request.data:
                if key != "default_policy":
                    raise ApiError(
                        f'Unknown field {key!r}: the body is {{"default_policy": {{...}}}}.',
                        fields={key: "unknown field"},
                    )
        data = ProjectInput(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            project = replays.project_policy_set(
                project=access.project,
                policy=data.validated_data["default_policy"],
                actor=actor_of(request),
            )
        except StrategyError as exc:  # the policy service names "policy...": this body's field
            path = "default_policy" + exc.path.removeprefix("policy")
            raise StrategyError(path, exc.reason) from None
        return Response({"name": project.name, "default_policy": project.default_policy})
