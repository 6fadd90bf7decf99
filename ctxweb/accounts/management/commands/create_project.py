"""``create_project NAME [--owner USERNAME]``: a new project, its owner an admin member."""

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from ctxweb.accounts.selectors import project_get_by_name
from ctxweb.accounts.services import project_create


class Command(BaseCommand):
    help = "Create a project; --owner makes an existing user its admin."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")
        parser.add_argument("--owner", help="username of an existing user")

    def handle(self, *args: Any, **options: Any) -> None:
        name = options["name"].strip()
        if not name:
            raise CommandError("The project name must not be empty.")
        if project_get_by_name(name=name) is not None:
            raise CommandError(f"A project named {name!r} already exists.")
        owner = None
        if options["owner"]:
            owner = get_user_model().objects.filter(username=options["owner"]).first()
            if owner is None:
                raise CommandError(f"No user named {options['owner']!r}.")
        project = project_create(name=name, owner=owner)
        self.stdout.write(f"Created project {project.name!r}.")
