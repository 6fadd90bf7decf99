"""``seed_demo [--if-empty]``: a demo login, project, API key and sessions for `make run`."""

from __future__ import annotations

import json
import os
import secrets
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser

from ctxweb.accounts.models import KeyRole, Project
from ctxweb.accounts.services import api_key_create, project_create

CREDENTIALS_FILE = "demo-credentials.json"


class Command(BaseCommand):
    help = "Create demo data: an admin login, a 'demo' project with an API key, demo sessions."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--if-empty", action="store_true", help="do nothing if any project exists"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        path = settings.DATA_DIR / CREDENTIALS_FILE
        if options["if_empty"] and Project.objects.exists():
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
        project = Project.objects.filter(name="demo").first() or project_create(
            name="demo", owner=user
        )
        _, key = api_key_create(project=project, role=KeyRole.OPERATOR, name="demo")
        self._seed_sessions(project)
        credentials = {"username": "admin", "password": password, "api_key": key}
        path.write_text(json.dumps(credentials))
        path.chmod(0o600)
        self._print(credentials)

    def _seed_sessions(self, project: Project) -> None:
        """Demo sessions arrive with ingestion (issue 3); the project and login come first."""

    def _print(self, credentials: dict[str, str]) -> None:
        port = os.environ.get("PORT", "8000")
        base = f"http://127.0.0.1:{port}"
        self.stdout.write(
            "\n"
            f"  ctxweb is starting on {base}/\n"
            f"  Log in as {credentials['username']} / {credentials['password']}"
            f"  (admin: {base}/admin/)\n"
            f"  API key (demo project): {credentials['api_key']}\n"
        )
