"""``manage.py receive_telemetry``: a capturer, the process in which a web process runs its
telemetry receivers (OTLP, Langfuse: :mod:`ctxweb.capturers`). Each web process starts and
watches its own, handing it the socket its requests come to; it is not started by hand."""

from __future__ import annotations

from ctxweb.capturers import capturer_loop
from ctxweb.contexts.management.helpers import HelperCommand


class Command(HelperCommand):
    help = "Receive the telemetry (OTLP, Langfuse) sent to the web process that started this one."

    def serve(self, *, parent: int, fd: int) -> None:
        capturer_loop(parent=parent, fd=fd)
