"""Where the benchmarks are recorded: the machine they ran on, and each script's own section of
``docs/benchmarks.md`` (the other sections are kept); and the embedded shape's Django that the
in-process benchmarks set up (:func:`embedded_django`)."""

from __future__ import annotations

import datetime
import os
import platform
import re
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "benchmarks.md"
INTRO = """# Benchmarks

Measured by the scripts under `bench/` (docs/design.md section 8); each script replaces only its own
section when it is re-run. Numbers are from one run on the machine named in each section.
"""


def cpu() -> str:
    """The processor's model name (from ``/proc/cpuinfo`` where there is one)."""
    name = platform.processor() or platform.machine()
    try:
        found = re.search(r"model name\s*:\s*(.+)", Path("/proc/cpuinfo").read_text())
    except OSError:
        return name
    return found.group(1).strip() if found else name


def machine(*versions: str) -> str:
    """The machine and software a run used: ``"<cpu>, <n> cores, Python <v>, <versions...>
    (<platform>)"``."""
    parts = [cpu(), f"{os.cpu_count()} cores", f"Python {platform.python_version()}", *versions]
    return f"{', '.join(parts)} ({platform.platform()})"


def write_section(heading: str, section: str) -> None:
    """Replace the section under ``heading`` in docs/benchmarks.md (up to the next ``## ``), or
    add it; read right before writing, so other scripts' sections stay as they are. What people
    wrote under the section's table (the experiments, the runs before) stays under the new one."""
    DOCS.parent.mkdir(parents=True, exist_ok=True)
    text = DOCS.read_text() if DOCS.exists() else INTRO
    pattern = re.compile(rf"^{re.escape(heading)}\n.*?(?=^## |\Z)", re.S | re.M)
    found = pattern.search(text)
    if found:
        notes = notes_under_table(found.group(0))
        new = section.rstrip("\n") + "\n\n" + (notes + "\n\n" if notes else "")
        text = text[: found.start()] + new + text[found.end() :]
    else:
        text = text.rstrip("\n") + "\n\n" + section
    DOCS.write_text(text.rstrip("\n") + "\n")


def notes_under_table(section: str) -> str:
    """The text of a section after its first table (its rows: lines starting with ``|``)."""
    lines = section.split("\n")
    start = next((n for n, line in enumerate(lines) if line.startswith("|")), None)
    if start is None:
        return ""
    end = start
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    return "\n".join(lines[end:]).strip("\n")


def report(
    heading: str,
    script: str,
    description: str,
    columns: list[str],
    rows: list[str],
    *,
    versions: tuple[str, ...] = (),
    write: bool = True,
) -> str:
    """A benchmark's section: heading, which script ran when and where, what it measured, and a
    table; printed, and written to docs/benchmarks.md unless ``write`` is false."""
    section = "\n".join(
        [
            heading,
            "",
            f"`bench/{script}`, {datetime.date.today()}, on {machine(*versions)}.",
            "",
            description,
            "",
            "| " + " | ".join(columns) + " |",
            "|" + "---|" * len(columns),
            *rows,
            "",
        ]
    )
    print(section)
    if write:
        write_section(heading, section)
    return section


def embedded_django(prefix: str) -> str:
    """Django set up in this process in the embedded shape (SQLite in a new data folder named
    after ``prefix``, no Redis), migrated: the folder."""
    folder = tempfile.mkdtemp(prefix=prefix)
    os.environ["CTXWEB_DATA_DIR"] = folder
    os.environ.pop("DATABASE_URL", None)
    os.environ.pop("REDIS_URL", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ctxweb.settings")
    import django
    from django.core.management import call_command

    from ctxweb.datadir import prepare

    prepare()  # this process is an entry point: its data folder and secret
    django.setup()
    call_command("migrate", verbosity=0)
    return folder
