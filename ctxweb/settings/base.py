"""ctxweb's settings, driven by the environment, with a working default for everything.

With no environment set ctxweb runs embedded: SQLite and artifacts under ``./data``, the in-memory
channel layer and tasks executed in process. ``DATABASE_URL`` and ``REDIS_URL`` switch to the
production shape (PostgreSQL, channels-redis, Celery workers on the Redis broker).
"""

from __future__ import annotations

import json
import os

import dj_database_url
import django_stubs_ext
from django.core.exceptions import ImproperlyConfigured

from ctxweb.datadir import BASE_DIR, data_dir, secret_key
from ctxweb.origins import parse_origins
from ctxweb.ratelimit import parse_rate

# Lets classes like ModelAdmin[Project] be subscripted at run time, as the type stubs expect.
django_stubs_ext.monkeypatch()


def envbool(name: str, default: bool) -> bool:
    """Read a boolean from the environment: 1/true/yes/on are true, anything else false."""
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def envint(name: str, default: int) -> int:
    """Read an integer from the environment."""
    value = os.environ.get(name)
    return int(value) if value not in (None, "") else default


def envfloat(name: str, default: float) -> float:
    """Read a number from the environment."""
    value = os.environ.get(name)
    return float(value) if value not in (None, "") else default


def envlist(name: str, default: str) -> list[str]:
    """Read a comma-separated list from the environment."""
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


# The data folder (SQLite, artifacts, the generated secret) is created by ctxweb.datadir.prepare()
# where a process starts, never by reading these settings.
DATA_DIR = data_dir()
SECRET_KEY = secret_key(DATA_DIR)
DEBUG = envbool("DEBUG", False)
ALLOWED_HOSTS = envlist("ALLOWED_HOSTS", "127.0.0.1,localhost,[::1]")
# The pages' origins, exact (scheme://host[:port]): a WebSocket opens only from one of them
# (ctxweb.origins). By default those `make run` serves; behind a proxy, the public one(s), such as
# https://ctxweb.example.com.
CTXWEB_ALLOWED_ORIGINS = envlist(
    "CTXWEB_ALLOWED_ORIGINS",
    "http://127.0.0.1:{port},http://localhost:{port}".format(port=os.environ.get("PORT") or 8000),
)
parse_origins(CTXWEB_ALLOWED_ORIGINS)
# The reverse proxies in front of every web process (ctxweb.addresses): 0, clients connect
# directly and X-Forwarded-For is ignored; N, the client is X-Forwarded-For's N-th entry from the
# right (each proxy appends the address it saw; entries left of it are the client's own).
CTXWEB_PROXY_COUNT = envint("CTXWEB_PROXY_COUNT", 0)
CSRF_TRUSTED_ORIGINS = envlist("CSRF_TRUSTED_ORIGINS", "")

INSTALLED_APPS = [
    "ctxweb.web",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "channels",
    "axes",
    "ctxweb.accounts",
    "ctxweb.contexts",
    "ctxweb.front",
]

MIDDLEWARE = [
    "ctxweb.middleware.SecurityHeadersMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "ctxweb.middleware.BodySizeLimitMiddleware",
    "ctxweb.middleware.ContentEncodingMiddleware",
    "ctxweb.middleware.NulCharacterMiddleware",
    "ctxweb.middleware.ApiNotFoundMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "ctxweb.middleware.PageRateLimitMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, as django-axes asks: answers a locked-out login with its lockout page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "ctxweb.urls"
ASGI_APPLICATION = "ctxweb.asgi.application"
WSGI_APPLICATION = "ctxweb.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL") or f"sqlite:///{DATA_DIR / 'db.sqlite3'}",
        # Kept across requests by the served shape's fixed pool of request threads
        # (ctxweb.serving); a connection that died is replaced on its next use.
        conn_max_age=envint("CONN_MAX_AGE", 300),
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # Django's backend, with a health check of a kept connection that costs no round trip.
    DATABASES["default"]["ENGINE"] = "ctxweb.postgresql"
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Django's backend, its writers taking turns through a lock the kernel hands on.
    DATABASES["default"]["ENGINE"] = "ctxweb.sqlite"
    # WAL lets the dashboard read while a turn is being written; the timeout waits out writers.
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 20,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
    }
