"""``manage.py runserver [[HOST:]PORT]``: ctxweb's own server (:mod:`ctxweb.server`), reloading
when the code changes unless ``--noreload``."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from ctxweb import server


class Command(BaseCommand):
    help = "Serve ctxweb (HTTP and WebSockets) with uvicorn, as production does."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("addrport", nargs="?", default="127.0.0.1:8000")
        parser.add_argument("--noreload", action="store_false", dest="reload")

    def handle(self, *args: Any, addrport: str, reload: bool, **options: Any) -> None:
        host, _, port = addrport.rpartition(":")
        if not port.isdigit():
            raise CommandError(f"{addrport!r} is not [HOST:]PORT.")
        server.serve(host.strip("[]") or "127.0.0.1", int(port), reload=reload)
