"""The test suite's settings: the base ones, made fast and kept out of the project's ``./data``.

Servers and workers that tests start in a subprocess run on :mod:`ctxweb.settings` with an
environment of their own (a throwaway ``CTXWEB_DATA_DIR``, ``DATABASE_URL``, ``REDIS_URL``).
"""

import os
import tempfile
from pathlib import Path

from ctxweb.settings.base import *  # noqa: F403

DEBUG = False
SECRET_KEY = os.environ.get("SECRET_KEY") or "ctxweb-tests-only-" + "x" * 40
# Artifacts land in a folder of this test process; the storage creates it on first save.
DATA_DIR = Path(tempfile.gettempdir()) / f"ctxweb-tests-{os.getpid()}"
STORAGES = {
    "default": {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": DATA_DIR / "artifacts"},
    },
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
# Static files come from the finders; nothing is collected.
STATIC_ROOT: Path | None = None  # type: ignore[no-redef]
WHITENOISE_AUTOREFRESH = False
# PBKDF2's deliberate slowness costs half a second a user.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
# In this process a request's connection closes with it: requests served here by the threaded
# handler (ctxweb.serving) would otherwise keep one per thread past the test database's teardown.
# Servers started as subprocesses keep theirs (CONN_MAX_AGE of the base settings).
DATABASES["default"]["CONN_MAX_AGE"] = 0  # noqa: F405
if DATABASES["default"]["ENGINE"] == "ctxweb.sqlite":  # noqa: F405
    # The embedded pass's test database is a file, as the embedded shape's is (WAL, a writer
    # waits its turn), in memory-backed /dev/shm where there is one: not SQLite's shared-cache
    # in-memory database, whose writers fail at once on one another's table locks and whose
    # connections Django never closes (one left inside a transaction locked every later test).
    # (A container's /dev/shm may be 64 MB: then the temporary folder.)
    _SHM = Path("/dev/shm")

    def _roomy(folder: Path, at_least: int = 1 << 30) -> bool:
        try:
            found = os.statvfs(folder)
        except OSError:
            return False
        return found.f_bavail * found.f_frsize >= at_least

    DATABASES["default"]["TEST"] = {  # noqa: F405
        "NAME": str(
            (_SHM if _roomy(_SHM) else Path(tempfile.gettempdir()))
            / f"ctxweb-test-{os.getpid()}.sqlite3"
        )
    }
# The test client's host (Django's "testserver"), for tests only: never in the base settings.
ALLOWED_HOSTS = [*ALLOWED_HOSTS, "testserver"]  # noqa: F405
CTXWEB_ALLOWED_ORIGINS = [*CTXWEB_ALLOWED_ORIGINS, "http://testserver"]  # noqa: F405
# Relayed calls are recorded by this process's threads, also in the PostgreSQL pass (where
# REDIS_URL is set): tests that start a Celery worker set the servers' environment themselves.
CTXWEB_RECORDER = "threads"
CTXWEB_RECORDING_CELERY = False
# Managed calls relayed in this process are prepared on its threads: a preparer process would not
# see what a test wrote inside its transaction. Servers started as subprocesses start their
# preparers.
CTXWEB_PROXY_PREPARERS = 0
# Telemetry (OTLP, Langfuse) sent to this process is received on its threads, for the same reason.
CTXWEB_CAPTURE_PROCESSES = 0


def _redis_of_worker(url: str, worker: str) -> str:
    """``url`` moved to a Redis database of its own for pytest-xdist worker ``worker`` (gw0 takes
    the URL's database, gw1 the one below it, and so on), so parallel workers never read each
    other's channel-layer messages, Celery queues or rate-limit counters. Each worker already has
    its own PostgreSQL test database (pytest-django's ``_gw<n>`` suffix)."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    base = int(parts.path.strip("/") or 0)
    number = int(worker.removeprefix("gw") or 0)
    return urlunsplit(parts._replace(path=f"/{(base - number) % 16}"))


_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
_REDIS_URL: str = os.environ.get("REDIS_URL", "")
if _REDIS_URL and _WORKER.startswith("gw"):
    REDIS_URL = _redis_of_worker(_REDIS_URL, _WORKER)
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL]},
        }
    }
    CACHES["default"]["LOCATION"] = REDIS_URL  # noqa: F405
    CELERY_BROKER_URL = REDIS_URL
