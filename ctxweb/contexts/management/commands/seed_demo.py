"""``seed_demo [--if-empty]``: a demo login, project, API key and sessions for `make run`."""

from __future__ import annotations

import json
import os
import secrets
import shlex
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser

from ctxweb.accounts.selectors import project_any_exists, project_get_by_name
from ctxweb.accounts.services import api_key_create, project_create
from ctxweb.contexts import selectors, services
from ctxweb.contexts.demo import coding_session

if TYPE_CHECKING:
    from ctxweb.accounts.models import Project

CREDENTIALS_FILE = "demo-credentials.json"


@dataclass(frozen=True)
class DemoSession:
    """One demo session: its id and the arguments of :func:`coding_session`."""

    external_id: str
    turns: int
    options: dict[str, Any]


#: gpt-4o's window less its output reserve: the near-limit session ends above 85% of it.
_GPT4O_USABLE = 128_000 - 4_096

DEMO_SESSIONS = (
    DemoSession("coding-agent", 60, {"seed": 1, "target_tokens": 48_000}),
    DemoSession(
        "compacted-agent",
        80,
        {"seed": 2, "target_tokens": 70_000, "compact_at": 50, "summary_marker": "baseagent"},
    ),
    DemoSession("near-limit", 150, {"seed": 3, "target_tokens": int(_GPT4O_USABLE * 0.90)}),
    DemoSession(
        "claude-coder", 50, {"seed": 4, "target_tokens": 60_000, "format": "anthropic-messages"}
    ),
)

#: The body of the curl command that ``make run`` prints.
FIRST_TURN = {
    "format": "openai-chat",
    "request": {
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": "You are a helpful coding agent."},
            {"role": "user", "content": "Hello! List the files in this repository."},
        ],
    },
}


class Command(BaseCommand):
    help = "Create demo data: an admin login, a 'demo' project with an API key, demo sessions."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--if-empty", action="store_true", help="do nothing if any project exists"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        path = settings.DATA_DIR / CREDENTIALS_FILE
        if options["if_empty"] and project_any_exists():
            if path.exists():
                self._print(json.loads(path.read_text()))
            return
        user_model = get_user_model()
        password = secrets.token_urlsafe(9)
        user = user_model.objects.filter(username="admin").first()
        if user is None:
            user = user_model.objects.create_superuser("admin", "admin@example.com", password)
        else:
            user.set_password(password)
            user.save()
        project = project_get_by_name(name="demo") or project_create(name="demo", owner=user)
        _, key = api_key_create(project=project, role="operator", name="demo")
        self._seed_sessions(project)
        credentials = {"username": "admin", "password": password, "api_key": key}
        path.write_text(json.dumps(credentials))
        path.chmod(0o600)
        self._print(credentials)

    def _seed_sessions(self, project: Project) -> None:
        """Ingest the demo sessions turn by turn through the real service; keep existing ones."""
        for demo in DEMO_SESSIONS:
            if selectors.session_get(project=project, external_id=demo.external_id) is not None:
                continue
            started = time.perf_counter()
            self.stdout.write(
                f"  Seeding session {demo.external_id} ({demo.turns} turns)...", ending=""
            )
            self.stdout.flush()
            for body in coding_session(demo.turns, **demo.options):
                services.turn_ingest(
                    project=project,
                    external_id=demo.external_id,
                    context=services.turn_request_parse(
                        project=project,
                        external_id=demo.external_id,
                        format=body["format"],
                        request=body["request"],
                    ),
                    model=body["model"],
                    usage=body["usage"],
                    turn_id=body["turn_id"],
                    source="demo",
                )
            self.stdout.write(f" done in {time.perf_counter() - started:.1f}s")

    def _print(self, credentials: dict[str, str]) -> None:
        port = os.environ.get("PORT", "8000")
        base = f"http://127.0.0.1:{port}"
        body = shlex.quote(json.dumps(FIRST_TURN))
        self.stdout.write(
            "\n"
            f"  ctxweb is starting on {base}/\n"
            f"  Log in as {credentials['username']} / {credentials['password']}"
            f" at {base}/accounts/login/  (admin: {base}/admin/)\n"
            f"  API key (demo project): {credentials['api_key']}\n"
            "\n"
            "  Post a turn with it:\n"
            f"    curl -X POST {base}/api/v1/sessions/my-first-session/turns \\\n"
            f'      -H "Authorization: Bearer {credentials["api_key"]}" \\\n'
            '      -H "Content-Type: application/json" \\\n'
            f"      -d {body}\n"
        )
