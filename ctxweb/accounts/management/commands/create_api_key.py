"""``create_api_key --project NAME [--role ingest|operator]``: the new key on the last line."""

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from ctxweb.accounts.selectors import project_get_by_name
from ctxweb.accounts.services import KEY_ROLES, api_key_create


class Command(BaseCommand):
    help = "Create an API key for a project. The key is shown once, alone on the last line."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True)
        parser.add_argument("--role", choices=KEY_ROLES, default="ingest")
        parser.add_argument("--name", default="")

    def handle(self, *args: Any, **options: Any) -> None:
        project = project_get_by_name(name=options["project"])
        if project is None:
            raise CommandError(f"No project named {options['project']!r}.")
        key, raw = api_key_create(project=project, role=options["role"], name=options["name"])
        self.stderr.write(
            f"Created {key.role} key {key.prefix}… for project {project.name!r}. "
            "Store it now: it cannot be shown again."
        )
        self.stdout.write(raw)
