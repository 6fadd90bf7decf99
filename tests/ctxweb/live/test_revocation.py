"""Access revoked at once, and always the right project: an open socket closes when its user
loses the project (membership removed, user deactivated) or its session is deleted; a user in two
projects that both hold a session ``dup`` hears, and catches up on, the page's project only."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.test import Client

from ctxweb.accounts.models import Membership, Role
from ctxweb.accounts.services import membership_set
from ctxweb.asgi import application
from ctxweb.live import consumers
from ctxweb.live.consumers import CLOSE_FORBIDDEN, CLOSE_NOT_FOUND
from tests.support.builders import body, history
from tests.support.world import World, streamed_json

pytestmark = pytest.mark.django_db(transaction=True)

ORIGIN = (b"origin", b"http://testserver")


@pytest.fixture(autouse=True)
def inline_tasks(settings: Any) -> None:
    settings.CTXWEB_TASKS_INLINE = True


def logged_in(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def cookie_of(client: Client) -> tuple[bytes, bytes]:
    return (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())


def socket(path: str, *headers: tuple[bytes, bytes]) -> WebsocketCommunicator:
    return WebsocketCommunicator(application, path, headers=list(headers))


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    async_to_sync(scenario)()


def post_turn(key: str, external_id: str, payload: dict[str, Any]) -> Any:
    client = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client.post(
        f"/api/v1/sessions/{external_id}/turns",
        data=json.dumps(payload),
        content_type="application/json",
    )


async def closed_with(communicator: WebsocketCommunicator) -> int:
    """The close code, after any messages sent before it."""
    while True:
        output = await communicator.receive_output(timeout=10)
        if output["type"] == "websocket.close":
            return int(output.get("code", 1000))


async def connected(path: str, cookie: tuple[bytes, bytes]) -> WebsocketCommunicator:
    communicator = socket(path, ORIGIN, cookie)
    ok, _ = await communicator.connect()
    assert ok
    assert (await communicator.receive_json_from())["type"] == "hello"
    return communicator


@pytest.fixture
def live(world: World) -> str:
    assert post_turn(world.ingest_key, "live", body(history(1))).status_code == 201
    return "live"


def test_a_removed_members_open_socket_closes(world: World, live: str) -> None:
    cookie = cookie_of(logged_in(world.teammate))

    async def scenario() -> None:
        communicator = await connected(f"/ws/sessions/{live}/", cookie)
        await sync_to_async(
            Membership.objects.filter(project=world.project, user=world.teammate).delete
        )()
        assert await closed_with(communicator) == CLOSE_FORBIDDEN

    run(scenario)


def test_a_deactivated_users_open_socket_closes(world: World, live: str) -> None:
    cookie = cookie_of(logged_in(world.teammate))

    async def scenario() -> None:
        communicator = await connected(f"/ws/sessions/{live}/", cookie)

        def deactivate() -> None:
            world.teammate.is_active = False
            world.teammate.save()

        await sync_to_async(deactivate)()
        assert await closed_with(communicator) == CLOSE_FORBIDDEN

    run(scenario)


def test_a_member_of_another_project_removed_keeps_this_socket(world: World, live: str) -> None:
    membership_set(project=world.other_project, user=world.teammate, role=Role.VIEWER)
    cookie = cookie_of(logged_in(world.teammate))

    async def scenario() -> None:
        communicator = await connected(f"/ws/sessions/{live}/", cookie)
        await sync_to_async(
            Membership.objects.filter(project=world.other_project, user=world.teammate).delete
        )()
        response = await sync_to_async(post_turn)(world.ingest_key, live, body(history(2)))
        assert response.status_code == 201
        message = await communicator.receive_json_from(timeout=10)
        assert message["type"] == "turn.created"
        await communicator.disconnect()

    run(scenario)


def test_access_lost_without_a_signal_closes_at_the_next_event(
    world: World, live: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(consumers, "RECHECK_SECONDS", 0.0)
    cookie = cookie_of(logged_in(world.teammate))

    async def scenario() -> None:
        communicator = await connected(f"/ws/sessions/{live}/", cookie)
        # A bulk update sends no signal: the check before forwarding finds it.
        await sync_to_async(User.objects.filter(pk=world.teammate.pk).update)(is_active=False)
        await sync_to_async(post_turn)(world.ingest_key, live, body(history(2)))
        assert await closed_with(communicator) == CLOSE_FORBIDDEN

    run(scenario)


def test_a_deleted_sessions_socket_closes(world: World, live: str) -> None:
    cookie = cookie_of(logged_in(world.owner))

    async def scenario() -> None:
        communicator = await connected(f"/ws/sessions/{live}/", cookie)
        client = Client(HTTP_AUTHORIZATION=f"Bearer {world.operator_key}")
        response = await sync_to_async(client.delete)(f"/api/v1/sessions/{live}")
        assert response.status_code == 204
        assert (await communicator.receive_json_from(timeout=10))["type"] == "session.deleted"
        assert await closed_with(communicator) == CLOSE_NOT_FOUND

    run(scenario)


def test_a_user_in_two_projects_hears_and_catches_up_on_the_pages_project_only(
    world: World,
) -> None:
    # The owner of alpha joins beta; both projects hold a session "dup".
    membership_set(project=world.other_project, user=world.owner, role=Role.VIEWER)
    assert post_turn(world.ingest_key, "dup", body(history(1))).status_code == 201
    assert post_turn(world.outsider_key, "dup", body(history(3))).status_code == 201
    browser = logged_in(world.owner)
    # The last project switched to is beta; the page the user opens is alpha's.
    assert browser.post("/accounts/project/", {"project": world.other_project.pk}).status_code in (
        200,
        302,
    )
    page = browser.get(f"/sessions/dup/?project={world.project.pk}")
    assert page.status_code == 200
    html = page.content.decode()
    socket_path = f"/ws/sessions/dup/?project={world.project.pk}"
    turns_url = f"/api/v1/sessions/dup/turns?project={world.project.pk}"
    assert f'data-socket="{socket_path}"' in html
    assert f'data-turns-url="{turns_url}"' in html
    # The catch-up request returns alpha's turn (one message list of history(1)), not beta's.
    # (every turn: a streamed array, read whole)
    caught_up = streamed_json(browser.get(turns_url))
    alpha_total = caught_up[0]["total_tokens"]
    beta_url = f"/api/v1/sessions/dup/turns?project={world.other_project.pk}"
    beta = streamed_json(browser.get(beta_url))
    assert alpha_total != beta[0]["total_tokens"]
    assert len(caught_up) == 1
    cookie = cookie_of(browser)

    async def scenario() -> None:
        communicator = await connected(socket_path.replace("/?", "/?", 1), cookie)
        # beta's session gets a turn: alpha's page hears nothing of it.
        await sync_to_async(post_turn)(world.outsider_key, "dup", body(history(4)))
        assert await communicator.receive_nothing(timeout=0.5)
        await sync_to_async(post_turn)(world.ingest_key, "dup", body(history(2)))
        message = await communicator.receive_json_from(timeout=10)
        assert message["type"] == "turn.created"
        assert message["turn"]["index"] == 1
        await communicator.disconnect()

    run(scenario)


def test_a_page_naming_a_project_without_the_session_gets_no_other_projects(
    world: World,
) -> None:
    membership_set(project=world.other_project, user=world.owner, role=Role.VIEWER)
    assert post_turn(world.outsider_key, "only-beta", body(history(1))).status_code == 201
    cookie = cookie_of(logged_in(world.owner))

    async def scenario() -> None:
        communicator = socket(f"/ws/sessions/only-beta/?project={world.project.pk}", ORIGIN, cookie)
        ok, code = await communicator.connect()
        assert not ok
        assert code == CLOSE_NOT_FOUND

    run(scenario)
