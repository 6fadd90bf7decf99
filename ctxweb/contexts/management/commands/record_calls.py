"""``manage.py record_calls``: the embedded shape's recorder process, which each web process
starts and watches (production records on Celery workers). By hand, ``--once`` records what is
waiting and ends."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from ctxweb.contexts.services.recording import background_priority, recorder_loop


class Command(BaseCommand):
    help = "Record the calls the proxy relayed and queued (the embedded shape's recorder)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--parent", type=int, help="end when this process has")
        parser.add_argument("--once", action="store_true", help="end when nothing is left")
        parser.add_argument(
            "--small-only",
            action="store_true",
            help="leave lanes whose next call is big (CTXWEB_RECORDING_BIG_BYTES) to the others",
        )

    def handle(
        self, *args: Any, parent: int | None, once: bool, small_only: bool, **options: Any
    ) -> None:
        if parent is not None:  # started by a web process: background work
            background_priority()
        done = recorder_loop(parent=parent, once=once, small_only=small_only)
        if once:
            self.stdout.write(f"{done} calls recorded")
