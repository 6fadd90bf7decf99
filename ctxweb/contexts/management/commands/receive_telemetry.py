"""``manage.py receive_telemetry``: a capturer, the process in which a web process runs its
telemetry receivers (OTLP, Langfuse: :mod:`ctxweb.capturers`). Each web process starts and
watches its own, handing it the socket its requests come to; it is not started by hand."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from ctxweb.capturers import capturer_loop


class Command(BaseCommand):
    help = "Receive the telemetry (OTLP, Langfuse) sent to the web process that started this one."
    # The web process that starts it has run them: a capturer started again is ready sooner.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--parent", type=int, required=True, help="end when this process has")
        parser.add_argument(
            "--fd", type=int, required=True, help="the listening socket, inherited from the parent"
        )

    def handle(self, *args: Any, parent: int, fd: int, **options: Any) -> None:
        capturer_loop(parent=parent, fd=fd)
