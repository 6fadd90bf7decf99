"""Where an embedded ctxweb keeps its files, and the one step that creates them.

Reading the settings writes nothing: :func:`prepare` runs where a process starts (``manage.py``,
the ASGI and WSGI entry points), creating the data folder and, when the environment gives no
``SECRET_KEY``, a secret kept in that folder so sessions survive a restart. It runs before
Django's settings are read, and does nothing in a process whose settings are loaded already (the
test suite importing the ASGI application).
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parents[1]
SECRET_FILE = "secret_key"


def data_dir() -> Path:
    """``$CTXWEB_DATA_DIR``, else ``./data`` at the project's root."""
    return Path(os.environ.get("CTXWEB_DATA_DIR") or BASE_DIR / "data").resolve()


def secret_key(directory: Path) -> str:
    """``$SECRET_KEY``, else the one :func:`prepare` kept in ``directory``, else empty (Django then
    refuses to sign anything, naming the setting)."""
    if os.environ.get("SECRET_KEY"):
        return os.environ["SECRET_KEY"]
    path = directory / SECRET_FILE
    return path.read_text().strip() if path.is_file() else ""


def prepare() -> Path:
    """Create the data folder, its static-files folder and, unless ``$SECRET_KEY`` is set, a secret
    readable by its owner only. Idempotent; returns the folder."""
    from django.conf import settings

    directory = data_dir()
    if settings.configured:
        return directory
    (directory / "staticfiles").mkdir(parents=True, exist_ok=True)
    path = directory / SECRET_FILE
    if not os.environ.get("SECRET_KEY") and not path.exists():
        # O_EXCL: two processes starting at once keep the same secret.
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return directory
        with os.fdopen(fd, "w") as handle:
            handle.write(secrets.token_urlsafe(50))
    return directory
