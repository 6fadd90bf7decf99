"""The telemetry receivers in processes of their own, the *capturers*, so that the web process's
interpreter lock is never held by them (issue 33).

OTLP's ``/v1/traces`` and Langfuse's ``/api/public/...`` take whatever exporters send, back to
back: decoding an export, reading its spans and storing its turns is Python from end to end. On
threads of the web process (``CTXWEB_CAPTURE_THREADS`` of their own, :mod:`ctxweb.serving`) that
work held the interpreter lock which the event loop needs to relay every proxied call and answer
the health check: four exporters posting back to back doubled the relayed calls' p99 latency and
the health check's. Each web process starts ``CTXWEB_CAPTURE_PROCESSES`` capturers
(``manage.py receive_telemetry``) and watches them, as it does its preparers
(:mod:`~ctxweb.contexts.services.preparing`, whose sockets and frames these share): a capturer
that dies is started again, and ends when its web process has ended.

- **The request as Django would have it**: the web process reads the request (the body cap in
  front of it applies as before) and sends its WSGI environ and body to a capturer, one
  connection and one frame each way; the capturer runs it through Django's WSGI handler, the
  same middleware, authentication, rate limits and views as before, and sends back the status,
  headers and body. The work the view leaves for after its answer runs in the capturer once the
  answer is sent. Its live events reach the web process's pages
  (:mod:`~ctxweb.contexts.events_relay`).
- **Bounded**: a capturer serves ``CTXWEB_CAPTURE_THREADS`` requests at once; more wait in its
  socket's backlog, as they waited for a thread before. A request that has no answer within
  ``CTXWEB_CAPTURE_SECONDS``, or whose capturer died while it had it, is answered 503 with
  ``Retry-After`` (exporters send it again); nothing was stored by halves (a view's writes are
  one transaction).
- The exporters' requests go to capturers by their client's address, so that one exporter's
  requests keep their order.

``CTXWEB_CAPTURE_PROCESSES=0`` serves them on the web process's threads (the test suite's
in-process requests).
"""

from __future__ import annotations

import io
import json
import logging
import os
import socket
import sys
import threading
import time
import zlib
from typing import Any

from django.conf import settings
from django.db import close_old_connections

from ctxweb.afterwards import run_all
from ctxweb.contexts.services.preparing import (
    Preparer,
    PreparerFailed,
    end_with,
    frame_received,
    frame_send,
    helpers_start,
    preparer_serve,
)
from ctxweb.serving import FinishingHandler, Headers, finish, respond

logger = logging.getLogger(__name__)

#: The start of the name of a web process's folder of capturers' sockets.
FOLDER_PREFIX = "ctxweb-capturers-"
#: The answer to a request no capturer answered.
UNAVAILABLE = json.dumps(
    {"code": 14, "message": "ctxweb: the telemetry receiver is busy or restarting; send it again"}
).encode()

_CAPTURERS: list[Preparer] = []


# --- in the web process -------------------------------------------------------------------------


def capturers_start() -> None:
    """At a web process's start: start ``CTXWEB_CAPTURE_PROCESSES`` capturers and watch them;
    nothing with none (the receivers then run on this process's threads)."""
    helpers_start(
        _CAPTURERS,
        FOLDER_PREFIX,
        settings.CTXWEB_CAPTURE_PROCESSES,
        "receive_telemetry",
        "capture: capturer",
    )


def capturers_running() -> bool:
    """Whether this process's telemetry requests go to capturers (:func:`capturers_start`)."""
    return bool(_CAPTURERS)


def capture_elsewhere(environ: dict[str, Any]) -> tuple[int, Headers, bytes]:
    """The request of ``environ`` (its body in ``wsgi.input``) answered by a capturer: status,
    headers and body; 503 when none answered within ``CTXWEB_CAPTURE_SECONDS`` (on a thread:
    its waits and copies take no lock)."""
    seconds = settings.CTXWEB_CAPTURE_SECONDS
    deadline = time.monotonic() + seconds
    sent = {name: value for name, value in environ.items() if isinstance(value, str)}
    body = environ["wsgi.input"].read()
    client = str(environ.get("REMOTE_ADDR", "")).encode()
    capturer = _CAPTURERS[zlib.crc32(client) % len(_CAPTURERS)]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(seconds)
            sock.connect(capturer.path)
            frame_send(sock, sent, body)
            del body
            sock.settimeout(max(0.001, deadline - time.monotonic()))
            answer, content = frame_received(sock)
        status = int(answer["status"])
        headers = [
            (str(n).encode("latin-1"), str(v).encode("latin-1")) for n, v in answer["headers"]
        ]
        return status, headers, content
    except TimeoutError:  # first: an OSError too
        why = f"no answer within CTXWEB_CAPTURE_SECONDS ({seconds:g}s)"
    except (OSError, ValueError, KeyError, TypeError, PreparerFailed) as failure:
        why = f"the capturer failed ({failure!r})"
    logger.warning(
        "capture: %s %s answered 503: %s", environ["REQUEST_METHOD"], environ["PATH_INFO"], why
    )
    return (
        503,
        [(b"content-type", b"application/json"), (b"retry-after", b"1")],
        UNAVAILABLE,
    )


# --- in the capturer ----------------------------------------------------------------------------

_HANDLER: list[FinishingHandler] = []


def _answer(conn: socket.socket) -> None:
    """Answer the request that comes on ``conn`` through Django, then do what it left for after
    its answer."""
    later = None
    with conn:
        conn.settimeout(settings.CTXWEB_CAPTURE_SECONDS)
        try:
            sent, body = frame_received(conn)
        except (OSError, ValueError, PreparerFailed):
            return
        environ: dict[str, Any] = dict(sent)
        environ.update(
            {
                "wsgi.version": (1, 0),
                "wsgi.input": io.BytesIO(body),
                "wsgi.errors": sys.stderr,
                "wsgi.multithread": True,
                "wsgi.multiprocess": True,
                "wsgi.run_once": False,
            }
        )
        del body
        try:
            status, headers, content, later = respond(_HANDLER[0], environ)
            if not isinstance(content, bytes):  # no receiver streams; joined if one did
                streamed = content
                try:
                    content = b"".join(bytes(chunk) for chunk in streamed)
                finally:
                    finish(streamed)
            answer = {
                "status": status,
                "headers": [[n.decode("latin-1"), v.decode("latin-1")] for n, v in headers],
            }
            frame_send(conn, answer, content)
        except OSError:  # the web process stopped waiting
            pass
        except Exception:
            logger.exception("capture: a request could not be answered")
        finally:
            close_old_connections()
    if later:
        run_all(later)


def capturer_loop(*, parent: int, fd: int) -> None:
    """The capturer process (``manage.py receive_telemetry``): answer the requests that come on
    the listening socket ``fd`` (the web process's), until the web process ``parent`` has ended."""
    from ctxweb.serving import tune_allocator

    tune_allocator()
    _HANDLER.append(FinishingHandler())
    listener = socket.socket(fileno=fd)
    listener.setblocking(True)
    threading.Thread(target=end_with, args=(parent,), name="ctxweb-parent", daemon=True).start()
    logger.info("capture: capturer ready (pid %d)", os.getpid())
    preparer_serve(
        listener,
        threads=settings.CTXWEB_CAPTURE_THREADS,
        answer=_answer,
        name="ctxweb-capturer",
    )


__all__ = ["capture_elsewhere", "capturer_loop", "capturers_running", "capturers_start"]
