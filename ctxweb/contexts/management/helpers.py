"""What the commands of the web process's helper processes share (``prepare_calls``,
``receive_telemetry``): each web process starts and watches its own, handing each the socket its
work comes to (:mod:`ctxweb.contexts.services.preparing`); they are not started by hand."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser


class HelperCommand(BaseCommand):
    """A helper process's command: ``--parent`` (it ends when that process has) and ``--fd`` (the
    listening socket, inherited); :meth:`serve` runs its loop."""

    # The web process that starts it has run them: a helper started again is ready sooner.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--parent", type=int, required=True, help="end when this process has")
        parser.add_argument(
            "--fd", type=int, required=True, help="the listening socket, inherited from the parent"
        )

    def handle(self, *args: Any, parent: int, fd: int, **options: Any) -> None:
        self.serve(parent=parent, fd=fd)

    def serve(self, *, parent: int, fd: int) -> None:
        raise NotImplementedError
