"""``manage.py prepare_calls``: a preparer, the process in which a web process prepares the
proxy's managed calls (:mod:`ctxweb.contexts.services.preparing`). Each web process starts and
watches its own, handing it the socket its calls come to; it is not started by hand."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from ctxweb.contexts.services.preparing import preparer_loop
from ctxweb.serving import tune_allocator


class Command(BaseCommand):
    help = "Prepare the proxy's managed calls for the web process that started this one."
    # The web process that starts it has run them: a preparer started again is ready sooner.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--parent", type=int, required=True, help="end when this process has")
        parser.add_argument(
            "--fd", type=int, required=True, help="the listening socket, inherited from the parent"
        )

    def handle(self, *args: Any, parent: int, fd: int, **options: Any) -> None:
        # A managed call's body is tens of megabytes: freed, it goes back to the system.
        tune_allocator()
        preparer_loop(parent=parent, fd=fd)
