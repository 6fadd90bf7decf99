"""Managed mode's preparation in processes of its own, the *preparers*, so that the web process's
interpreter lock is never held by it.

Preparing a managed call (:func:`~ctxweb.contexts.services.proxying.proxy_prepare`) reads the
whole body: a 24 MB call's ``json.loads`` alone takes 98 ms, and its parsing, hashing and rewrite
as much again. On a thread of the web process all of it held the interpreter lock that the event
loop needs to relay every other call and answer the health check. Each web process starts
``CTXWEB_PROXY_PREPARERS`` preparers (``manage.py prepare_calls``) and watches them
(:func:`preparers_start`): a preparer that dies is started again, and a preparer ends when its
web process has ended.

- **One owner per project**: a preparer keeps the managed rewrites of the sessions it prepared
  (:mod:`~ctxweb.contexts.services._rewrites`), which a session's later calls need; a project's
  calls always go to the same preparer (by project id), so they find them. The other memories
  of the proxy (conversations, the look of main calls) are rows, shared by every process. A
  preparer started again remembers no rewrite, as a web process started again.
- **Bytes, not objects**: the web process listens on a Unix socket per preparer in a folder of
  its own (its user's alone) and hands the listening socket to the preparer it starts, so a call
  made while the preparer starts again waits in the socket's backlog. A call is one connection
  and a frame each way (:func:`frame_send`): the sizes and a JSON header on the socket, the
  body as a file in memory whose descriptor goes along (one write and one read for tens of
  megabytes, on a thread of the web process that holds the interpreter lock only between them).
  The answer's body is sent only when the call was rewritten.
- **Bounded**: a call waits at most ``CTXWEB_PROXY_PREPARE_SECONDS`` for its preparer (busy,
  starting again, or stopped), and goes to the provider unchanged, with a warning event on its
  turn, when it has no answer by then or the preparer failed: as a call whose request cannot be
  read. A preparer serves ``CTXWEB_PROXY_PREPARE_THREADS`` calls at once; the web process
  still admits them (``CTXWEB_PROXY_KEY_PREPARING`` per key, ``CTXWEB_PROXY_PREPARE_BYTES`` in
  all, :mod:`ctxweb.proxy.relay`).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import functools
import json
import logging
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import close_old_connections

from ctxweb.accounts.models import Project
from ctxweb.contexts.services.proxying import Prepared, proxy_prepare

logger = logging.getLogger(__name__)

#: What starts a frame: the length of its JSON header, then of its body.
FRAME = struct.Struct("!IQ")
#: The longest header a frame may announce (a call's hashes are 64 characters a message): a
#: longer one is a broken exchange, never an allocation.
HEADER_MAX = 256 * 1024 * 1024
#: Connections waiting for a preparer to accept them (its threads busy, or starting again).
BACKLOG = 256
#: Seconds between a preparer's end and its start again.
RESTART_SECONDS = 0.5
#: How often a preparer looks whether its web process is still there.
PARENT_SECONDS = 0.5


class PreparerFailed(Exception):
    """A preparer's answer cannot be read: the connection ended early, or its frame is broken,
    or the preparer could not prepare the call."""


def _body_max() -> int:
    """The longest body a frame may announce: a request is at most ``CTXWEB_MAX_REQUEST_BYTES``,
    and its rewrite, a compacted start in place of the agent's, at most three times as long
    (written as ASCII JSON: a character of four bytes in UTF-8 is twelve escaped)."""
    return 4 * settings.CTXWEB_MAX_REQUEST_BYTES


def _sizes(start: bytes | bytearray) -> tuple[int, int]:
    header_size, body_size = FRAME.unpack(start)
    if header_size > HEADER_MAX or body_size > _body_max():
        raise PreparerFailed(f"a frame of {header_size} + {body_size} bytes")
    return header_size, body_size


def _memory_file(data: bytes) -> int:
    """A file in memory holding ``data`` (one write: the interpreter lock is released once for
    all of it); its descriptor, which the caller closes."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("ctxweb-call", os.MFD_CLOEXEC)
    else:  # not Linux: a temporary file, gone as soon as it is closed
        fd, path = tempfile.mkstemp(prefix="ctxweb-call-")
        os.unlink(path)
    try:
        view = memoryview(data)
        written = 0
        while written < len(data):
            written += os.write(fd, view[written:])
    except BaseException:
        os.close(fd)
        raise
    return fd


