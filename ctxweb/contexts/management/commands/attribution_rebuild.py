"""``attribution_rebuild [--project NAME]``: make the attribution rollups (issue 36) again from
the stored turns, for one project or every one; idempotent. For a database whose turns were
stored before the rollups existed, or after a change in how items are attributed."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from ctxweb.accounts.selectors import project_get_by_name
from ctxweb.contexts.services.attribution import attribution_rebuild


class Command(BaseCommand):
    help = "Rebuild the attribution rollups from stored turns (one project, or all)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", help="the project's name (default: every project)")

    def handle(self, *args: Any, **options: Any) -> None:
        project = None
        if options["project"] is not None:
            project = project_get_by_name(name=options["project"])
            if project is None:
                raise CommandError(f"No project named {options['project']!r}.")
        walked = attribution_rebuild(project=project)
        self.stdout.write(f"Rebuilt {walked['sessions']} sessions, {walked['turns']} turns.")
