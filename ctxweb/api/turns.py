"""The REST API of turns: ingest one model call (the session is created on first use), list a
session's turns for the chart, read one turn's messages."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.http import StreamingHttpResponse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.urls import replace_query_param
from rest_framework.views import APIView

from ctxweb.api.access import not_found, require_access, require_session, require_writer
from ctxweb.api.errors import ApiError
from ctxweb.api.pagination import MAX_LIMIT, MAX_OFFSET, optional_integer
from ctxweb.api.schema import example
from ctxweb.api.serializers import TurnIngestInput, TurnIngestOutput, turn_ingest_input
from ctxweb.contexts import selectors, services
from ctxweb.shapes import TurnOutput, shape_secrets

if TYPE_CHECKING:
    from compaction.messages import Context
    from ctxweb.accounts.access import Access
    from ctxweb.accounts.models import Project
    from ctxweb.contexts.models import Session

#: The longest session id: the column's length.
EXTERNAL_ID_MAX = 200


class TurnIngestApi(APIView):
    """Ingest one model call; the session is created on first use."""

    #: The request's message lists are depth-checked by the format parsers and searched for
    #: NUL characters once per new message (:func:`services.turn_request_parse`): the body
    #: parser does not walk them.
    checks_messages = services.MESSAGE_KEYS
    #: What decoding this request's body learned of it (``decode_body``), for the next turn.
    raw_body: services.TurnBody | None = None
    #: The request's access, once ``post`` has it (the body is decoded after).
    access: Access | None = None

    def decode_body(self, request: Request, raw: bytes, decode: Callable[[bytes], Any]) -> Any:
        """The body, decoded without the messages the session's previous body in this process
        held byte for byte (called by the body parser; raises what ``decode`` raises)."""
        access = self.access or require_access(request)
        data, self.raw_body = services.turn_body_decode(
            project=access.project,
            external_id=self.kwargs.get("external_id", ""),
            raw=raw,
            decode=decode,
        )
        return data

    def checked_before(self) -> tuple[str, ...]:
        """The keys of this body's ``request`` (tools, system prompt...) whose values equal what
        the session's previous body in this process sent, checked then: the parser does not
        walk them again."""
        return self.raw_body.checked if self.raw_body is not None else ()

    @extend_schema(
        request=TurnIngestInput,
        responses={201: TurnIngestOutput, 200: TurnIngestOutput},
        examples=[example("turn")],
    )
    def post(self, request: Request, external_id: str) -> Response:
        access = self.access = require_access(request)
        require_writer(access)
        if not isinstance(request.data, dict):
            raise ApiError(
                "The body must be a JSON object.", fields={"request": "expected an object"}
            )
        if len(external_id) > EXTERNAL_ID_MAX:
            raise ApiError(
                f"A session id has at most {EXTERNAL_ID_MAX} characters.",
                fields={"external_id": f"at most {EXTERNAL_ID_MAX} characters"},
            )
        body = turn_ingest_input(request.data)
        if body is None:  # the serializer's checks and messages
            data = TurnIngestInput(data=request.data)
            data.is_valid(raise_exception=True)
            body = data.validated_data
        context = services.turn_request_parse(
            project=access.project,
            external_id=external_id,
            format=body["format"],
            request=body["request"],
            body=self.raw_body,
        )
        if not body.get("allow_orphans"):
            refuse_orphans(
                context, body["request"], project=access.project, external_id=external_id
            )
        try:
            result = services.turn_ingest(
                project=access.project,
                external_id=external_id,
                context=context,
                model=body.get("model") or None,
                response=body.get("response"),
                usage=body.get("usage"),
                turn_id=body.get("turn_id"),
                body=request.data,
                context_window=body.get("context_window"),
            )
        except services.SessionFormatConflict as conflict:
            raise ApiError(
                str(conflict),
                code="conflict",
                status_code=status.HTTP_409_CONFLICT,
                fields={"format": f"the session's turns are {conflict.session_format}"},
            ) from None
        except services.TurnConflict:
            raise ApiError(
                "This turn_id was already used with a different body.",
                code="conflict",
                status_code=status.HTTP_409_CONFLICT,
                fields={"turn_id": "reused with a different body"},
            ) from None
        turn = result.turn
        return Response(
            {
                "session": external_id,
                "index": turn.index,
                "total_tokens": turn.total_tokens,
                "regions": turn.regions,
                "context_window": turn.context_window,
                "usage_ratio": turn.total_tokens / turn.context_window,
                "reported_input_tokens": turn.reported_input_tokens,
                "events": turn.events,
                "secrets": shape_secrets(turn.secrets),
            },
            status=status.HTTP_201_CREATED if result.created else status.HTTP_200_OK,
        )


def refuse_orphans(
    context: Context,
    request: dict[str, Any],
    *,
    project: Project | None = None,
    external_id: str | None = None,
) -> None:
    """Refuse a context with orphaned tool calls or results (a 400 naming each raw field);
    ``"allow_orphans": true`` in the body accepts it (:func:`services.turn_orphans`)."""
    fields = services.turn_orphans(
        context=context, request=request, project=project, external_id=external_id
    )
    if fields:
        raise ApiError(
            'The context has orphaned tool calls or results; send "allow_orphans": true to store'
            " it as it is.",
            code="orphaned_tool_messages",
            fields=fields,
        )


def _every_turn(session: Session, after: int | None) -> Iterator[bytes]:
    """The session's turns (after ``after``) as one JSON array, written as it is read:
    ``CTXWEB_TURN_LIST_PAGE`` turns a query (the next after the last one's index) and a
    chunk, so what the server holds is one such page however long the session (a proxied
    agent's session grows by a turn a call; built whole before the first byte went out, 800
    turns held 4.7 MB, about 6 KB a turn: 600 MB for 100,000). A failure past the first page
    ends the answer early: its array is then unfinished, as a download cut short."""
    renderer = JSONRenderer()
    size = settings.CTXWEB_TURN_LIST_PAGE
    yield b"["
    separator = b""
    while True:
        page = list(selectors.turn_list(session=session, after=after)[:size])
        if not page:
            break
        rendered = renderer.render(TurnOutput(page, many=True).data)
        yield separator + rendered[1:-1]  # the page's array without its brackets
        separator = b","
        if len(page) < size:
            break
        after = page[-1].index
    yield b"]"


class TurnListApi(APIView):
    """Per-turn regions for the chart, every turn in order; ``?after=`` and ``?limit=`` take a
    part of them (a chart catching up, a client reading a long session by pages): still an
    array, with a ``Link`` header to the next page when more follow (as GitHub's API pages).
    Without ``limit`` the array is streamed, a page of turns at a time."""

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "after",
                {"type": "integer", "minimum": 0, "maximum": MAX_OFFSET},
                description="only the turns whose index is greater than this",
            ),
            OpenApiParameter(
                "limit",
                {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
                description=(
                    f"at most this many turns, 1 to {MAX_LIMIT} (every turn when not given);"
                    " when more follow, the Link header names the next page"
                ),
            ),
            OpenApiParameter(
                "Link",
                str,
                location=OpenApiParameter.HEADER,
                response=[200],
                description='the next page, `<url>; rel="next"`, when ``limit`` left turns out',
            ),
        ],
        responses={200: TurnOutput(many=True)},
    )
    def get(self, request: Request, external_id: str) -> Response | StreamingHttpResponse:
        session = require_session(require_access(request), external_id)
        after = optional_integer(request, "after", 0, MAX_OFFSET)
        limit = optional_integer(request, "limit", 1, MAX_LIMIT)
        if limit is None:
            return StreamingHttpResponse(
                _every_turn(session, after), content_type="application/json"
            )
        page = list(selectors.turn_list(session=session, after=after)[: limit + 1])
        response = Response(TurnOutput(page[:limit], many=True).data)
        if len(page) > limit:
            following = replace_query_param(
                request.build_absolute_uri(), "after", page[limit - 1].index
            )
            response["Link"] = f'<{following}>; rel="next"'
        return response


class TurnDetailApi(APIView):
    """One turn's messages, each with role, region, tokens, placeholders and artifact ids."""

    @extend_schema(responses={200: dict})
    def get(self, request: Request, external_id: str, index: int) -> Response:
        session = require_session(require_access(request), external_id)
        turn = selectors.turn_get(session=session, index=index)
        if turn is None:
            raise not_found(f"Turn {index}")
        detail = selectors.turn_detail(turn=turn)
        detail["secrets"] = shape_secrets(detail["secrets"])
        return Response(detail)


class TurnAttributionApi(APIView):
    """What fills one turn, item by item: its regions, each with its items largest first (tool
    definitions by MCP server, tool calls and outputs, files, instruction blocks...), and what
    changed since the previous turn."""

    @extend_schema(responses={200: dict})
    def get(self, request: Request, external_id: str, index: int) -> Response:
        session = require_session(require_access(request), external_id)
        turn = selectors.turn_get(session=session, index=index)
        if turn is None:
            raise not_found(f"Turn {index}")
        turn.session = session
        return Response(selectors.turn_attribution(turn=turn))


class TurnsApi(TurnIngestApi, TurnListApi):
    """``sessions/{external_id}/turns``: POST ingests a turn, GET lists them for the chart."""
