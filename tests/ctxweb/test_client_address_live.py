"""Issue 34, items 7 to 9, replayed against a live uvicorn on the production settings, deployed as
docs/deploy.md says (one nginx in front: ``CTXWEB_PROXY_COUNT=1``, uvicorn's own reading of
forwarded headers off): a stranger's guesses never lock the owner out, a forged
``X-Forwarded-For`` does not spread a spray over many addresses, and a WebSocket opens only from
the exact configured origin."""

from __future__ import annotations

import http.client
import re
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from http.cookies import SimpleCookie
from pathlib import Path
from urllib.parse import urlencode

import pytest

from tests.support.builders import body, history
from tests.support.servers import LiveServer, create_key, embedded_env, live_server, post

pytestmark = [pytest.mark.slow, pytest.mark.embedded_server]

OWNER, PASSWORD = "owner", "pw-owner-live-123"
STRANGER = "198.51.100.66"
ORIGIN = "https://ctxweb.example.com"
#: The limits the server runs with (the defaults, stated).
LIMIT, ADDRESS_LIMIT = 10, 30


@dataclass
class Live:
    server: LiveServer
    key: str


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    env = embedded_env(
        Path(tmp_path_factory.mktemp("client-address")),
        CTXWEB_PROXY_COUNT="1",
        CTXWEB_ALLOWED_ORIGINS=ORIGIN,
        CTXWEB_LOGIN_FAILURE_LIMIT=str(LIMIT),
        CTXWEB_LOGIN_ADDRESS_FAILURE_LIMIT=str(ADDRESS_LIMIT),
    )
    key = create_key(env, owner=OWNER, password=PASSWORD)
    with live_server(env) as server:
        yield Live(server, key)


class Browser:
    """One client of the live server: its cookies, and the login form's CSRF token."""

    def __init__(self, server: LiveServer) -> None:
        self.port = server.port
        self.cookies: dict[str, str] = {}
        status, html = self.request("GET", "/accounts/login/")
        assert status == 200
        found = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html)
        assert found is not None
        self.token = found.group(1)

    def request(
        self, method: str, path: str, data: dict[str, str] | None = None, **headers: str
    ) -> tuple[int, str]:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        sent = {name.replace("_", "-"): value for name, value in headers.items()}
        if self.cookies:
            sent["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        payload = None
        if data is not None:
            payload = urlencode(data)
            sent["Content-Type"] = "application/x-www-form-urlencoded"
        try:
            connection.request(method, path, body=payload, headers=sent)
            response = connection.getresponse()
            for header in response.headers.get_all("Set-Cookie") or []:
                for name, morsel in SimpleCookie(header).items():
                    self.cookies[name] = morsel.value
            return response.status, response.read().decode(errors="replace")
        finally:
            connection.close()

    def login(self, username: str, password: str, forwarded: str) -> int:
        """POST the login form through "nginx", which set ``X-Forwarded-For`` to ``forwarded``."""
        data = {"username": username, "password": password, "csrfmiddlewaretoken": self.token}
        status, _ = self.request("POST", "/accounts/login/", data, X_Forwarded_For=forwarded)
        return status


def test_a_strangers_guesses_lock_only_the_stranger_out(live: Live) -> None:
    browser = Browser(live.server)
    answers = [browser.login(OWNER, f"guess-{n}", "203.0.113.50") for n in range(LIMIT)]
    assert answers == [200] * (LIMIT - 1) + [429]
    assert browser.login(OWNER, PASSWORD, "203.0.113.50") == 429
    # The owner, from their own address, logs in.
    assert Browser(live.server).login(OWNER, PASSWORD, "192.0.2.10") == 302


def test_a_spray_with_a_forged_header_is_stopped_as_from_one_address(live: Live) -> None:
    browser = Browser(live.server)
    # The client sends its own X-Forwarded-For; nginx appends the address it sees.
    answers = [
        browser.login(f"user-{n}", "Summer2026!", f"10.9.{n}.1, {STRANGER}") for n in range(40)
    ]
    assert answers == [200] * (ADDRESS_LIMIT - 1) + [429] * (41 - ADDRESS_LIMIT)
    # A forged first entry naming the owner's address is still the stranger.
    assert browser.login(OWNER, PASSWORD, f"192.0.2.20, {STRANGER}") == 429
    assert Browser(live.server).login(OWNER, PASSWORD, "192.0.2.20") == 302


def handshake(live: Live, origin: str | None, cookies: dict[str, str]) -> int:
    """The status the server answers a WebSocket handshake on the owner's session with (101 when it
    opens, 403 when refused)."""
    lines = [
        "GET /ws/sessions/live/ HTTP/1.1",
        f"Host: 127.0.0.1:{live.server.port}",
        "Upgrade: websocket",
        "Connection: Upgrade",
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
        "Sec-WebSocket-Version: 13",
        "Cookie: " + "; ".join(f"{k}={v}" for k, v in cookies.items()),
    ]
    if origin is not None:
        lines.append(f"Origin: {origin}")
    with socket.create_connection(("127.0.0.1", live.server.port), timeout=30) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        answer = b""
        while b"\r\n" not in answer:
            chunk = sock.recv(4096)
            if not chunk:
                break
            answer += chunk
    return int(answer.split(b" ", 2)[1])


def test_a_websocket_opens_only_from_the_exact_configured_origin(live: Live) -> None:
    reply = post(f"{live.server.url}/api/v1/sessions/live/turns", live.key, body(history(1)))
    assert reply.status == 201, reply.body
    browser = Browser(live.server)
    assert browser.login(OWNER, PASSWORD, "192.0.2.30") == 302
    assert "sessionid" in browser.cookies
    assert handshake(live, ORIGIN, browser.cookies) == 101
    for origin in (
        "http://localhost:3000",
        f"http://127.0.0.1:{live.server.port}",  # the server's own address, not configured
        "http://testserver",
        f"{ORIGIN}:8443",
        "http://ctxweb.example.com",
        None,
    ):
        assert handshake(live, origin, browser.cookies) == 403, origin


def test_testserver_is_not_an_allowed_host_in_production(live: Live) -> None:
    browser = Browser(live.server)
    status, _ = browser.request("GET", "/accounts/login/", Host="testserver")
    assert status == 400
