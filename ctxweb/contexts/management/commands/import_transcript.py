"""``import_transcript PATH... --project NAME [--format auto] [--prefix P]``: import transcript
files with a progress bar on stderr and one summary line per session on stdout."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.core.management.base import BaseCommand, CommandError, CommandParser, OutputWrapper

from compaction.errors import FormatError
from ctxweb.accounts.selectors import project_get_by_name
from ctxweb.contexts.services.imports import TRANSCRIPT_FORMATS as FORMATS
from ctxweb.contexts.services.imports import transcript_import

if TYPE_CHECKING:
    from ctxweb.accounts.models import Project

BAR_WIDTH = 30
#: Without a terminal, a progress line at most this often (seconds), besides the first and last.
LINE_EVERY = 5.0
#: On a terminal, a redraw at most this often (seconds), besides the last.
REDRAW_EVERY = 0.1


def _count(n: int, word: str) -> str:
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"


def _plain(text: str) -> str:
    """No colour: stderr is styled as errors by default, and progress is not an error."""
    return text


class ProgressBar:
    """A text bar redrawn in place on a terminal; periodic plain lines otherwise (logs, CI)."""

    def __init__(self, stream: OutputWrapper, label: str, *, tty: bool | None = None) -> None:
        self.stream = stream
        self.label = label
        self.tty = stream.isatty() if tty is None else tty
        self.started = time.monotonic()
        self.last = -LINE_EVERY
        self.drawn = False

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if self.tty:
            if done != total and now - self.last < REDRAW_EVERY:
                return
            self.last = now
            filled = BAR_WIDTH * done // total if total else BAR_WIDTH
            bar = "#" * filled + "-" * (BAR_WIDTH - filled)
            self.stream.write(
                f"\r{self.label} [{bar}] {done}/{total} turns", ending="", style_func=_plain
            )
            self.stream.flush()
            self.drawn = True
        elif done == total or now - self.last >= LINE_EVERY:
            self.last = now
            percent = 100 * done // total if total else 100
            self.stream.write(f"{self.label}: {done}/{total} turns ({percent}%)", style_func=_plain)
            self.stream.flush()

    def close(self) -> None:
        if self.drawn:
            self.stream.write(f"  {time.monotonic() - self.started:.1f}s", style_func=_plain)
            self.stream.flush()
            self.drawn = False


class Command(BaseCommand):
    help = (
        "Import agent transcript files (Claude Code, Codex, SWE-agent, OpenHands, OpenAI Chat, "
        "claude-trace) into a project. Importing a file again adds no turn."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paths", nargs="+", metavar="PATH", help="transcript files")
        parser.add_argument("--project", required=True, help="the project's name")
        parser.add_argument(
            "--format",
            default="auto",
            help=f"auto (default: detected per file) or one of {', '.join(FORMATS)}",
        )
        parser.add_argument("--prefix", default="", help="put before every session's id")

    def handle(self, *args: Any, **options: Any) -> None:
        project = project_get_by_name(name=options["project"])
        if project is None:
            raise CommandError(f"No project named {options['project']!r}.")
        format = options["format"]
        if format != "auto" and format not in FORMATS:
            raise CommandError(
                f"Unknown format {format!r}: use auto or one of {', '.join(FORMATS)}."
            )
        paths = [Path(p) for p in options["paths"]]
        for path in paths:
            if not path.is_file():
                raise CommandError(f"No such file: {path}")
        for path in paths:
            self._import(project, path, format, options["prefix"])

    def _import(self, project: Project, path: Path, format: str, prefix: str) -> None:
        bar = ProgressBar(self.stderr, path.name)
        started = time.monotonic()
        try:
            result = transcript_import(
                project=project,
                data=path.read_bytes(),
                name=path.name,
                format=format,
                external_id_prefix=prefix,
                progress=bar,
            )
        except FormatError as error:
            raise CommandError(f"{path}: {error}") from error
        finally:
            bar.close()
        for session in result.sessions:
            skipped = f" ({session.skipped} already imported)" if session.skipped else ""
            self.stdout.write(
                f"{session.external_id}: {_count(session.turns, 'turn')}{skipped}, "
                f"peak {session.peak_tokens:,} tokens, {_count(session.compactions, 'compaction')}"
            )
        self.stdout.write(
            f"{path}: {result.format}, {_count(len(result.sessions), 'session')}, "
            f"{_count(result.turns, 'turn')} imported, {result.skipped:,} already there, "
            f"{time.monotonic() - started:.1f}s"
        )
