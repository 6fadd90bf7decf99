"""ctxweb's web server: ``python -m ctxweb.server`` (what ``make run`` and ``manage.py runserver``
start too) serves :mod:`ctxweb.asgi` with uvicorn, unpatched.

Why uvicorn (issue 33, docs/deploy.md): it applies backpressure natively (a response's ``send``
waits while the client's socket buffer is full, so an answer to a client that does not read is
never held in memory), it hands a request body to the application as it arrives, it sets
``TCP_NODELAY``, and Channels runs on it. Measured on this machine, same application and database:
``GET /api/v1/health`` in 0.57 ms under uvicorn (uvloop, httptools) against 0.85-1.1 ms under
daphne, which ctxweb had to patch in five places to bound.

What no request can change: the root path comes from ``CTXWEB_ROOT_PATH`` only (daphne took it
from any client's ``Daphne-Root-Path`` header), and uvicorn's own reading of ``X-Forwarded-*`` is
off: the client address is read by :mod:`ctxweb.addresses` from the configured number of proxies
(``CTXWEB_PROXY_COUNT``), the scheme by Django's ``SECURE_PROXY_SSL_HEADER`` (``CTXWEB_HTTPS``).

The listening socket is bound here (``--port 0`` picks a free one), and the line
``ctxweb: listening on http://HOST:PORT`` says where, before the first request is taken.
"""

from __future__ import annotations

import argparse
import contextlib
import logging.config
import os
import socket
import sys
from collections.abc import Sequence
from typing import Any

APPLICATION = "ctxweb.asgi:application"
#: The largest WebSocket message a page may send (the pages send small JSON commands).
WS_MAX_BYTES = 1024 * 1024


def options(*, reload: bool = False) -> dict[str, Any]:
    """uvicorn's settings for ctxweb (shared by every way of starting it)."""
    from django.conf import settings

    return {
        "loop": "uvloop",
        "http": "httptools",
        "ws": "websockets-sansio",
        "ws_max_size": WS_MAX_BYTES,
        "lifespan": "on",  # the proxy's upstream clients close as the server stops
        # Forwarded headers are read by ctxweb from configured proxies only (ctxweb.addresses).
        "proxy_headers": False,
        "root_path": settings.CTXWEB_ROOT_PATH,
        "server_header": False,
        "timeout_keep_alive": settings.CTXWEB_KEEP_ALIVE_SECONDS,
        "timeout_graceful_shutdown": settings.CTXWEB_SHUTDOWN_SECONDS,
        "backlog": 2048,
        "access_log": True,
        # Django's LOGGING configures every logger, uvicorn's among them (one format, one place).
        "log_config": None,
        "reload": reload,
    }


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host``:``port`` (0: a free port), shared by the workers."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.set_inheritable(True)
    return sock


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m ctxweb.server", description=__doc__)
    parser.add_argument("--host", default=os.environ.get("CTXWEB_HOST", "127.0.0.1"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
    parser.add_argument(
        "--workers",
        type=int,
        default=int(os.environ.get("CTXWEB_WEB_WORKERS", "1")),
        help="web processes sharing the socket (the production shape; the embedded shape runs one)",
    )
    parser.add_argument(
        "--reload", action="store_true", help="restart when the code changes (make run)"
    )
    parser.add_argument("--app", default=APPLICATION, help=argparse.SUPPRESS)  # benchmarks
    args = parser.parse_args(argv)
    serve(args.host, args.port, workers=args.workers, reload=args.reload, app=args.app)


def serve(
    host: str, port: int, *, workers: int = 1, reload: bool = False, app: str = APPLICATION
) -> None:
    import uvicorn

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ctxweb.settings")
    from ctxweb.datadir import prepare

    prepare()  # the data folder and the generated secret, before the settings are read
    from django.conf import settings

    logging.config.dictConfig(settings.LOGGING)
    config = options(reload=reload)
    if reload:
        # The reloader binds its own socket and restarts the server's process on each change.
        print(f"ctxweb: listening on http://{host}:{port}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            uvicorn.run(app, host=host, port=port, reload_dirs=_code_dirs(), **config)
        return
    sock = bind(host, port)
    bound = sock.getsockname()[1]
    print(f"ctxweb: listening on http://{host}:{bound}", flush=True)
    # The socket itself is handed over (uvicorn.run(fd=...) wraps a descriptor as a Unix
    # socket, and uvloop then never sets TCP_NODELAY on its connections: an answer's body
    # waited some 40 ms for the client's delayed ACK on every kept-alive request).
    server = uvicorn.Server(uvicorn.Config(app, workers=workers, **config))
    # uvicorn raises the signal it stopped on again once it has: Ctrl-C ends here, quietly
    with contextlib.suppress(KeyboardInterrupt):
        if workers > 1:
            from uvicorn.supervisors import Multiprocess

            Multiprocess(server.config, sockets=[sock]).run()
        else:
            server.run(sockets=[sock])


def _code_dirs() -> list[str]:
    from ctxweb.datadir import BASE_DIR

    base = str(BASE_DIR)
    return [os.path.join(base, name) for name in ("ctxweb", "compaction", "templates", "static")]


if __name__ == "__main__":
    main(sys.argv[1:])
