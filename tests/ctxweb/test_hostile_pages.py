"""Hostile input where schemathesis does not reach: every page and the session WebSocket.

Each page route gets hostile values in its path and in the query parameters pages read (Unicode
digits, integers past 64 bits, negative and infinite numbers, NUL, 10,000-character strings,
brackets, dot segments); each form gets hostile fields. Nothing may answer 5xx. The WebSocket gets
hostile session ids and ``?project=`` values, and hostile frames (not JSON, binary, deeply
nested, huge): it answers or closes cleanly, and stays usable.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import quote, urlencode

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.test import Client

from ctxweb.asgi import application
from ctxweb.live.consumers import CLOSE_NOT_FOUND
from tests.support.builders import body, history
from tests.support.routes import PAGES
from tests.support.world import World

HOSTILE = [
    "²",
    str(2**70),
    "-1",
    "1e999",
    "NaN",
    "\x00",
    "x" * 10_000,
    "[" * 1_000,
    "../..",
    "%2E%2E",
    "😀",
    "",
    " ",
]
#: The query parameters pages read.
QUERY = ["page", "project", "turn", "index", "strategy", "operation", "q", "model", "fill", "sort"]
ORIGIN = (b"origin", b"http://testserver")


@pytest.fixture
def owner(world: World) -> Client:
    response = world.api(world.ingest_key).post(
        "/api/v1/sessions/s1/turns",
        data=json.dumps(body(history(2))),
        content_type="application/json",
    )
    assert response.status_code == 201
    client = Client(raise_request_exception=False)
    client.force_login(world.owner)
    return client


GET_PAGES = [
    (name, call.path) for name, calls in PAGES.items() for call in calls if call.method == "GET"
]


@pytest.mark.django_db
@pytest.mark.parametrize(("name", "path"), GET_PAGES, ids=[n for n, _ in GET_PAGES])
def test_no_page_answers_5xx_to_hostile_paths_or_queries(
    owner: Client, name: str, path: str
) -> None:
    failures = []
    for value in HOSTILE:
        ids = {
            "sid": quote(value, safe="") or "s1",
            "op": quote(value, safe=""),
            "art": quote(value, safe=""),
            "imp": quote(value, safe=""),
            "unr": quote(value, safe=""),
            "rep": quote(value, safe=""),
        }
        for url in (
            path.format(**ids),
            path.format(sid="s1", op="1", art="a", imp="1", unr="1", rep="1")
            + "?"
            + urlencode(dict.fromkeys(QUERY, value)),
        ):
            response = owner.get(url)
            if response.status_code >= 500:
                failures.append((url[:120], response.status_code))
    assert failures == []


@pytest.mark.django_db
@pytest.mark.parametrize("value", HOSTILE, ids=range(len(HOSTILE)))
def test_no_form_answers_5xx_to_hostile_fields(owner: Client, value: str) -> None:
    posts = [
        ("/accounts/project/", {"project": value, "next": value}),
        ("/sessions/s1/operations/", {"strategy": value, "params": value}),
        (
            "/sessions/s1/operations/",
            {"strategy": "baseagent-prune", "params": json.dumps({value: value})},
        ),
        ("/imports/", {"format": value, "prefix": value}),
        (
            "/sessions/s1/replays/",
            {"presets": value, "strategy": value, "params": value, "trigger": value},
        ),
        (
            "/sessions/s1/replays/",
            {"strategy": "ctxweb-auto", "params": json.dumps({value: value}), "trigger": value},
        ),
        ("/sessions/s1/replays/", {"strategy": "nanobot-trim", "trigger_kind": value}),
        ("/sessions/s1/replays/1/apply/", {"column": value, "target": value}),
        ("/accounts/login/", {"username": value, "password": value}),
    ]
    for path, data in posts:
        response = owner.post(path, data)
        assert response.status_code < 500, (path, data, response.status_code)


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    async_to_sync(scenario)()


def login_cookie(world: World) -> tuple[bytes, bytes]:
    client = Client()
    client.force_login(world.owner)
    return (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("value", HOSTILE, ids=range(len(HOSTILE)))
def test_the_websocket_closes_cleanly_on_hostile_ids_and_projects(world: World, value: str) -> None:
    cookie = login_cookie(world)
    paths = [
        f"/ws/sessions/{quote(value, safe='') or 'none'}/",
        f"/ws/sessions/s1/?project={quote(value, safe='')}",
    ]

    async def scenario() -> None:
        for path in paths:
            communicator = WebsocketCommunicator(application, path, headers=[ORIGIN, cookie])
            connected, code = await communicator.connect(timeout=10)
            assert not connected, path
            assert code == CLOSE_NOT_FOUND, (path, code)

    run(scenario)


@pytest.mark.django_db(transaction=True)
def test_hostile_frames_are_answered_and_the_socket_stays_usable(world: World) -> None:
    response = world.api(world.ingest_key).post(
        "/api/v1/sessions/s1/turns",
        data=json.dumps(body(history(1))),
        content_type="application/json",
    )
    assert response.status_code == 201
    cookie = login_cookie(world)
    frames: list[dict[str, Any]] = [
        {"text_data": "not json"},
        {"text_data": "[" * 100_000},
        {"text_data": json.dumps({"type": "ping", "pad": "x" * 200_000})},
        {"text_data": "NaN"},
        {"bytes_data": b"\x00\xff binary"},
        {"text_data": json.dumps([1, 2, 3])},
    ]

    async def scenario() -> None:
        communicator = WebsocketCommunicator(
            application, "/ws/sessions/s1/", headers=[ORIGIN, cookie]
        )
        connected, _ = await communicator.connect(timeout=10)
        assert connected
        assert (await communicator.receive_json_from(timeout=10))["type"] == "hello"
        for frame in frames:
            await communicator.send_to(**frame)
            answer = await communicator.receive_json_from(timeout=10)
            assert answer["type"] == "error", (frame, answer)
        await communicator.send_json_to({"type": "ping"})
        assert (await communicator.receive_json_from(timeout=10)) == {"type": "pong"}
        await communicator.disconnect()

    run(scenario)