# SQLite's writers (transactions) take turns through a lock that hands on at once, a process at
# a time (ctxweb/sqlite/base.py); off, they wait on SQLite's busy handler alone.
CTXWEB_SQLITE_WRITER_LOCK = envbool("CTXWEB_SQLITE_WRITER_LOCK", True)
# How long a capturer's write transaction lets those of the other processes (recording, the
# web process) go first, at most; 0 (the default): it queues with them.
CTXWEB_SQLITE_YIELD_MS = envint("CTXWEB_SQLITE_YIELD_MS", 0)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# Password guessing (django-axes, ctxweb.accounts.lockout): after CTXWEB_LOGIN_FAILURE_LIMIT wrong
# passwords for one username from one client address, that username is refused from that address
# for CTXWEB_LOGIN_LOCKOUT_MINUTES without checking the password (429 and a page saying so); from
# another address it logs in: a stranger cannot lock the owner out. After
# CTXWEB_LOGIN_ADDRESS_FAILURE_LIMIT wrong passwords from one address, whatever the usernames,
# every login from it is refused so (a spray of usernames). An admin lifts a lockout by deleting
# its "access attempt" in the admin, or with `manage.py axes_reset`.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = envint("CTXWEB_LOGIN_FAILURE_LIMIT", 10)
CTXWEB_LOGIN_ADDRESS_FAILURE_LIMIT = envint(
    "CTXWEB_LOGIN_ADDRESS_FAILURE_LIMIT", 3 * AXES_FAILURE_LIMIT
)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_HANDLER = "ctxweb.accounts.lockout.LoginLockoutHandler"
AXES_COOLOFF_TIME = envfloat("CTXWEB_LOGIN_LOCKOUT_MINUTES", 15.0) / 60
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_HTTP_RESPONSE_CODE = 429
# The client address: the connection's, or X-Forwarded-For's as CTXWEB_PROXY_COUNT says.
AXES_CLIENT_IP_CALLABLE = "ctxweb.addresses.client_address"
AXES_USERNAME_CALLABLE = "ctxweb.middleware.login_username"
# Failed attempts are kept (lockouts); successful logins are not logged.
AXES_DISABLE_ACCESS_LOG = True
AXES_VERBOSE = False
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = DATA_DIR / "staticfiles"
STORAGES = {
    "default": {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": DATA_DIR / "artifacts"},
    },
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
# Serve static files straight from the finders: no collectstatic step before `make run`.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

# Live updates and background work. Unset REDIS_URL: everything runs inside the one process.
REDIS_URL = os.environ.get("REDIS_URL", "")
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL]},
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

# The cache holds the API's rate-limit counters: shared through Redis when there is one.
CACHES = {
    "default": (
        {
            # Django's, with one Redis client per process (ctxweb.cache)
            "BACKEND": "ctxweb.cache.RedisCache",
            "LOCATION": REDIS_URL,
            # A hung Redis must not hang every API request (the throttle then lets it through).
            "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1},
        }
        if REDIS_URL
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    )
    | {"KEY_PREFIX": "ctxweb"}
}

CELERY_BROKER_URL = REDIS_URL or "memory://"
CELERY_RESULT_BACKEND = None
CELERY_TASK_ALWAYS_EAGER = not REDIS_URL
# Embedded shape: operations run in a background thread after commit, so the request returns at
# once and progress streams live. Tests set this to run them synchronously on commit instead.
CTXWEB_TASKS_INLINE = envbool("CTXWEB_TASKS_INLINE", False)
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_TIME_LIMIT = envint("CTXWEB_OPERATION_TIME_LIMIT", 600)
CELERY_TASK_SOFT_TIME_LIMIT = CELERY_TASK_TIME_LIMIT - 30

