"""Isolation, route by route: owner, teammate and outsider over two projects, through every REST
endpoint, page, WebSocket and artifact.

The matrix below lists every route of :mod:`ctxweb.urls`; ``test_every_route_is_in_the_matrix``
fails when a route (or an API method) is added without a row here. An outsider is told "not
found" (404), never "forbidden"; viewers and ingest keys may not apply (403); a revoked key is
refused (401); anonymous API calls get 401/403 and anonymous page visits the login page.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.test import APIClient

from ctxweb.accounts.services import api_key_create, api_key_revoke
from ctxweb.contexts.models import Artifact, Operation, Session, Turn
from ctxweb.contexts.services.unread import unread_call_record
from ctxweb.live.routing import websocket_urlpatterns
from tests.support.builders import body, history
from tests.support.routes import API, CAPTURE, PAGES, WEBSOCKETS, Call, Ids
from tests.support.world import World

pytestmark = pytest.mark.django_db

#: Words only alpha's stored content holds: no response to an outsider may contain them.
ALPHA_MARKER = "alpha-only-marker-5d1c"
BETA_MARKER = "beta-only-marker-9e27"
#: Routes the matrix does not list one by one: the admin (Django's own, staff only).
NAMESPACES = {"admin"}


# --- the two projects' data ---------------------------------------------------------------------


@dataclass
class Scene:
    world: World
    alpha: Ids
    beta: Ids
    revoked_key: str

    def counts(self) -> tuple[int, ...]:
        return (
            Session.objects.count(),
            Turn.objects.count(),
            Operation.objects.count(),
            Artifact.objects.count(),
            *Session.objects.filter(project=self.world.project).values_list(
                "turn_count", flat=True
            ),
        )


def _project_data(
    client: APIClient, external_id: str, marker: str, project: Any, commit: Any
) -> Ids:
    steps = history(2, output=f"{marker}\n" + "some tool output line\n" * 400)
    response = client.post(
        f"/api/v1/sessions/{external_id}/turns",
        data=json.dumps(body(steps)),
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    with commit(execute=True):  # the operation runs when the request's transaction commits
        response = client.post(
            f"/api/v1/sessions/{external_id}/operations",
            data=json.dumps({"strategy": "llm4s-pipeline", "params": {}}),
            content_type="application/json",
        )
    assert response.status_code == 202, response.content
    operation = Operation.objects.get(pk=response.json()["id"])
    assert operation.status == "succeeded", operation.error
    artifact = Artifact.objects.filter(project=project).first()
    if artifact is None:
        artifact = Artifact.objects.create(
            project=project, key="f" * 64, kind="tool_result", content=marker, size=1, tokens=1
        )
    upload = SimpleUploadedFile(
        "t.json", json.dumps([{"id": f"imported-{marker}", "messages": steps[:2]}]).encode()
    )
    response = client.post("/api/v1/import", {"file": upload})
    assert response.status_code == 201, response.content
    unread = unread_call_record(
        project=project,
        session_external_id=external_id,
        format="openai-chat",
        request_body=marker.encode(),
        response_body=b"{}",
        streamed=False,
        compressed=False,
        error="unreadable",
    )
    import_job = response.json()["id"]
    response = client.post(
        f"/api/v1/sessions/{external_id}/replays",
        data=json.dumps({"policies": [{"strategy": "nanobot-trim"}]}),
        content_type="application/json",
    )
    assert response.status_code == 202, response.content
    return Ids(
        session=external_id,
        operation=operation.pk,
        artifact=artifact.key,
        import_job=import_job,
        unread=unread.pk,
        replay=response.json()["id"],
    )


@pytest.fixture
def scene(world: World, settings: Any, django_capture_on_commit_callbacks: Any) -> Scene:
    settings.CTXWEB_TASKS_INLINE = True
    commit = django_capture_on_commit_callbacks
    alpha = _project_data(world.api(world.operator_key), "s1", ALPHA_MARKER, world.project, commit)
    beta = _project_data(
        world.api(world.outsider_key), "b1", BETA_MARKER, world.other_project, commit
    )
    key, raw = api_key_create(project=world.project, role="operator")
    api_key_revoke(key=key)
    return Scene(world, alpha, beta, raw)


# --- the matrix -----------------------------------------------------------------------------------


def _routes() -> Iterator[tuple[str, Any]]:
    """Every (name, callback) of the URL configuration; the admin by its namespace."""

    def walk(patterns: list[Any]) -> Iterator[tuple[str, Any]]:
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                if pattern.namespace in NAMESPACES:
                    yield pattern.namespace, None
                else:
                    yield from walk(pattern.url_patterns)
            elif isinstance(pattern, URLPattern):
                yield pattern.name or f"<unnamed {pattern.pattern}>", pattern.callback

    yield from walk(get_resolver().url_patterns)


def test_every_route_is_in_the_matrix() -> None:
    names = {name for name, _ in _routes()}
    assert names == set(API) | set(PAGES) | CAPTURE | NAMESPACES, "add the new route to the matrix"


def test_every_api_method_is_in_the_matrix() -> None:
    for name, callback in _routes():
        cls = getattr(callback, "cls", None)
        if name not in API or cls is None:
            continue
        methods = {m.upper() for m in ("get", "post", "put", "patch", "delete") if hasattr(cls, m)}
        assert methods == {call.method for call in API[name]}, name


def test_every_websocket_route_is_tested() -> None:
    assert {str(p.pattern) for p in websocket_urlpatterns} == WEBSOCKETS


# --- the REST API ---------------------------------------------------------------------------------


def _api_personas(scene: Scene) -> dict[str, APIClient]:
    w = scene.world
    return {
        "outsider": w.login(w.outsider),
        "outsider_key": w.api(w.outsider_key),
        "teammate": w.login(w.teammate),
        "ingest_key": w.api(w.ingest_key),
        "owner": w.login(w.owner),
        "operator_key": w.api(w.operator_key),
    }


API_CALLS = [(name, i) for name, calls in API.items() for i in range(len(calls))]


def _assert_error(response: Any, status: tuple[int, ...], code: str | None = None) -> None:
    assert response.status_code in status, (response.status_code, response.content[:300])
    error = response.json()["error"]
    assert set(error) == {"code", "message", "fields"}
    if code is not None:
        assert error["code"] == code


@pytest.mark.parametrize(("name", "index"), API_CALLS, ids=[f"{n}-{i}" for n, i in API_CALLS])
def test_the_api_route_keeps_projects_apart(scene: Scene, name: str, index: int) -> None:
    call = API[name][index]
    clients = _api_personas(scene)
    before = scene.counts()

    # Nobody reaches the other project's object: alpha's people against beta, and back.
    if call.scope == "object":
        for persona in ("outsider", "outsider_key"):
            _assert_error(call.send(clients[persona], scene.alpha), (404,), "not_found")
        for persona in ("teammate", "ingest_key", "owner", "operator_key"):
            _assert_error(call.send(clients[persona], scene.beta), (404,), "not_found")
        assert scene.counts() == before

    # An anonymous caller and a revoked key are refused before anything else.
    if call.scope != "public":
        _assert_error(call.send(APIClient(), scene.alpha), (401, 403))
        revoked = scene.world.api(scene.revoked_key)
        _assert_error(call.send(revoked, scene.alpha), (401,))
        assert scene.counts() == before
    elif name != "api-health":  # the health check takes no credentials at all
        assert call.send(scene.world.api(scene.revoked_key), scene.alpha).status_code == 401

    # Viewers and ingest keys read, but only operators apply; viewers do not post data.
    for persona in ("teammate", "ingest_key"):
        response = call.send(clients[persona], scene.alpha)
        if call.operator or (call.writer and persona == "teammate"):
            _assert_error(response, (403,), "permission_denied")
            assert scene.counts() == before
        else:
            assert response.status_code in call.ok, (persona, response.content[:300])

    # An outsider's list or creation acts in their own project and shows nothing of alpha's.
    if call.scope in ("list", "create", "public"):
        for persona in ("outsider", "outsider_key"):
            alpha_turns = Turn.objects.filter(session__project=scene.world.project).count()
            response = call.send(clients[persona], scene.alpha)
            assert response.status_code in call.ok, (persona, response.content[:300])
            assert ALPHA_MARKER.encode() not in response.content
            assert Turn.objects.filter(session__project=scene.world.project).count() == alpha_turns
        if name == "api-sessions":
            listed = clients["outsider_key"].get("/api/v1/sessions").json()["results"]
            assert [s["external_id"] for s in listed] == ["b1"]

    for persona in ("owner", "operator_key"):
        response = call.send(clients[persona], scene.alpha)
        assert response.status_code in call.ok, (persona, response.content[:300])


# --- pages ----------------------------------------------------------------------------------------


def _page_personas(scene: Scene) -> dict[str, Client]:
    w = scene.world
    clients = {}
    for name, user in (("outsider", w.outsider), ("teammate", w.teammate), ("owner", w.owner)):
        client = Client()
        client.force_login(user)
        clients[name] = client
    return clients


PAGE_CALLS = [(name, i) for name, calls in PAGES.items() for i in range(len(calls))]


@pytest.mark.parametrize(("name", "index"), PAGE_CALLS, ids=[f"{n}-{i}" for n, i in PAGE_CALLS])
def test_the_page_keeps_projects_apart(scene: Scene, name: str, index: int) -> None:
    call = PAGES[name][index]
    clients = _page_personas(scene)
    before = scene.counts()

    if call.scope == "object":
        assert call.send(clients["outsider"], scene.alpha).status_code == 404
        assert call.send(clients["owner"], scene.beta).status_code == 404
        assert call.send(clients["teammate"], scene.beta).status_code == 404
        assert scene.counts() == before

    if call.scope != "public":
        for anonymous in (Client(), Client(HTTP_AUTHORIZATION=f"Bearer {scene.world.ingest_key}")):
            response = call.send(anonymous, scene.alpha)
            assert response.status_code == 302, response.content[:300]
            assert response["Location"].startswith("/accounts/login/?next=")
        assert scene.counts() == before

    if call.scope in ("list", "switch"):
        data = {"project": str(scene.world.project.pk)}
        response = (
            clients["outsider"].post(call.url(scene.alpha), data)
            if call.scope == "switch"
            else call.send(clients["outsider"], scene.alpha)
        )
        assert response.status_code in call.ok
        home = clients["outsider"].get("/")  # the switch was refused: still the outsider's own
        assert ALPHA_MARKER.encode() not in response.content
        assert b"/sessions/s1/" not in home.content
        assert b"/sessions/b1/" in home.content

    response = call.send(clients["teammate"], scene.alpha)
    if call.operator or call.writer:  # the teammate is a viewer
        assert response.status_code == 403
        assert scene.counts() == before
    else:
        assert response.status_code in call.ok

    response = call.send(clients["owner"], scene.alpha)
    assert response.status_code in call.ok, response.content[:300]


def test_the_admin_is_for_staff_only(scene: Scene) -> None:
    for client in [*_page_personas(scene).values(), Client()]:
        response = client.get("/admin/")
        assert response.status_code == 302
        assert response["Location"].startswith("/admin/login/")


# --- CSRF: every form and every session-authenticated API write --------------------------------


def _unsafe_calls() -> list[tuple[str, Call]]:
    return [
        (name, call)
        for name, calls in {**API, **PAGES}.items()
        for call in calls
        if call.method in ("POST", "PATCH", "PUT", "DELETE")
    ]


@pytest.mark.parametrize(("name", "call"), _unsafe_calls(), ids=[n for n, _ in _unsafe_calls()])
def test_a_post_without_the_csrf_token_is_refused(scene: Scene, name: str, call: Call) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(scene.world.owner)
    before = scene.counts()
    response = call.send(client, scene.alpha)
    assert response.status_code == 403, response.content[:300]
    assert scene.counts() == before


def test_every_page_route_checks_csrf_on_post(scene: Scene) -> None:
    """No page view is ``csrf_exempt``: a POST without the token is refused even where the page
    has no form (the middleware answers before the view's method check)."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(scene.world.owner)
    for name, calls in PAGES.items():
        for call in calls:
            response = client.post(call.url(scene.alpha), {"x": "1"})
            assert response.status_code == 403, name


def test_the_forms_work_with_their_token(
    scene: Scene, django_capture_on_commit_callbacks: Any
) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(scene.world.owner)
    page = client.get("/sessions/s1/preview/?strategy=baseagent-middle-out")
    token = page.context["csrf_token"]
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            "/sessions/s1/operations/",
            {"strategy": "baseagent-middle-out", "params": "{}", "csrfmiddlewaretoken": token},
        )
    assert response.status_code == 302
    response = client.post(
        "/accounts/project/",
        {"project": str(scene.world.project.pk), "csrfmiddlewaretoken": token},
    )
    assert response.status_code == 302
    assert client.post("/accounts/logout/", {"csrfmiddlewaretoken": token}).status_code == 302


