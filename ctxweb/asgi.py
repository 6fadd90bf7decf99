"""ASGI entry point, served by uvicorn (:mod:`ctxweb.server`): HTTP through Django, each request in
one thread of a fixed pool (:mod:`ctxweb.serving`), but for the recording proxy's calls (a plain
ASGI relay, :mod:`ctxweb.proxy.app`); WebSockets through Channels."""

import gc
import os

import django

from ctxweb.datadir import prepare

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ctxweb.settings")
prepare()  # the data folder and the generated secret, before the settings are read
django.setup(set_prefix=False)

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.conf import settings  # noqa: E402

from ctxweb.capturers import capture_elsewhere, capturers_running, capturers_start  # noqa: E402
from ctxweb.contexts.events import relay_from_started_processes  # noqa: E402
from ctxweb.contexts.services.preparing import preparers_start  # noqa: E402

# Calls a previous process relayed and did not get to queue are recorded now; in the embedded
# shape this process records, and sweeps periodically.
from ctxweb.contexts.services.recording import recordings_start  # noqa: E402
from ctxweb.live.routing import websocket_urlpatterns  # noqa: E402
from ctxweb.middleware import BodyLimitASGIMiddleware  # noqa: E402
from ctxweb.origins import OriginValidator  # noqa: E402
from ctxweb.proxy.app import ProxyApplication, lifespan  # noqa: E402
from ctxweb.serving import GC_THRESHOLDS, ThreadedDjangoApplication, tune_allocator  # noqa: E402

# Large freed blocks go back to the system (before this process's threads start allocating).
tune_allocator()
# The live events of the processes started below reach this process's WebSockets.
relay_from_started_processes()
recordings_start()
# Managed calls are prepared, and telemetry received, in processes of their own (never holding this
# one's interpreter lock).
preparers_start()
capturers_start()

if settings.CTXWEB_SCHEDULER and not settings.REDIS_URL:
    # The embedded shape has no Celery beat: retention runs in this process.
    from ctxweb.tasks import start_in_process_scheduler

    start_in_process_scheduler()

application = ProtocolTypeRouter(
    {
        "http": BodyLimitASGIMiddleware(
            ProxyApplication(
                ThreadedDjangoApplication(
                    elsewhere=capture_elsewhere if capturers_running() else None
                )
            )
        ),
        # Only from the pages' exact origins (CTXWEB_ALLOWED_ORIGINS).
        "websocket": OriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
        "lifespan": lifespan,
    }
)

# The cyclic garbage collector: what exists once the application is built (Django, the libraries,
# ctxweb's modules: most of the heap) is frozen out of its scans, and a full collection waits for
# 100 collections of the middle generation instead of 10. A web process keeps each session's
# parsed request and latest turn in memory, so its full collections grew with the sessions it
# serves and stopped every thread while they ran (bench/load.py, docs/benchmarks.md).
gc.freeze()
gc.set_threshold(*GC_THRESHOLDS)
