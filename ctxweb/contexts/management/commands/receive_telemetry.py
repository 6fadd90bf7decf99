"""``manage.py receive_telemetry``: a capturer, the process in which a web process runs its
telemetry receivers (OTLP, Langfuse: :mod:`ctxweb.capturers`). Each web process starts and
watches its own, handing it the socket its requests come to; it is not started by hand."""

from __future__ import annotations

from ctxweb.capturers import capturer_loop
from ctxweb.contexts.management.helpers import HelperCommand
from ctxweb.sqlite.base import writes_yield


class Command(HelperCommand):
    help = "Receive the telemetry (OTLP, Langfuse) sent to the web process that started this one."

    def serve(self, *, parent: int, fd: int) -> None:
        # On SQLite, a flood of telemetry writes in the pauses of the proxy's recorders and the
        # web process, not in front of them (nothing elsewhere).
        writes_yield()
        capturer_loop(parent=parent, fd=fd)
