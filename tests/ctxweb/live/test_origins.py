"""WebSocket origins: a socket opens only from an exact configured origin (scheme, host and port,
``CTXWEB_ALLOWED_ORIGINS``); another port of an allowed host, another scheme or a subdomain is
refused, and ``testserver`` (Django's test client host) is allowed only by the test settings."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import Client, override_settings

from ctxweb.asgi import application
from ctxweb.origins import check_origins_cover_hosts
from tests.support.builders import body, history
from tests.support.world import World

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(autouse=True)
def inline_tasks(settings: Any) -> None:
    settings.CTXWEB_TASKS_INLINE = True


@pytest.fixture
def session_id(world: World) -> str:
    response = world.api(world.ingest_key).post(
        "/api/v1/sessions/live/turns", data=body(history(1)), format="json"
    )
    assert response.status_code == 201
    return "live"


def cookie_for(user: User) -> tuple[bytes, bytes]:
    client = Client()
    client.force_login(user)
    return (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())


def opens(world: World, session_id: str, origin: str) -> bool:
    """Whether the owner's socket on the session opens from a page at ``origin``."""
    headers = [cookie_for(world.owner), (b"origin", origin.encode())]

    async def scenario() -> bool:
        communicator = WebsocketCommunicator(
            application, f"/ws/sessions/{session_id}/", headers=headers
        )
        connected, _ = await communicator.connect()
        if connected:
            await communicator.disconnect()
        return bool(connected)

    return async_to_sync(scenario)()


def base_settings(monkeypatch: pytest.MonkeyPatch, **env: str) -> ModuleType:
    """``ctxweb.settings.base`` evaluated afresh under ``env`` and no other ctxweb setting: what
    a production process reads (the suite's own settings untouched)."""
    for name in ("ALLOWED_HOSTS", "CTXWEB_ALLOWED_ORIGINS", "PORT"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    spec = importlib.util.spec_from_file_location(
        "ctxweb_base_settings_under_test", ROOT / "ctxweb" / "settings" / "base.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def production(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """The suite running on the production defaults of ``ALLOWED_HOSTS`` and the origins."""
    module = base_settings(monkeypatch, PORT="8000")
    with override_settings(
        ALLOWED_HOSTS=module.ALLOWED_HOSTS, CTXWEB_ALLOWED_ORIGINS=module.CTXWEB_ALLOWED_ORIGINS
    ):
        yield module


def test_it_opens_from_the_origins_make_run_serves(
    world: World, session_id: str, production: ModuleType
) -> None:
    assert production.CTXWEB_ALLOWED_ORIGINS == ["http://127.0.0.1:8000", "http://localhost:8000"]
    assert opens(world, session_id, "http://127.0.0.1:8000")
    assert opens(world, session_id, "http://localhost:8000")


def test_it_refuses_another_port_of_an_allowed_host(
    world: World, session_id: str, production: ModuleType
) -> None:
    assert not opens(world, session_id, "http://localhost:3000")
    assert not opens(world, session_id, "http://127.0.0.1:8001")
    assert not opens(world, session_id, "http://localhost")


def test_it_refuses_testserver_under_the_production_settings(
    world: World, session_id: str, production: ModuleType
) -> None:
    assert "testserver" not in production.ALLOWED_HOSTS
    assert not opens(world, session_id, "http://testserver")
    # The suite's own settings add it, for Django's test client.
    with override_settings(CTXWEB_ALLOWED_ORIGINS=["http://testserver"]):
        assert opens(world, session_id, "http://testserver")


def test_it_opens_only_from_the_exact_configured_origin(
    world: World, session_id: str, settings: Any
) -> None:
    settings.CTXWEB_ALLOWED_ORIGINS = ["https://ctxweb.example.com"]
    assert opens(world, session_id, "https://ctxweb.example.com")
    assert opens(world, session_id, "https://CTXWEB.example.com:443")  # the same origin
    for origin in (
        "https://ctxweb.example.com:8443",  # another port
        "http://ctxweb.example.com",  # another scheme
        "https://live.ctxweb.example.com",  # a subdomain
        "https://ctxweb.example.com.evil.example",
        "https://evil.example",
        "null",  # a sandboxed page or a file
        "https://user@ctxweb.example.com",
        "",
    ):
        assert not opens(world, session_id, origin), origin


def test_it_refuses_a_handshake_without_exactly_one_origin(
    world: World, session_id: str, settings: Any
) -> None:
    settings.CTXWEB_ALLOWED_ORIGINS = ["https://ctxweb.example.com"]
    cookie = cookie_for(world.owner)
    allowed = (b"origin", b"https://ctxweb.example.com")
    for headers in ([cookie], [cookie, allowed, (b"origin", b"https://evil.example")]):

        async def scenario(headers: list[tuple[bytes, bytes]] = headers) -> bool:
            communicator = WebsocketCommunicator(
                application, f"/ws/sessions/{session_id}/", headers=headers
            )
            connected, _ = await communicator.connect()
            return bool(connected)

        assert not async_to_sync(scenario)()


@pytest.mark.parametrize(
    "value",
    [
        "*",
        "https://*.example.com",
        "http://.example.com",
        "ctxweb.example.com",
        "ftp://x.example",
        "https://ctxweb.example.com/app",
        "https://ctxweb.example.com:99999",
    ],
)
def test_a_setting_that_is_not_an_exact_origin_stops_the_process(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ImproperlyConfigured, match="CTXWEB_ALLOWED_ORIGINS"):
        base_settings(monkeypatch, CTXWEB_ALLOWED_ORIGINS=f"https://ok.example,{value}")


def test_the_default_origins_follow_port(monkeypatch: pytest.MonkeyPatch) -> None:
    module = base_settings(monkeypatch, PORT="9123")
    assert module.CTXWEB_ALLOWED_ORIGINS == ["http://127.0.0.1:9123", "http://localhost:9123"]


def test_the_deploy_check_names_a_host_no_origin_serves(settings: Any) -> None:
    settings.ALLOWED_HOSTS = ["ctxweb.example.com", "localhost", "[::1]", ".example.org"]
    settings.CTXWEB_ALLOWED_ORIGINS = ["http://127.0.0.1:8000"]
    with pytest.raises(SystemCheckError, match=r"ctxweb\.W001.*ctxweb\.example\.com"):
        call_command("check", "--deploy", "--tag", "security", "--fail-level", "WARNING")
    settings.CTXWEB_ALLOWED_ORIGINS = ["https://ctxweb.example.com"]
    assert "ctxweb.W001" not in [m.id for m in check_origins_cover_hosts()]