# Retention (each project's retention_days) is enforced this often: by Celery beat in production
# (`make beat`), by a thread of the web process in the embedded shape (CTXWEB_SCHEDULER=1, which
# `make run` sets).
CTXWEB_RETENTION_SECONDS = envint("CTXWEB_RETENTION_SECONDS", 3600)
# A failed import's uploaded file (raw: secrets unmasked) is deleted by retention this many hours
# after it failed (at once when one of the sessions it holds is deleted); an import queued or
# running for longer is failed and its file deleted too. docs/security.md lists what is kept.
CTXWEB_FAILED_IMPORT_HOURS = envint("CTXWEB_FAILED_IMPORT_HOURS", 24)
CTXWEB_SCHEDULER = envbool("CTXWEB_SCHEDULER", False)
CELERY_BEAT_SCHEDULE = {
    # Calls left by a crash are recorded, and lanes whose task was lost drained.
    "recordings-sweep": {
        "task": "ctxweb.tasks.recordings_sweep",
        "schedule": envint("CTXWEB_RECORDING_SWEEP_SECONDS", 30),
    },
    "retention": {"task": "ctxweb.tasks.sessions_expire", "schedule": CTXWEB_RETENTION_SECONDS},
    "reap-operations": {
        "task": "ctxweb.contexts.tasks.operation_reap_stale",
        "schedule": max(60, CTXWEB_RETENTION_SECONDS // 12),
    },
}

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "ctxweb.api.authentication.ApiKeyAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "ctxweb.api.errors.exception_handler",
    # JSON everywhere; the import endpoint alone takes a multipart upload.
    "DEFAULT_PARSER_CLASSES": ["ctxweb.api.parsers.JsonBodyParser"],
    "DEFAULT_THROTTLE_CLASSES": [
        "ctxweb.api.throttling.ApiRateThrottle",
        "ctxweb.api.throttling.CostlyRateThrottle",
    ],
    "DEFAULT_PAGINATION_CLASS": "ctxweb.api.pagination.StrictLimitOffsetPagination",
    # JSON is the API's one representation: no browsable HTML pages of it (a browser's
    # "*/*" gets JSON; a client accepting only something else, a 406). The export and the
    # artifacts add their own renderers.
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "ctxweb.api.negotiation.ContentNegotiation",
    # ?format= is the export's parameter, not DRF's renderer override (JSON is the one renderer).
    "URL_FORMAT_OVERRIDE": None,
    "PAGE_SIZE": 50,
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "ctxweb API",
    "DESCRIPTION": "Ingest what agents send their model; inspect, preview and apply compaction.",
    "VERSION": "1.0.0",
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "SERVE_INCLUDE_SCHEMA": False,
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "ctxweb.api.schema.document_errors",
        "ctxweb.api.schema.add_links",
    ],
    # PATCH bodies keep their required fields (a policy PATCH needs its policy).
    "COMPONENT_SPLIT_PATCH": False,
    "ENUM_NAME_OVERRIDES": {
        "MessageFormatEnum": "compaction.messages.FORMATS",
        "ImportFormatEnum": "ctxweb.api.imports.FORMAT_CHOICES",
    },
}

# Rate limits per API key (or per dashboard user): every request, and the costly ones (previews,
# operations, imports) again. "N/s", "N/min", "N/hour" or "N/day"; empty turns a limit off.
CTXWEB_RATE_LIMIT = os.environ.get("CTXWEB_RATE_LIMIT", "1200/min")
CTXWEB_RATE_LIMIT_COSTLY = os.environ.get("CTXWEB_RATE_LIMIT_COSTLY", "120/min")
# A value that is no rate stops the process here, naming it (not every request later).
parse_rate(CTXWEB_RATE_LIMIT)
parse_rate(CTXWEB_RATE_LIMIT_COSTLY)

# Previews plan over a whole context inside the web process: at most CTXWEB_PREVIEW_WORKERS at
# once per process, each stopped after CTXWEB_PREVIEW_SECONDS (the API answers 422, or 503 when
# every slot stayed busy); applying a strategy runs on a worker with no such limit.
CTXWEB_PREVIEW_WORKERS = envint("CTXWEB_PREVIEW_WORKERS", 2)
CTXWEB_PREVIEW_SECONDS = envfloat("CTXWEB_PREVIEW_SECONDS", 20.0)