# --- the WebSocket -------------------------------------------------------------------------------


def _cookie(user: Any) -> tuple[bytes, bytes]:
    client = Client()
    client.force_login(user)
    return (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())


@dataclass
class SocketResult:
    connected: bool
    close_code: int | None = None
    first: dict[str, Any] = field(default_factory=dict)


def _connect(path: str, *headers: tuple[bytes, bytes]) -> SocketResult:
    from ctxweb.asgi import application

    async def scenario() -> SocketResult:
        communicator = WebsocketCommunicator(application, path, headers=list(headers))
        connected, code = await communicator.connect()
        result = SocketResult(connected, None if connected else code)
        if connected:
            result.first = await communicator.receive_json_from()
        await communicator.disconnect()
        return result

    return async_to_sync(scenario)()


@pytest.mark.django_db(transaction=True)
def test_the_websocket_keeps_projects_apart(scene: Scene) -> None:
    w = scene.world
    origin = (b"origin", b"http://testserver")
    assert _connect("/ws/sessions/s1/", origin, _cookie(w.owner)).first["type"] == "hello"
    assert _connect("/ws/sessions/s1/", origin, _cookie(w.teammate)).connected
    assert _connect("/ws/sessions/s1/", origin, _cookie(w.outsider)).close_code == 4404
    assert _connect("/ws/sessions/b1/", origin, _cookie(w.owner)).close_code == 4404
    assert _connect("/ws/sessions/s1/", origin).close_code == 4401
    key = (b"authorization", f"Bearer {w.operator_key}".encode())
    assert _connect("/ws/sessions/s1/", origin, key).close_code == 4401  # sockets are for logins
    foreign = (b"origin", b"http://evil.example")
    assert not _connect("/ws/sessions/s1/", foreign, _cookie(w.owner)).connected
