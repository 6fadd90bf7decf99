"""The session WebSocket, through the real ASGI application and the configured channel layer."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.test import Client

from ctxweb.asgi import application
from ctxweb.live.consumers import CLOSE_NOT_FOUND, CLOSE_UNAUTHENTICATED
from tests.support.builders import body, history
from tests.support.world import World

pytestmark = pytest.mark.django_db(transaction=True)

ORIGIN = (b"origin", b"http://testserver")


@pytest.fixture(autouse=True)
def inline_tasks(settings: Any) -> None:
    settings.CTXWEB_TASKS_INLINE = True


def cookie_for(user: User) -> tuple[bytes, bytes]:
    client = Client()
    client.force_login(user)
    return (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())


def socket(path: str, *headers: tuple[bytes, bytes]) -> WebsocketCommunicator:
    return WebsocketCommunicator(application, path, headers=list(headers))


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    async_to_sync(scenario)()


def post_turn(world: World, external_id: str, payload: dict[str, Any]) -> Any:
    return world.api(world.ingest_key).post(
        f"/api/v1/sessions/{external_id}/turns",
        data=json.dumps(payload),
        content_type="application/json",
    )


async def receive_until(
    communicator: WebsocketCommunicator, kind: str, timeout: float = 10
) -> list[dict[str, Any]]:
    """Every message up to and including the first of type ``kind``."""
    seen: list[dict[str, Any]] = []
    while True:
        message = await communicator.receive_json_from(timeout=timeout)
        seen.append(message)
        if message["type"] == kind:
            return seen


@pytest.fixture
def session_id(world: World) -> str:
    assert post_turn(world, "live", body(history(1))).status_code == 201
    return "live"


def test_a_member_connects_and_hears_new_turns(world: World, session_id: str) -> None:
    cookie = cookie_for(world.teammate)  # a viewer may watch

    async def scenario() -> None:
        communicator = socket(f"/ws/sessions/{session_id}/", ORIGIN, cookie)
        connected, _ = await communicator.connect()
        assert connected
        assert (await communicator.receive_json_from())["type"] == "hello"
        response = await sync_to_async(post_turn)(world, session_id, body(history(2)))
        assert response.status_code == 201
        message = await communicator.receive_json_from(timeout=10)
        assert message["type"] == "turn.created"
        turn = message["turn"]
        assert turn["index"] == 1
        assert turn["total_tokens"] == response.json()["total_tokens"]
        assert sum(turn["regions"].values()) == turn["total_tokens"]
        assert set(turn) >= {
            "events",
            "context_window",
            "max_output_tokens",
            "reported_input_tokens",
        }
        await communicator.disconnect()

    run(scenario)


def test_a_session_whose_id_holds_slashes_is_live_too(world: World) -> None:
    # imported sessions carry their prefix: "tau/task-0-trial-0"
    assert post_turn(world, "import/run-1", body(history(1))).status_code == 201
    cookie = cookie_for(world.owner)

    async def scenario() -> None:
        communicator = socket("/ws/sessions/import/run-1/", ORIGIN, cookie)
        connected, _ = await communicator.connect()
        assert connected
        assert (await communicator.receive_json_from())["type"] == "hello"
        response = await sync_to_async(post_turn)(world, "import/run-1", body(history(2)))
        assert response.status_code == 201
        message = await communicator.receive_json_from(timeout=10)
        assert message["type"] == "turn.created"
        assert message["turn"]["index"] == 1
        await communicator.disconnect()

    run(scenario)


def test_operation_progress_and_finish_arrive_live(world: World, session_id: str) -> None:
    cookie = cookie_for(world.owner)

    async def scenario() -> None:
        communicator = socket(f"/ws/sessions/{session_id}/", ORIGIN, cookie)
        assert (await communicator.connect())[0]
        await communicator.receive_json_from()  # hello

        def apply() -> Any:
            return world.api(world.operator_key).post(
                f"/api/v1/sessions/{session_id}/operations",
                data={"strategy": "baseagent-middle-out"},
                format="json",
            )

        response = await sync_to_async(apply)()
        assert response.status_code == 202
        seen = await receive_until(communicator, "operation.finished")
        stages = [m["stage"] for m in seen if m["type"] == "operation.progress"]
        assert stages[:4] == ["starting", "loading context", "planning", "storing"]
        assert all({"stage", "done", "total"} <= set(m) for m in seen[:-1])
        finished = seen[-1]["operation"]
        assert finished["id"] == response.json()["id"]
        assert finished["status"] == "succeeded"
        assert finished["result"]["tokens_saved"] > 0
        await communicator.disconnect()

    run(scenario)


def test_an_anonymous_socket_is_closed(session_id: str) -> None:
    async def scenario() -> None:
        communicator = socket(f"/ws/sessions/{session_id}/", ORIGIN)
        connected, code = await communicator.connect()
        assert not connected
        assert code == CLOSE_UNAUTHENTICATED

    run(scenario)


def test_an_outsider_or_an_unknown_session_is_closed_with_4404(
    world: World, session_id: str
) -> None:
    outsider = cookie_for(world.outsider)
    member = cookie_for(world.owner)

    async def scenario() -> None:
        for path, cookie in (
            (f"/ws/sessions/{session_id}/", outsider),
            ("/ws/sessions/no-such-session/", member),
        ):
            communicator = socket(path, ORIGIN, cookie)
            connected, code = await communicator.connect()
            assert not connected
            assert code == CLOSE_NOT_FOUND

    run(scenario)


def test_a_foreign_origin_is_rejected(world: World, session_id: str) -> None:
    cookie = cookie_for(world.owner)

    async def scenario() -> None:
        for origin in (b"http://evil.example", None):
            headers = [cookie] + ([(b"origin", origin)] if origin else [])
            communicator = socket(f"/ws/sessions/{session_id}/", *headers)
            connected, _ = await communicator.connect()
            assert not connected

    run(scenario)