# Model list prices (USD per million input tokens) for the prompt-cache costs every preview shows,
# over the table in compaction.cache: JSON by model-name prefix, e.g.
# {"my-model": {"input": 1.0, "cache_write": 1.25, "cache_read": 0.1}}. Python settings may set
# CTXWEB_MODEL_PRICES directly.
CTXWEB_MODEL_PRICES = json.loads(os.environ.get("CTXWEB_MODEL_PRICES") or "{}")

# Transcript uploads up to this size import within the request (201); larger ones become a
# background job (202, on a Celery worker or a thread of the embedded server).
CTXWEB_IMPORT_INLINE_BYTES = envint("CTXWEB_IMPORT_INLINE_BYTES", 1024 * 1024)

# PostgreSQL: 0 lets an ingest's commit return before the disk flush (SET LOCAL
# synchronous_commit TO OFF): faster ingest, but a database crash can lose the last fraction of a
# second of acknowledged turns (whole turns, never part of one). Durable by default.
CTXWEB_INGEST_SYNCHRONOUS_COMMIT = envbool("CTXWEB_INGEST_SYNCHRONOUS_COMMIT", True)

# The web server (ctxweb.server, uvicorn): the path ctxweb is served under behind a proxy that
# does not strip it ("" at the root; never taken from a request), how long an idle keep-alive
# connection stays open, and how long a stopping server waits for its requests to end.
CTXWEB_ROOT_PATH = os.environ.get("CTXWEB_ROOT_PATH", "").rstrip("/")
CTXWEB_KEEP_ALIVE_SECONDS = envint("CTXWEB_KEEP_ALIVE_SECONDS", 5)
CTXWEB_SHUTDOWN_SECONDS = envint("CTXWEB_SHUTDOWN_SECONDS", 30)
# A response whose client reads nothing for this long is abandoned (its connection closed), so
# that it holds no thread or upstream connection longer: exports, artifacts, proxied answers.
CTXWEB_SEND_TIMEOUT = envfloat("CTXWEB_SEND_TIMEOUT", 60.0)
# A session's whole turn list (GET .../turns without ?limit=) is read and sent this many turns at
# a time (about 6 KB of memory a turn while it is written).
CTXWEB_TURN_LIST_PAGE = max(1, envint("CTXWEB_TURN_LIST_PAGE", 500))

