"""Live servers for tests and benchmarks: ``python -m ctxweb.server`` (uvicorn serving
``ctxweb.asgi:application``, as production runs it) in a subprocess.

:func:`embedded_env` is the environment of a throwaway embedded ctxweb (its own SQLite file and
data folder, nothing inherited from the caller's ctxweb settings); :func:`manage` runs a
``manage.py`` command in it and :func:`create_key` sets up a project and an API key in one
interpreter; :class:`LiveServer` starts a server on a free loopback port and waits for its health
check. Failures raise :class:`ServerFailed` with the server's last output.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

ROOT = Path(__file__).resolve().parents[2]
READY_SECONDS = 60
REQUEST_SECONDS = 60


class ServerFailed(RuntimeError):
    """The server exited or never answered its health check."""


def embedded_env(data_dir: Path, **extra: str) -> dict[str, str]:
    """The caller's environment without ctxweb's settings, for an embedded ctxweb in ``data_dir``
    (SQLite, the in-memory channel layer, tasks in process, ``DEBUG`` off)."""
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in ("DATABASE_URL", "REDIS_URL", "DEBUG", "ALLOWED_HOSTS", "SECRET_KEY")
        and not name.startswith(("CTXWEB_", "DJANGO_", "CELERY_"))
    }
    env.update(
        CTXWEB_DATA_DIR=str(data_dir),
        DJANGO_SETTINGS_MODULE="ctxweb.settings",
        DEBUG="0",
        PYTHONUNBUFFERED="1",
    )
    return env | extra


def manage(env: Mapping[str, str], *args: str, **extra_env: str) -> str:
    """Run ``manage.py`` with ``args``; its standard output, or :class:`ServerFailed`."""
    result = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args],
        cwd=ROOT,
        env={**env, **extra_env},
        capture_output=True,
        text=True,
        timeout=300,
    )
    if result.returncode != 0:
        raise ServerFailed(f"manage.py {' '.join(args)}:\n{result.stdout}\n{result.stderr}")
    return result.stdout


def create_key(
    env: Mapping[str, str],
    *,
    project: str = "p",
    role: str = "operator",
    owner: str | None = None,
    password: str | None = None,
) -> str:
    """Migrate, create ``project`` (and its owner, a superuser, when given) and an API key of
    ``role``, in one interpreter (each start of ``manage.py`` costs seconds); the raw key."""
    steps = ["call_command('migrate', verbosity=0)"]
    extra: dict[str, str] = {}
    if owner is not None:
        steps.append("call_command('createsuperuser', interactive=False, verbosity=0)")
        extra = {
            "DJANGO_SUPERUSER_USERNAME": owner,
            "DJANGO_SUPERUSER_PASSWORD": password or "",
            "DJANGO_SUPERUSER_EMAIL": f"{owner}@example.com",
        }
    steps.append(f"call_command('create_project', {project!r}, owner={owner!r})")
    steps.append(f"call_command('create_api_key', project={project!r}, role={role!r}, stdout=out)")
    script = (
        "import io; from django.core.management import call_command; out = io.StringIO(); "
        + "; ".join(steps)
        + "; print(out.getvalue().strip().splitlines()[-1])"
    )
    return manage(env, "shell", "-c", script, **extra).strip().splitlines()[-1].strip()


def session_turns(url: str, key: str, session: str, *, project: str | None = None) -> int:
    """How many turns session ``session`` has, read through a live server's API with ``key``
    (0 before its first: the API answers 404 until then)."""
    query = f"?project={quote(project)}" if project else ""
    request = urllib.request.Request(  # the session's one small answer, not its turns' list
        f"{url}/api/v1/sessions/{quote(session, safe='')}{query}",
        headers={"Authorization": f"Bearer {key}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return int(json.loads(response.read())["turn_count"])
    except urllib.error.HTTPError as error:
        if error.code == 404:  # no session yet
            return 0
        raise


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LiveServer:
    """``python -m ctxweb.server`` serving ``ctxweb.asgi:application`` (or another ``app``) on a
    free loopback port, in its own process group, its output collected (the last lines go into
    failure messages)."""

    def __init__(
        self,
        env: Mapping[str, str],
        *,
        keep_lines: int = 5000,
        app: str = "ctxweb.asgi:application",
        port: int = 0,
    ) -> None:
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "ctxweb.server",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--app",
                app,
            ],
            cwd=ROOT,
            env=dict(env),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.keep_lines = keep_lines
        self.lines: list[str] = []
        self.port: int | None = None
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if len(self.lines) < self.keep_lines:
                self.lines.append(line)
            found = re.search(r"ctxweb: listening on http://[\d.]+:(\d+)", line)
            if found and self.port is None:
                self.port = int(found.group(1))

    @property
    def output(self) -> str:
        """The last lines the server wrote (for failure messages)."""
        return "".join(self.lines[-60:])

    @property
    def log(self) -> str:
        """Everything the server wrote (up to ``keep_lines`` lines)."""
        return "".join(self.lines)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def wait_ready(self, seconds: float = READY_SECONDS) -> LiveServer:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.port is not None:
                try:
                    with urllib.request.urlopen(f"{self.url}/api/v1/health", timeout=5) as r:
                        if r.status == 200:
                            return self
                except OSError:
                    pass
            if self.process.poll() is not None:
                raise ServerFailed(f"the server exited ({self.process.returncode}):\n{self.output}")
            time.sleep(0.1)
        raise ServerFailed(f"the server was not ready in {seconds:.0f}s:\n{self.output}")

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=15)
        self.reader.join(timeout=5)


@contextmanager
def live_server(
    env: Mapping[str, str], *, app: str = "ctxweb.asgi:application", port: int = 0
) -> Iterator[LiveServer]:
    """A ready server, stopped on exit (on ``port``, or a free one)."""
    server = LiveServer(env, app=app, port=port)
    try:
        yield server.wait_ready()
    finally:
        server.stop()


# --- a server on the test database -------------------------------------------------------------


def require_postgresql(why: str = "concurrent writers") -> None:
    """Skip unless the database is PostgreSQL; fail instead in CI's PostgreSQL pass."""
    from django.db import connection

    if connection.vendor == "postgresql":
        return
    reason = f"needs PostgreSQL ({why}), the database is {connection.vendor}"
    if os.environ.get("CI") == "true" and os.environ.get("REDIS_URL"):
        pytest.fail(f"{reason} (CI=true with REDIS_URL set: the PostgreSQL pass must run this)")
    pytest.skip(reason)


