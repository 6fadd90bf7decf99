"""``manage.py prepare_calls``: a preparer, the process in which a web process prepares the
proxy's managed calls (:mod:`ctxweb.contexts.services.preparing`). Each web process starts and
watches its own, handing it the socket its calls come to; it is not started by hand."""

from __future__ import annotations

from ctxweb.contexts.management.helpers import HelperCommand
from ctxweb.contexts.services.preparing import preparer_loop
from ctxweb.serving import tune_allocator


class Command(HelperCommand):
    help = "Prepare the proxy's managed calls for the web process that started this one."

    def serve(self, *, parent: int, fd: int) -> None:
        # A managed call's body is tens of megabytes: freed, it goes back to the system.
        tune_allocator()
        preparer_loop(parent=parent, fd=fd)