def _file_read(fd: int, size: int) -> bytes:
    data = os.pread(fd, size, 0)
    while len(data) < size:  # a read of a file in memory is whole; this is in case it is not
        more = os.pread(fd, size - len(data), len(data))
        if not more:
            raise PreparerFailed(f"a body of {len(data)} bytes of {size}")
        data += more
    return data


def _received(conn: socket.socket, size: int) -> bytearray:
    """Exactly ``size`` bytes from ``conn`` (blocking, within its timeout)."""
    buffer = bytearray(size)
    view = memoryview(buffer)
    got = 0
    while got < size:
        count = conn.recv_into(view[got:])
        if count == 0:
            raise PreparerFailed("the connection ended")
        got += count
    return buffer


def frame_send(conn: socket.socket, header: dict[str, Any], body: bytes) -> None:
    """A frame on ``conn``: its sizes, its header, and its body as a file in memory passed along
    with the sizes (``SCM_RIGHTS``): tens of megabytes cross in one write and one read, not
    hundreds of reads of a socket's buffer, each taking the interpreter lock again."""
    encoded = json.dumps(header).encode()
    start = FRAME.pack(len(encoded), len(body))
    if body:
        fd = _memory_file(body)
        try:
            sent = socket.send_fds(conn, [start], [fd])
        finally:
            os.close(fd)
        start = start[sent:]
    conn.sendall(start + encoded)


def frame_received(conn: socket.socket) -> tuple[dict[str, Any], bytes]:
    """The frame that comes on ``conn``: its header and its body."""
    start, fds, _, _ = socket.recv_fds(conn, FRAME.size, 1)
    try:
        if not start:
            raise PreparerFailed("the connection ended")
        header_size, body_size = _sizes(start + _received(conn, FRAME.size - len(start)))
        header = json.loads(_received(conn, header_size))
        if not body_size:
            return header, b""
        if not fds:
            raise PreparerFailed("a body without its file")
        return header, _file_read(fds[0], body_size)
    finally:
        for fd in fds:
            os.close(fd)


# --- in the preparer ----------------------------------------------------------------------------


def _caller_gone(conn: socket.socket) -> bool:
    """Whether the web process closed the connection (it stopped waiting: the call went on)."""
    timeout = conn.gettimeout()
    conn.setblocking(False)  # with a timeout, a read waits for data first
    try:
        return conn.recv(1, socket.MSG_PEEK) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True
    finally:
        conn.settimeout(timeout)


def _answer(conn: socket.socket) -> None:
    """Prepare the call that comes on ``conn`` and send back what to relay."""
    with conn:
        conn.settimeout(settings.CTXWEB_PROXY_PREPARE_SECONDS)
        try:
            call, body = frame_received(conn)
        except (OSError, ValueError, PreparerFailed):
            return
        if _caller_gone(conn):
            return
        answer: dict[str, Any]
        returned = b""
        try:
            prepared = proxy_prepare(
                project=Project.objects.get(pk=call["project_id"]),
                key_id=call["key_id"],
                format=call["format"],
                body=body,
                session=call["session"],
                managed=call["managed"],
            )
            answer = {
                "session": prepared.session,
                "original": list(prepared.original),
                "events": prepared.events,
                "rewritten": prepared.body is not body,
            }
            if answer["rewritten"]:
                returned = prepared.body
        except Exception as failure:
            logger.exception("proxy: a managed call could not be prepared")
            answer = {"error": type(failure).__name__}
        finally:
            close_old_connections()
        with contextlib.suppress(OSError):  # the web process stopped waiting
            frame_send(conn, answer, returned)


