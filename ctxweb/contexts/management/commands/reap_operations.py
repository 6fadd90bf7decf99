"""Fail operations whose worker is gone: running without a heartbeat, or queued and never
picked up; and replays likewise (without progress for ``replays.STALE_SECONDS``, or queued for
``replays.QUEUED_STALE_SECONDS``)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from ctxweb.contexts.services import operations, replays


class Command(BaseCommand):
    help = "Mark operations stuck in running (stale heartbeat) or queued as failed."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--older-than",
            type=float,
            default=operations.STALE_SECONDS,
            help="seconds without a heartbeat before a running operation is lost",
        )
        parser.add_argument(
            "--queued-older-than",
            type=float,
            default=operations.QUEUED_STALE_SECONDS,
            help="seconds a queued operation may wait for a worker",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        reaped = operations.operation_reap_stale(
            older_than=options["older_than"], queued_older_than=options["queued_older_than"]
        )
        self.stdout.write(f"{len(reaped)} operation(s) marked failed: {reaped}")
        lost = replays.replay_reap_stale()
        self.stdout.write(f"{len(lost)} replay(s) marked failed: {lost}")
