"""The site's skeleton: pages answer, the admin works, commands create projects and keys."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.test import Client

from ctxweb.accounts.models import ApiKey, Membership, Project
from ctxweb.accounts.services import hash_key
from ctxweb.contexts.models import Session, Turn

pytestmark = pytest.mark.django_db


def test_the_dashboard_asks_an_anonymous_visitor_to_log_in(client: Client) -> None:
    response = client.get("/")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_the_login_page_renders(client: Client) -> None:
    response = client.get("/accounts/login/")
    assert response.status_code == 200
    assert b"Log in" in response.content


def test_the_admin_serves_a_superuser(admin_client: Client) -> None:
    assert admin_client.get("/admin/").status_code == 200
    assert admin_client.get("/admin/accounts/project/").status_code == 200


def test_health_answers_without_credentials(client: Client) -> None:
    assert client.get("/api/v1/health").json() == {"status": "ok"}


def test_create_project_makes_the_owner_an_admin(django_user_model: type) -> None:
    owner = django_user_model.objects.create_user("alice")
    call_command("create_project", "acme", "--owner", "alice", stdout=io.StringIO())
    project = Project.objects.get(name="acme")
    assert Membership.objects.get(project=project, user=owner).role == "admin"


def test_create_api_key_prints_the_key_alone_on_its_last_line() -> None:
    Project.objects.create(name="acme")
    out = io.StringIO()
    call_command(
        "create_api_key",
        "--project",
        "acme",
        "--role",
        "operator",
        stdout=out,
        stderr=io.StringIO(),
    )
    raw = out.getvalue().strip().splitlines()[-1]
    key = ApiKey.objects.get()
    assert key.key_hash == hash_key(raw)
    assert raw not in (key.key_hash, key.prefix)
    assert key.role == "operator"


def test_seed_demo_creates_a_login_a_project_a_key_and_sessions(
    settings: object, tmp_path: object
) -> None:
    settings.DATA_DIR = tmp_path  # type: ignore[attr-defined]
    out = io.StringIO()
    call_command("seed_demo", "--if-empty", stdout=out)
    project = Project.objects.get(name="demo")
    printed = out.getvalue()
    assert "Log in as admin" in printed
    assert "/api/v1/sessions/my-first-session/turns" in printed
    credentials = json.loads((tmp_path / "demo-credentials.json").read_text())  # type: ignore[operator]
    assert f"Bearer {credentials['api_key']}" in printed
    sessions = {s.external_id: s for s in Session.objects.filter(project=project)}
    assert set(sessions) == {"coding-agent", "compacted-agent", "near-limit", "claude-coder"}
    for session in sessions.values():
        turns = list(Turn.objects.filter(session=session))
        assert len(turns) == session.turn_count >= 50
        assert all(sum(t.regions.values()) == t.total_tokens for t in turns)
    assert sessions["compacted-agent"].compaction_count == 1
    assert sessions["near-limit"].last_fill > 0.85
    assert sessions["claude-coder"].format == "anthropic-messages"
    call_command("seed_demo", "--if-empty", stdout=io.StringIO())
    assert Project.objects.count() == 1
