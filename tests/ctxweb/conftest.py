"""Fixtures of the project's tests: the personas (:func:`world`) and a headless browser."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User

from ctxweb.accounts.models import Project
from ctxweb.accounts.services import project_create
from tests.support.browser import PASSWORD, USERNAME, chromium, orm_beside_playwright
from tests.support.providers import StandIn, provider_stand_in
from tests.support.servers import LiveServer, ServerFailed, database_server_env
from tests.support.world import World, make_world


@pytest.fixture
def world(db: None) -> World:
    return make_world()


@pytest.fixture(scope="module")
def stand_in() -> Iterator[StandIn]:
    """A loopback stand-in for the providers' APIs, for a module's tests (its servers are
    started with it as their upstream)."""
    with provider_stand_in() as api:
        yield api


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Chromium for a module's tests (skipped without it, failed under ``CI=true``)."""
    with orm_beside_playwright(), chromium() as browser:
        yield browser


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh browser page; the test fails on any JavaScript error."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    yield page
    context.close()
    assert errors == [], f"JavaScript errors: {errors}"


@pytest.fixture
def project(transactional_db: None) -> Project:
    """Project ``alpha``, owned by the browser tests' login."""
    user = User.objects.create_user(USERNAME, password=PASSWORD)
    return project_create(name="alpha", owner=user)


@pytest.fixture
def start_server(
    transactional_db: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[..., LiveServer]]:
    """Start server processes (uvicorn) on the test database (extra environment as keywords)."""
    started: list[LiveServer] = []

    def start(**env: str) -> LiveServer:
        server = LiveServer(database_server_env(tmp_path_factory.mktemp("server-data"), **env))
        started.append(server)
        try:
            return server.wait_ready()
        except ServerFailed as error:
            pytest.fail(str(error))

    yield start
    for server in started:
        server.stop()


@pytest.fixture(autouse=True)
def fresh_channel_layer() -> Iterator[None]:
    """Each test gets its own channel layer: channels-redis binds locks and connections to the
    event loop that first used them, and a consumer a test left waiting holds them."""
    from channels.layers import channel_layers

    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()


@pytest.fixture(autouse=True)
def fresh_process_memory() -> Iterator[None]:
    """Each test starts as a new web process would: remembering no session's latest turn. A
    database rolled back between tests hands the same ids out again, so what an earlier test
    left in this memory can name the next test's session: ingestion checks it and takes the
    slow path (correct), but a test counting which path a turn took would count that too."""
    from ctxweb.contexts import services
    from ctxweb.contexts.services import proxying

    proxying.proxy_memory_clear()
    with services.as_another_process():
        yield
    # A call the test relayed in this process is recorded by threads: they end with the test,
    # not in the next one (whose database may be another, or closed to them).
    from ctxweb.proxy.relay import recorders_quiet

    recorders_quiet()