def preparer_serve(
    listener: socket.socket,
    *,
    threads: int,
    answer: Callable[[socket.socket], None] = _answer,
    name: str = "ctxweb-preparer",
) -> None:
    """Answer the calls that come on ``listener``, ``threads`` at once, until it is closed (a
    helper process's loop: ``answer`` takes each connection, and closes it)."""
    pool = ThreadPoolExecutor(max(1, threads), thread_name_prefix=name)
    try:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            pool.submit(answer, conn)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def end_with(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(PARENT_SECONDS)
    os._exit(0)  # the web process is gone, and with it every caller waiting for an answer


def preparer_loop(*, parent: int, fd: int) -> None:
    """The preparer process (``manage.py prepare_calls``): answer the calls that come on the
    listening socket ``fd`` (the web process's), until the web process ``parent`` has ended."""
    listener = socket.socket(fileno=fd)
    listener.setblocking(True)
    threading.Thread(target=end_with, args=(parent,), name="ctxweb-parent", daemon=True).start()
    logger.info("proxy: preparer ready (pid %d)", os.getpid())
    preparer_serve(listener, threads=settings.CTXWEB_PROXY_PREPARE_THREADS)


# --- in the web process -------------------------------------------------------------------------


@dataclass
class Preparer:
    """A preparer of this web process: the socket its calls come to."""

    number: int
    path: str
    listener: socket.socket


_PREPARERS: list[Preparer] = []
_LOCK = threading.Lock()
#: The threads that exchange calls with the preparers (see :func:`frame_send`).
_EXCHANGES: list[ThreadPoolExecutor] = []


def _exchanges() -> ThreadPoolExecutor:
    with _LOCK:
        if not _EXCHANGES:
            threads = settings.CTXWEB_PROXY_PREPARE_THREADS * max(1, len(_PREPARERS))
            _EXCHANGES.append(ThreadPoolExecutor(threads, thread_name_prefix="ctxweb-preparing"))
        return _EXCHANGES[0]


#: The start of the name of a web process's folder of preparers' sockets, followed by its pid.
FOLDER_PREFIX = "ctxweb-preparers-"


def _folders_of_ended_processes_remove(prefix: str = FOLDER_PREFIX) -> None:
    """Remove the preparers' socket folders of this user's web processes that ended without
    removing theirs (a process killed does not): without this, every server killed left one in
    the temporary folder. Only a folder of this user holding sockets alone, named after a
    process that no longer exists, is removed."""
    root = tempfile.gettempdir()
    with contextlib.suppress(OSError):
        for entry in os.scandir(root):
            pid = entry.name.removeprefix(prefix).split("-", 1)[0]
            if not entry.name.startswith(prefix) or not pid.isdigit():
                continue
            try:
                if not entry.is_dir(follow_symlinks=False) or entry.stat().st_uid != os.getuid():
                    continue
                os.kill(int(pid), 0)  # still running (or another user's process): kept
                continue
            except ProcessLookupError:
                pass
            except OSError:
                continue
            try:
                names = os.listdir(entry.path)
            except OSError:
                continue
            if all(name.endswith(".sock") for name in names):
                shutil.rmtree(entry.path, ignore_errors=True)


def preparers_start() -> None:
    """At a web process's start: start ``CTXWEB_PROXY_PREPARERS`` preparers and watch them (each
    started again when it ends); nothing with none (managed calls are then prepared on threads of
    this process)."""
    helpers_start(
        _PREPARERS,
        FOLDER_PREFIX,
        settings.CTXWEB_PROXY_PREPARERS,
        "prepare_calls",
        "proxy: preparer",
    )


def helpers_start(
    started: list[Preparer], prefix: str, count: int, command: str, what: str
) -> None:
    """Start ``count`` helper processes (``manage.py <command>``) listening in a folder named
    ``prefix`` (:func:`helpers_listen`) and watch them (:func:`helper_watch`), once a process:
    nothing when ``started`` (their registry) holds them already."""
    with _LOCK:
        if started:
            return
        started.extend(helpers_listen(prefix, count))
    for helper in started:
        helper_watch(helper, command, what)


def helpers_listen(prefix: str, count: int) -> list[Preparer]:
    """``count`` listening Unix sockets for helper processes of this web process, in a folder of
    its own (its user's alone, named ``prefix`` and this process's id, removed as it ends; the
    folders of ended processes that did not remove theirs are removed first)."""
    if count <= 0:
        return []
    _folders_of_ended_processes_remove(prefix)
    folder = tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-")
    atexit.register(shutil.rmtree, folder, True)
    listening = []
    for number in range(count):
        path = os.path.join(folder, f"{number}.sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        listener.listen(BACKLOG)
        listening.append(Preparer(number, path, listener))
    return listening


def helper_watch(helper: Preparer, command: str, what: str) -> None:
    """Start the helper process ``manage.py <command> --parent <pid> --fd <fd>`` on ``helper``'s
    listening socket, on a thread that starts it again each time it ends."""
    threading.Thread(
        target=_watch_helper,
        args=(helper, command, what),
        name=f"ctxweb-{command}-{helper.number}",
        daemon=True,
    ).start()


def preparers_running() -> bool:
    """Whether this process's managed calls are prepared by preparers (:func:`preparers_start`)."""
    return bool(_PREPARERS)


def _watch_helper(helper: Preparer, command: str, what: str) -> None:
    from ctxweb.datadir import BASE_DIR

    fd = helper.listener.fileno()
    argv = [
        sys.executable,
        str(BASE_DIR / "manage.py"),
        command,
        "--parent",
        str(os.getpid()),
        "--fd",
        str(fd),
    ]
    while True:
        # A session of its own: a signal to the server's group is the server's; the helper
        # ends when the server has (it watches its parent: end_with).
        process = subprocess.Popen(argv, pass_fds=(fd,), start_new_session=True)
        logger.info("%s %d started (pid %d)", what, helper.number, process.pid)
        code = process.wait()
        logger.warning(
            "%s %d (pid %d) ended (%s); starting it again", what, helper.number, process.pid, code
        )
        time.sleep(RESTART_SECONDS)


def _exchange(path: str, call: dict[str, Any], body: bytes, deadline: float) -> Prepared:
    """``call`` with its ``body`` sent to the preparer listening at ``path``, and its answer,
    by the monotonic clock's ``deadline`` (on a thread: its waits and copies take no lock)."""
    left = deadline - time.monotonic()
    if left <= 0:  # it waited for this thread that long
        raise TimeoutError
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(left)
        sock.connect(path)
        frame_send(sock, call, body)
        sock.settimeout(max(0.001, deadline - time.monotonic()))
        try:
            answer, returned = frame_received(sock)
        except ValueError as broken:
            raise PreparerFailed(f"its answer is broken ({broken})") from None
    if "error" in answer:
        raise PreparerFailed(f"it failed ({answer['error']})")
    try:
        return Prepared(
            returned if answer["rewritten"] else body,
            answer["session"],
            tuple(answer["original"]),
            list(answer["events"]),
        )
    except (KeyError, TypeError) as broken:
        raise PreparerFailed(f"its answer is broken ({broken!r})") from None


async def proxy_prepare_elsewhere(
    *,
    project_id: int,
    key_id: int,
    format: str,
    body: bytes,
    session: str | None,
    managed: bool,
) -> Prepared:
    """:func:`~ctxweb.contexts.services.proxying.proxy_prepare` run by the project's preparer;
    the call unchanged, with a warning event, when the preparer has not answered within
    ``CTXWEB_PROXY_PREPARE_SECONDS`` or failed."""
    preparer = _PREPARERS[project_id % len(_PREPARERS)]
    call = {
        "project_id": project_id,
        "key_id": key_id,
        "format": format,
        "session": session,
        "managed": managed,
    }
    seconds = settings.CTXWEB_PROXY_PREPARE_SECONDS
    exchange = functools.partial(_exchange, preparer.path, call, body, time.monotonic() + seconds)
    try:
        async with asyncio.timeout(seconds):
            return await asyncio.get_running_loop().run_in_executor(_exchanges(), exchange)
    except TimeoutError:  # first: an OSError too
        why = f"the preparer did not answer within CTXWEB_PROXY_PREPARE_SECONDS ({seconds:g}s)"
    except (OSError, PreparerFailed) as failure:
        why = f"the preparer could not prepare it ({failure})"
    logger.warning("proxy: a managed call was sent unchanged: %s", why)
    warning = {
        "type": "warning",
        "source": "proxy",
        "message": f"managed mode: {why}; the call was sent unchanged",
    }
    return Prepared(body, session, events=[warning])


__all__ = [
    "PreparerFailed",
    "preparer_loop",
    "preparer_serve",
    "preparers_running",
    "preparers_start",
    "proxy_prepare_elsewhere",
]