# Request size: a turn carries a whole context; 32 MB by default, 413 above it.
#: Threads serving Django's HTTP requests in each server process (ctxweb.serving): as many
#: requests run at once, each thread keeps its database connection.
CTXWEB_HTTP_THREADS = envint("CTXWEB_HTTP_THREADS", 16)
#: Threads of the telemetry receivers (OTLP, Langfuse), apart: a flood of exports never queues
#: in front of a page; and threads producing streaming responses (exports, artifacts) as their
#: clients take them.
CTXWEB_CAPTURE_THREADS = envint("CTXWEB_CAPTURE_THREADS", 4)
#: The telemetry receivers run in this many processes of each web process's own (ctxweb.capturers:
#: never holding its interpreter lock), CTXWEB_CAPTURE_THREADS requests at once each (0: on the
#: web process's threads). A request a capturer has not answered within CTXWEB_CAPTURE_SECONDS
#: (or that it died with) is answered 503, Retry-After 1.
CTXWEB_CAPTURE_PROCESSES = envint("CTXWEB_CAPTURE_PROCESSES", 1)
CTXWEB_CAPTURE_SECONDS = envfloat("CTXWEB_CAPTURE_SECONDS", 120.0)
CTXWEB_STREAM_THREADS = envint("CTXWEB_STREAM_THREADS", 16)
CTXWEB_MAX_REQUEST_BYTES = envint("CTXWEB_MAX_REQUEST_BYTES", 32 * 1024 * 1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = CTXWEB_MAX_REQUEST_BYTES
FILE_UPLOAD_MAX_MEMORY_SIZE = 8 * 1024 * 1024

# The recording proxy relays to these, and only these (never a host named by a request).
CTXWEB_UPSTREAM_OPENAI = os.environ.get("CTXWEB_UPSTREAM_OPENAI", "https://api.openai.com/v1")
CTXWEB_UPSTREAM_ANTHROPIC = os.environ.get(
    "CTXWEB_UPSTREAM_ANTHROPIC", "https://api.anthropic.com/v1"
)
# Seconds a relayed call may take (a long generation streams for minutes).
CTXWEB_PROXY_TIMEOUT = envfloat("CTXWEB_PROXY_TIMEOUT", 600.0)
# Receivers' bounds (docs/deploy.md, "Limits"): what one OTLP export or Langfuse batch may hold,
# checked before anything is built from it. Over a bound: the spans past it are rejected and named
# in partial_success (OTLP), or the batch is refused with 413 (Langfuse).
# Spans read per OTLP export (the SDK exports 512 at a time, the collector's batch processor 8,192).
CTXWEB_OTLP_MAX_SPANS = envint("CTXWEB_OTLP_MAX_SPANS", 10_000)
# Attributes, events, links and array or kvlist entries read per export (resources, scopes and
# spans count one each): about what 32 MiB of real attributes hold.
CTXWEB_OTLP_MAX_VALUES = envint("CTXWEB_OTLP_MAX_VALUES", 1_000_000)
# Per span (and per resource, scope, event or link): a GenAI span with legacy indexed attributes
# carries a few per message of its conversation; the SDK's own default is 128 of each.
CTXWEB_OTLP_MAX_SPAN_ATTRIBUTES = envint("CTXWEB_OTLP_MAX_SPAN_ATTRIBUTES", 100_000)
CTXWEB_OTLP_MAX_SPAN_EVENTS = envint("CTXWEB_OTLP_MAX_SPAN_EVENTS", 10_000)
# arrayValue / kvlistValue nesting in one attribute's value.
CTXWEB_OTLP_MAX_DEPTH = envint("CTXWEB_OTLP_MAX_DEPTH", 32)
# One Langfuse ingestion batch: Langfuse's own server takes at most 4.5 MB (its SDKs send 2.5 MB
# batches of flush_at events, 15 by default).
CTXWEB_LANGFUSE_MAX_BATCH_BYTES = envint("CTXWEB_LANGFUSE_MAX_BATCH_BYTES", 4_718_592)
CTXWEB_LANGFUSE_MAX_BATCH_EVENTS = envint("CTXWEB_LANGFUSE_MAX_BATCH_EVENTS", 1_000)

# The proxy under load (docs/deploy.md, "Limits"): an upstream answer past
# CTXWEB_PROXY_MAX_ANSWER_BYTES or CTXWEB_PROXY_MAX_ANSWER_SECONDS is stopped with an error to its
# caller; a key has at most CTXWEB_PROXY_KEY_CONCURRENCY calls in flight per web process (429 in
# the provider's shape past it). Key checks and managed mode's preparation run on threads of their
# own (never behind another caller's work); a key prepares at most CTXWEB_PROXY_KEY_PREPARING
# managed calls at once.
CTXWEB_PROXY_MAX_ANSWER_BYTES = envint("CTXWEB_PROXY_MAX_ANSWER_BYTES", 64 * 1024 * 1024)
CTXWEB_PROXY_MAX_ANSWER_SECONDS = envint("CTXWEB_PROXY_MAX_ANSWER_SECONDS", 1800)
CTXWEB_PROXY_KEY_CONCURRENCY = envint("CTXWEB_PROXY_KEY_CONCURRENCY", 32)
# The request bytes a key may send through the proxy, in MB (MiB) a minute, counted continuously
# (a budget that refills): over it, 429 in the provider's shape with Retry-After. Off (0) by
# default: agents whose long contexts the provider caches send hundreds of MB a minute legitimately.
CTXWEB_PROXY_KEY_MB_PER_MINUTE = envint("CTXWEB_PROXY_KEY_MB_PER_MINUTE", 0)
if CTXWEB_PROXY_KEY_MB_PER_MINUTE < 0:
    raise ImproperlyConfigured(
        f"CTXWEB_PROXY_KEY_MB_PER_MINUTE={CTXWEB_PROXY_KEY_MB_PER_MINUTE}: write the MB a key may"
        " send a minute, or 0 for no limit."
    )
CTXWEB_PROXY_KEY_THREADS = envint("CTXWEB_PROXY_KEY_THREADS", 4)
CTXWEB_PROXY_PREPARE_THREADS = envint("CTXWEB_PROXY_PREPARE_THREADS", 8)
CTXWEB_PROXY_KEY_PREPARING = envint("CTXWEB_PROXY_KEY_PREPARING", 2)
CTXWEB_PROXY_PREPARE_BYTES = envint("CTXWEB_PROXY_PREPARE_BYTES", 32 * 1024 * 1024)
# Managed mode's preparation (reading the whole request, maybe rewriting it) runs in
# CTXWEB_PROXY_PREPARERS processes each web process starts and watches, never holding the web
# process's interpreter lock (0: on CTXWEB_PROXY_PREPARE_THREADS threads of the web process, as
# the test suite's in-process calls do); each serves CTXWEB_PROXY_PREPARE_THREADS calls at once,
# and a project's calls always go to the same one. A call whose preparer has not answered within
# CTXWEB_PROXY_PREPARE_SECONDS (busy, starting again) goes to the provider unchanged, with a
# warning on its turn.
CTXWEB_PROXY_PREPARERS = envint("CTXWEB_PROXY_PREPARERS", 1)
CTXWEB_PROXY_PREPARE_SECONDS = envfloat("CTXWEB_PROXY_PREPARE_SECONDS", 15.0)
# Recording relayed calls (ctxweb.contexts.services.recording): the raw exchange is spooled to
# CTXWEB_DATA_DIR/recordings and recorded by Celery workers when there is a broker, else by
# CTXWEB_RECORDING_WORKERS threads of the web process. The queue holds at most
# CTXWEB_RECORDING_QUEUE_BYTES (CTXWEB_RECORDING_PROJECT_BYTES per project); a call past it is
# kept as an unread call saying so. A recorder holds a call for CTXWEB_RECORDING_LEASE seconds
# before another may take it up; a call that fails CTXWEB_RECORDING_ATTEMPTS times is kept
# unread with its error.
# Who records: "celery" (the production shape's workers), "process" (CTXWEB_RECORDING_WORKERS
# recorder processes the web process starts and watches: the embedded shape; they work beside
# the web process, on the other core, never taking the event loop's turn) or "threads"
# (CTXWEB_RECORDING_WORKERS threads of the web process, with no sweep after a crash: the test
# suite, whose database lives in its memory).
CTXWEB_RECORDER = os.environ.get("CTXWEB_RECORDER") or ("celery" if REDIS_URL else "process")
if CTXWEB_RECORDER not in ("celery", "process", "threads"):
    raise ImproperlyConfigured(
        f"CTXWEB_RECORDER={CTXWEB_RECORDER!r}: choose celery, process or threads."
    )
CTXWEB_RECORDING_CELERY = CTXWEB_RECORDER == "celery"
# Two recorder processes or threads: with two or more processes, the first records small calls
# only, so that a call of at least CTXWEB_RECORDING_BIG_BYTES (request and answer), seconds to
# record, never holds back the others' lanes.
CTXWEB_RECORDING_WORKERS = envint("CTXWEB_RECORDING_WORKERS", 2)
CTXWEB_RECORDING_BIG_BYTES = envint("CTXWEB_RECORDING_BIG_BYTES", 1024**2)
# Recorder processes and Celery workers' processes lower their CPU priority by this (os.nice):
# recording is background work; callers and health checks go first when the cores are busy.
CTXWEB_BACKGROUND_NICE = envint("CTXWEB_BACKGROUND_NICE", 10)
CTXWEB_RECORDING_QUEUE_BYTES = envint("CTXWEB_RECORDING_QUEUE_BYTES", 4 * 1024**3)
CTXWEB_RECORDING_PROJECT_BYTES = envint("CTXWEB_RECORDING_PROJECT_BYTES", 1024**3)
# Per lane (the session a call names, else its key): a session's burst cannot fill its project's.
CTXWEB_RECORDING_LANE_BYTES = envint("CTXWEB_RECORDING_LANE_BYTES", 256 * 1024**2)
CTXWEB_RECORDING_LEASE = envint("CTXWEB_RECORDING_LEASE", 300)
CTXWEB_RECORDING_ATTEMPTS = envint("CTXWEB_RECORDING_ATTEMPTS", 3)
CTXWEB_RECORDING_SWEEP_SECONDS = envint("CTXWEB_RECORDING_SWEEP_SECONDS", 30)

# Relayed calls ctxweb could not read are kept raw (shown on their session and through the API):
# at most this many per project, the oldest dropped first; each body up to CTXWEB_MAX_REQUEST_BYTES.
CTXWEB_UNREAD_CALLS_PER_PROJECT = envint("CTXWEB_UNREAD_CALLS_PER_PROJECT", 1000)

# Replays (ctxweb.contexts.services.replays): a session keeps its newest CTXWEB_REPLAYS_KEPT (older
# finished ones are deleted when one is created); a project runs at most
# CTXWEB_REPLAYS_ACTIVE_PER_PROJECT at once (the next is refused: 429 through the API). A session of
# more than CTXWEB_REPLAY_MAX_TURNS turns is not replayed (a 400 through the API, naming its count).
CTXWEB_REPLAYS_KEPT = envint("CTXWEB_REPLAYS_KEPT", 20)
CTXWEB_REPLAYS_ACTIVE_PER_PROJECT = envint("CTXWEB_REPLAYS_ACTIVE_PER_PROJECT", 2)
CTXWEB_REPLAY_MAX_TURNS = envint("CTXWEB_REPLAY_MAX_TURNS", 5000)

CTXWEB_LLM_PROVIDER = os.environ.get("CTXWEB_LLM_PROVIDER", "")
CTXWEB_LLM_BASE_URL = os.environ.get("CTXWEB_LLM_BASE_URL", "")
CTXWEB_LLM_MODEL = os.environ.get("CTXWEB_LLM_MODEL", "")
CTXWEB_LLM_API_KEY = os.environ.get("CTXWEB_LLM_API_KEY", "")

# Security headers on every response; ctxweb.middleware adds the Content-Security-Policy.
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"
# CTXWEB_HTTPS=1: served over HTTPS (directly or behind a proxy that sets X-Forwarded-Proto).
# Cookies are then secure-only, plain HTTP redirects to HTTPS (but the health check, which load
# balancers call over HTTP) and browsers are told to use HTTPS only (HSTS).
CTXWEB_HTTPS = envbool("CTXWEB_HTTPS", False)
if CTXWEB_HTTPS:
    SECURE_SSL_REDIRECT = True
    SECURE_REDIRECT_EXEMPT = [r"^api/v1/health$"]
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = envint("SECURE_HSTS_SECONDS", 31536000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = envbool("SECURE_HSTS_INCLUDE_SUBDOMAINS", True)
    SECURE_HSTS_PRELOAD = envbool("SECURE_HSTS_PRELOAD", True)
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {
        # Django's own configuration gives "django" a console handler of its own (with DEBUG
        # on) and lets it propagate to the root's: under `make run` every line of the server
        # (daphne's "django.channels.server", the autoreloader) was printed twice. The root's
        # handler alone prints them, once.
        "django": {"handlers": [], "level": "INFO", "propagate": True},
        "django.db.backends": {"level": "INFO"},
        # httpx logs every relayed request at INFO: the proxy's own access log says it once.
        "httpx": {"level": "WARNING"},
    },
}
