"""Production hardening: ``check --deploy`` clean under the production environment, security
headers and a Content-Security-Policy on every response, no inline script in any template, and
per-key rate limits answering 429 with ``Retry-After``."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import secrets
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.core.management import call_command
from django.test import Client, override_settings

from ctxweb.contexts.models import Artifact
from tests.support.browser import log_in, off_loop
from tests.support.world import World

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
#: What the production environment changes, read from the settings module it produces.
DEPLOY_SETTINGS = [
    "DEBUG",
    "SECRET_KEY",
    "SECURE_SSL_REDIRECT",
    "SECURE_REDIRECT_EXEMPT",
    "SESSION_COOKIE_SECURE",
    "CSRF_COOKIE_SECURE",
    "SECURE_HSTS_SECONDS",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS",
    "SECURE_HSTS_PRELOAD",
    "SECURE_PROXY_SSL_HEADER",
    "SECURE_CONTENT_TYPE_NOSNIFF",
    "SECURE_REFERRER_POLICY",
    "X_FRAME_OPTIONS",
    "MIDDLEWARE",
]


def production_env(tmp_path: Path) -> dict[str, str]:
    return {
        "CTXWEB_HTTPS": "1",
        "DEBUG": "0",
        "SECRET_KEY": secrets.token_urlsafe(64),
        "ALLOWED_HOSTS": "ctxweb.example.com",
        "CTXWEB_ALLOWED_ORIGINS": "https://ctxweb.example.com",
        "CTXWEB_DATA_DIR": str(tmp_path),
    }


def load_settings(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Any:
    """A fresh copy of ``ctxweb.settings.base`` evaluated under ``env`` (the real one untouched)."""
    # The browser tests set this for their live server; no production process has it.
    monkeypatch.delenv("DJANGO_ALLOW_ASYNC_UNSAFE", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    path = ROOT / "ctxweb" / "settings" / "base.py"
    spec = importlib.util.spec_from_file_location("ctxweb_settings_under_test", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_check_deploy_is_clean_under_the_production_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = load_settings(production_env(tmp_path), monkeypatch)
    values = {name: getattr(module, name) for name in DEPLOY_SETTINGS}
    assert values["SECURE_HSTS_SECONDS"] >= 31536000
    with override_settings(**values):
        call_command("check", "--deploy", "--fail-level", "WARNING")


def test_check_deploy_passes_in_a_fresh_process(tmp_path: Path) -> None:
    """The whole settings file, as ``manage.py`` loads it in production."""
    env = {**os.environ, **production_env(tmp_path)}
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)  # set by the browser tests for their live server
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_a_short_secret_key_fails_the_deploy_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = load_settings({**production_env(tmp_path), "SECRET_KEY": "short"}, monkeypatch)
    values = {name: getattr(module, name) for name in DEPLOY_SETTINGS}
    with override_settings(**values), pytest.raises(Exception, match="W009"):
        call_command("check", "--deploy", "--fail-level", "WARNING")


def test_plain_http_redirects_to_https_except_the_health_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = load_settings(production_env(tmp_path), monkeypatch)
    values = {name: getattr(module, name) for name in DEPLOY_SETTINGS if name != "SECRET_KEY"}
    with override_settings(**values, ALLOWED_HOSTS=["testserver"]):
        client = Client()
        response = client.get("/accounts/login/")
        assert response.status_code == 301
        assert response["Location"] == "https://testserver/accounts/login/"
        assert client.get("/api/v1/health").status_code == 200
        secure = client.get("/accounts/login/", HTTP_X_FORWARDED_PROTO="https")
        assert secure.status_code == 200
        assert secure["Strict-Transport-Security"].startswith("max-age=31536000")


# --- headers on every response -----------------------------------------------------------------


def test_every_kind_of_response_carries_the_security_headers(world: World) -> None:
    artifact = Artifact.objects.create(
        project=world.project,
        key="a" * 64,
        kind="tool_result",
        content="<script>x</script>",
        size=17,
        tokens=5,
    )
    owner = Client()
    owner.force_login(world.owner)
    key = {"HTTP_AUTHORIZATION": f"Bearer {world.ingest_key}"}
    responses = {
        "page": owner.get("/"),
        "login page": Client().get("/accounts/login/"),
        "redirect": Client().get("/"),
        "not found page": owner.get("/sessions/nope/"),
        "api": Client().get("/api/v1/sessions", **key),
        "api error": Client().get("/api/v1/sessions/nope", **key),
        "artifact": Client().get(f"/api/v1/artifacts/{artifact.key}", **key),
        "artifact page": owner.get(f"/artifacts/{artifact.key}/"),
        "docs": Client().get("/api/docs/"),
        "schema": Client().get("/api/schema/"),
        "static": Client().get("/static/ctxweb/app.css"),
    }
    for name, response in responses.items():
        assert response["X-Content-Type-Options"] == "nosniff", name
        assert response["Referrer-Policy"] == "same-origin", name
        assert response["X-Frame-Options"] == "DENY", name
        assert "frame-ancestors 'none'" in response["Content-Security-Policy"], name

    page_policy = responses["page"]["Content-Security-Policy"]
    script_src = re.search(r"script-src ([^;]*)", page_policy)
    assert script_src is not None
    assert script_src.group(1).split() == ["'self'"]
    assert "style-src-elem 'self'" in page_policy
    assert "object-src 'none'" in page_policy
    assert "ws://testserver" in page_policy  # the live updates' socket
    assert responses["api"]["Content-Security-Policy"].startswith("default-src 'none'")
    assert "sandbox" in responses["artifact"]["Content-Security-Policy"]


class ScriptFinder(HTMLParser):
    """Collects inline scripts and inline event handlers of an HTML document."""

    def __init__(self) -> None:
        super().__init__()
        self.inline: list[str] = []
        self.handlers: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        names = dict(attrs)
        self.handlers += [name for name, _ in attrs if name.startswith("on")]
        if tag == "script" and "src" not in names and names.get("type") != "application/json":
            self.inline.append(str(names))
        if tag == "a" and (names.get("href") or "").lower().startswith("javascript:"):
            self.handlers.append("javascript: link")


@pytest.mark.parametrize(
    "template", sorted(str(p.relative_to(ROOT)) for p in (ROOT / "templates").rglob("*.html"))
)
def test_no_template_holds_an_inline_script_or_handler(template: str) -> None:
    finder = ScriptFinder()
    finder.feed((ROOT / template).read_text())
    assert finder.inline == [], "move the script to static/ and include it with src"
    assert finder.handlers == [], "attach handlers from a static script instead"


def test_the_pages_run_only_ctxweb_s_own_scripts(world: World) -> None:
    """The rendered pages too (``json_script`` data blocks are not scripts)."""
    from tests.support.builders import body, history

    api = world.api(world.operator_key)
    api.post(
        "/api/v1/sessions/s1/turns", json.dumps(body(history(2))), content_type="application/json"
    )
    owner = Client()
    owner.force_login(world.owner)
    empty = Client()
    empty.force_login(world.outsider)  # a project without sessions: the first-turn help
    pages = [
        owner.get("/"),
        owner.get("/sessions/s1/"),
        owner.get("/sessions/s1/turns/0/"),
        owner.get("/sessions/s1/preview/"),
        empty.get("/"),
        Client().get("/accounts/login/"),
    ]
    for response in pages:
        assert response.status_code == 200
        finder = ScriptFinder()
        finder.feed(response.content.decode())
        assert finder.inline == [], response.request["PATH_INFO"]
        assert finder.handlers == [], response.request["PATH_INFO"]


# --- rate limits ----------------------------------------------------------------------------------


@pytest.mark.usefixtures("clear_of_a_minutes_end")
def test_a_key_over_its_rate_gets_a_429_with_retry_after(world: World, settings: Any) -> None:
    settings.CTXWEB_RATE_LIMIT = "3/min"
    client = world.api(world.ingest_key)
    for _ in range(3):
        assert client.get("/api/v1/sessions").status_code == 200
    response = client.get("/api/v1/sessions")
    assert response.status_code == 429
    assert 0 < int(response["Retry-After"]) <= 60
    error = response.json()["error"]
    assert error["code"] == "throttled"
    assert set(error) == {"code", "message", "fields"}
    # Another key of the same project, and a dashboard login, have budgets of their own.
    assert world.api(world.operator_key).get("/api/v1/sessions").status_code == 200
    assert world.login(world.owner).get("/api/v1/sessions").status_code == 200


@pytest.mark.usefixtures("clear_of_a_minutes_end")
def test_a_dashboard_user_has_a_budget_of_their_own(world: World, settings: Any) -> None:
    settings.CTXWEB_RATE_LIMIT = "2/min"
    owner = world.login(world.owner)
    assert owner.get("/api/v1/strategies").status_code == 200
    assert world.login(world.owner).get("/api/v1/strategies").status_code == 200  # same user
    assert owner.get("/api/v1/strategies").status_code == 429
    assert world.login(world.teammate).get("/api/v1/strategies").status_code == 200


@pytest.mark.usefixtures("clear_of_a_minutes_end")
def test_previews_and_operations_have_a_lower_budget(world: World, settings: Any) -> None:
    settings.CTXWEB_RATE_LIMIT_COSTLY = "2/min"
    client = world.api(world.operator_key)
    preview = {
        "format": "openai-chat",
        "request": {"messages": [{"role": "user", "content": "hi"}]},
        "strategy": "nanobot-trim",
    }
    for _ in range(2):
        response = client.post(
            "/api/v1/preview", json.dumps(preview), content_type="application/json"
        )
        assert response.status_code == 200, response.content
    response = client.post("/api/v1/preview", json.dumps(preview), content_type="application/json")
    assert response.status_code == 429
    assert response.json()["error"]["code"] == "throttled"
    assert "Retry-After" in response
    # Ingesting and reading go on: they count against the general budget only.
    assert client.get("/api/v1/strategies").status_code == 200


@pytest.mark.usefixtures("clear_of_a_minutes_end")
def test_the_health_check_and_anonymous_calls_are_not_counted(world: World, settings: Any) -> None:
    settings.CTXWEB_RATE_LIMIT = "1/min"
    for _ in range(3):
        assert Client().get("/api/v1/health").status_code == 200
        assert Client().get("/api/v1/sessions").status_code in (401, 403)


def test_the_default_rates_are_set() -> None:
    expected = os.environ.get("CTXWEB_RATE_LIMIT", "1200/min")
    assert expected == django_settings.CTXWEB_RATE_LIMIT
    assert (
        "ctxweb.api.throttling.ApiRateThrottle"
        in django_settings.REST_FRAMEWORK["DEFAULT_THROTTLE_CLASSES"]
    )


# --- the policy in a real browser --------------------------------------------------------------


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_pages_and_the_docs_run_under_the_policy_without_violations(
    live_server: Any,
    browser: Any,
    project: Any,
) -> None:
    from compaction.messages import parse
    from ctxweb.contexts.services import turn_ingest

    def ingest() -> None:
        request = {
            "model": "gpt-4o",
            "messages": [{"role": "user", "content": "<script>alert(1)</script> hello"}],
        }
        turn_ingest(project=project, external_id="s1", context=parse("openai-chat", request))

    context = browser.new_context()
    page = context.new_page()
    violations: list[str] = []
    page.on(
        "console",
        lambda message: (
            violations.append(message.text) if "Content Security Policy" in message.text else None
        ),
    )
    base = live_server.url
    log_in(page, base)  # the sessions list of an empty project: its copy buttons' script
    page.goto(f"{base}/api/docs/")
    page.wait_for_selector(".swagger-ui .info", timeout=20_000)  # the bundled UI started
    off_loop(ingest)
    page.goto(f"{base}/sessions/s1/")
    page.wait_for_selector("#chart canvas", timeout=10_000)  # the chart script ran
    page.goto(f"{base}/sessions/s1/turns/0/")
    context.close()
    assert violations == []
