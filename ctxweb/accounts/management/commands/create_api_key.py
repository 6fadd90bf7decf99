"""``create_api_key --project NAME [--role ingest|operator]``: the new key on the last line."""

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from ctxweb.accounts.models import KeyRole, Project
from ctxweb.accounts.services import api_key_create


class Command(BaseCommand):
    help = "Create an API key for a project. The key is shown once, alone on the last line."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True)
        parser.add_argument("--role", choices=KeyRole.values, default=KeyRole.INGEST)
        parser.add_argument("--name", default="")

    def handle(self, *args: Any, **options: Any) -> None:
        project = Project.objects.filter(name=options["project"]).first()
        if project is None:
            raise CommandError(f"No project named {options['project']!r}.")
        key, raw = api_key_create(project=project, role=options["role"], name=options["name"])
        self.stderr.write(
            f"Created {key.role} key {key.prefix}… for project {project.name!r}. "
            "Store it now: it cannot be shown again."
        )
        self.stdout.write(raw)
