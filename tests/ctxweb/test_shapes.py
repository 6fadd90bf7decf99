"""One shape per resource: the API, the session WebSocket and the session page give a turn (and
an operation) the same fields, built by :mod:`ctxweb.shapes`."""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.test import Client

from ctxweb.contexts import events, selectors
from ctxweb.shapes import OperationOutput, TurnOutput
from tests.support.world import World

pytestmark = pytest.mark.django_db(transaction=True)

REQUEST = {
    "model": "gpt-4o",
    "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}],
}


def test_live_events_carry_every_column_their_shape_reads() -> None:
    turn_fields = {name for name, field in TurnOutput().fields.items()}
    assert turn_fields <= set(events.TURN_FIELDS)
    operation_fields = {
        (field.source.split(".")[0] if field.source != "*" else name)
        for name, field in OperationOutput().fields.items()
        if name != "error"
    }
    assert operation_fields <= {*events.OPERATION_FIELDS, "session"}


def _post_turn(world: World) -> dict[str, Any]:
    response = world.api(world.ingest_key).post(
        "/api/v1/sessions/shape/turns",
        json.dumps({"format": "openai-chat", "request": REQUEST}),
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    result: dict[str, Any] = response.json()
    return result


def test_a_turn_has_one_shape_in_the_api_the_socket_and_the_page(world: World) -> None:
    from ctxweb.asgi import application

    _post_turn(world)
    session = selectors.session_get(project=world.project, external_id="shape")
    assert session is not None
    turn = selectors.turn_latest(session=session)
    assert turn is not None

    listed = world.api(world.ingest_key).get("/api/v1/sessions/shape/turns").json()[0]

    client = Client()
    client.force_login(world.owner)
    page = client.get("/sessions/shape/")
    chart = page.context["chart"]["turns"][0]

    async def heard() -> dict[str, Any]:
        communicator = WebsocketCommunicator(
            application,
            "/ws/sessions/shape/",
            headers=[(b"origin", b"http://testserver"), (b"host", b"testserver")],
        )
        communicator.scope["user"] = world.owner
        connected, _ = await communicator.connect()
        assert connected
        await communicator.receive_json_from()  # hello
        await get_channel_layer().group_send(
            events.session_group(session.pk),
            {
                "type": "session.event",
                "event": {"type": "turn.created", "turn": events.turn_row(turn)},
            },
        )
        message: dict[str, Any] = await communicator.receive_json_from()
        await communicator.disconnect()
        return message

    socket = async_to_sync(heard)()["turn"]
    assert set(listed) == set(socket) == set(chart)
    assert listed == socket
    # The chart leaves out regions of zero tokens, and only that.
    assert chart == {**listed, "regions": {k: v for k, v in listed["regions"].items() if v}}
