"""A deleted session's live group goes with it (issue 34): a socket watching the session when it is
deleted (``DELETE /api/v1/sessions/{id}``, or by its project's retention) is told and closed, and
leaves the group; a session created again under the same id is a new group, which the old socket
never hears, while a socket opened on the new session hears it.

Through the real ASGI application, the configured channel layer and the REST API."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from ctxweb.asgi import application
from ctxweb.contexts.models import Session
from ctxweb.contexts.services.deletion import sessions_expire
from ctxweb.live.consumers import CLOSE_NOT_FOUND
from tests.support.builders import body, history
from tests.support.world import World

pytestmark = pytest.mark.django_db(transaction=True)

ORIGIN = (b"origin", b"http://testserver")
SESSION = "deleted-then-again"


@pytest.fixture(autouse=True)
def inline_tasks(settings: Any) -> None:
    settings.CTXWEB_TASKS_INLINE = True


def cookie_for(user: User) -> tuple[bytes, bytes]:
    client = Client()
    client.force_login(user)
    return (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    async_to_sync(scenario)()


def post_turn(key: str, steps: int) -> int:
    client = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
    response = client.post(
        f"/api/v1/sessions/{SESSION}/turns",
        data=json.dumps(body(history(steps))),
        content_type="application/json",
    )
    return response.status_code


def delete_session(key: str) -> int:
    client = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client.delete(f"/api/v1/sessions/{SESSION}").status_code


async def connected(cookie: tuple[bytes, bytes]) -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(
        application, f"/ws/sessions/{SESSION}/", headers=[ORIGIN, cookie]
    )
    ok, _ = await communicator.connect()
    assert ok
    assert (await communicator.receive_json_from(timeout=10))["type"] == "hello"
    return communicator


async def told_deleted_and_closed(communicator: WebsocketCommunicator) -> None:
    assert (await communicator.receive_json_from(timeout=10)) == {"type": "session.deleted"}
    closing = await communicator.receive_output(timeout=10)
    assert closing == {"type": "websocket.close", "code": CLOSE_NOT_FOUND}


def session_pk() -> int:
    return Session.objects.get(external_id=SESSION).pk


def test_it_closes_the_socket_of_a_deleted_session_and_never_feeds_it_the_new_one(
    world: World,
) -> None:
    assert post_turn(world.ingest_key, 1) == 201
    deleted_pk = session_pk()
    cookie = cookie_for(world.owner)

    async def scenario() -> None:
        old = await connected(cookie)
        assert await sync_to_async(delete_session)(world.operator_key) == 204
        await told_deleted_and_closed(old)
        # The same id again: a new session, a new group.
        assert await sync_to_async(post_turn)(world.ingest_key, 2) == 201
        assert await sync_to_async(session_pk)() != deleted_pk
        new = await connected(cookie)
        assert await sync_to_async(post_turn)(world.ingest_key, 3) == 201
        heard = await new.receive_json_from(timeout=10)
        assert heard["type"] == "turn.created"
        assert heard["turn"]["index"] == 1
        # The old socket (its application still running until the page leaves) heard neither
        # the new session's first turn nor its second.
        assert await old.receive_nothing(timeout=0.5)
        await new.disconnect()
        await old.disconnect()

    run(scenario)


def test_it_closes_the_socket_of_a_session_its_retention_deleted(world: World) -> None:
    assert post_turn(world.ingest_key, 1) == 201
    world.project.retention_days = 1
    world.project.save()
    cookie = cookie_for(world.owner)

    def expire() -> dict[str, int]:
        return sessions_expire(now=timezone.now() + timedelta(days=2))

    async def scenario() -> None:
        old = await connected(cookie)
        assert await sync_to_async(expire)() == {world.project.name: 1}
        await told_deleted_and_closed(old)
        assert await sync_to_async(post_turn)(world.ingest_key, 2) == 201
        assert await old.receive_nothing(timeout=0.5)
        await old.disconnect()

    run(scenario)