def database_url() -> str:
    """The URL of the *test* database (what pytest-django created), for a server subprocess."""
    from django.conf import settings

    db = settings.DATABASES["default"]
    auth = quote(db.get("USER") or "", safe="")
    if db.get("PASSWORD"):
        auth += ":" + quote(db["PASSWORD"], safe="")
    host = db.get("HOST") or "127.0.0.1"
    port = db.get("PORT") or 5432
    return f"postgres://{auth}@{host}:{port}/{db['NAME']}"


def database_server_env(data_dir: Path, **extra: str) -> dict[str, str]:
    """The environment of a server on the test database, the test's Redis and its secret (the
    test process signs the dashboard login's session: the server must read it)."""
    from django.conf import settings

    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "ctxweb.settings",
        "DATABASE_URL": database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "SECRET_KEY": settings.SECRET_KEY,
        "CTXWEB_DATA_DIR": str(data_dir),
        "DEBUG": "0",
        "PYTHONUNBUFFERED": "1",
        **extra,
    }


# --- a client ----------------------------------------------------------------------------------


@dataclass
class Reply:
    status: int
    body: dict[str, Any]
    seconds: float


def post(url: str, key: str, payload: Mapping[str, Any], timeout: float = REQUEST_SECONDS) -> Reply:
    """POST JSON; a connection error or timeout is status 0 (what a client sees as "no answer")."""
    request = urllib.request.Request(
        url,
        data=json.dumps(payload).encode(),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
        method="POST",
    )
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return Reply(
                response.status, json.loads(response.read()), time.perf_counter() - started
            )
    except urllib.error.HTTPError as error:
        raw = error.read()
        try:
            body = json.loads(raw)
        except ValueError:
            body = {"raw": raw[:500].decode(errors="replace")}
        return Reply(error.code, body, time.perf_counter() - started)
    except OSError as error:
        return Reply(0, {"raw": repr(error)}, time.perf_counter() - started)
