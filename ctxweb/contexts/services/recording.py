"""The queue between relaying a call and recording it (:class:`PendingCall`).

The proxy writes each call's raw exchange first, cheaply, and never parses on the caller's path:
:func:`spool_write` writes the request to ``CTXWEB_DATA_DIR/recordings/<spool>.request`` (and
what the call is to ``<spool>.call``) before the answer starts, the relay appends the answer to
``<spool>.answer`` chunk by chunk before relaying it, and :func:`recording_queue` adds the call's
row once its answer is over (the calls waiting on a shard of lanes together: one insert): gone
back whole, or cut (its caller left, ctxweb stopped it, relaying it failed: the turn then
carries an ``interrupted`` event, :func:`cut_event`). Recorders drain the queue
(:func:`recordings_drain`): Celery workers in the production shape (``CTXWEB_RECORDING_CELERY``,
on when there is a broker), else ``CTXWEB_RECORDING_WORKERS`` recorder processes the web process
starts (:func:`recorder_loop`; threads in the test suite), at a lower CPU priority
(``CTXWEB_BACKGROUND_NICE``).

- **Bounded**: at most ``CTXWEB_RECORDING_QUEUE_BYTES`` spooled in all,
  ``CTXWEB_RECORDING_PROJECT_BYTES`` per project and ``CTXWEB_RECORDING_LANE_BYTES`` per lane
  (a session: one session's burst of big calls fills its own share, not its project's); a call
  past a bound is relayed all the same and kept as an unread call saying why it was not
  recorded (on its session's page).
- **Fair**: a lane (the session a call names, else the key that relayed it) is recorded in order,
  one call at a time, by one recorder; a recorder drains a lane for at most
  :data:`SLICE_SECONDS`, then queues it again behind the others: one project's burst waits behind
  itself, and delays another's recording by at most a slice per busy lane. A call of at least
  ``CTXWEB_RECORDING_BIG_BYTES`` (seconds to record at tens of MB) is claimed alone, and the
  first recorder process leaves it to the others: the small lanes never wait behind it. A
  lane's small calls are claimed together, and each is recorded in one transaction (SQLite
  takes one writer at a time: its write lock is taken as seldom and as briefly as can be).
- **Durable**: the queue is rows and files. A recorder that dies leaves its call ``working`` until
  its lease (``CTXWEB_RECORDING_LEASE``) ends; a web process that dies mid-answer leaves its
  files and no row (the sweep adds it as ``receiving``). :func:`recordings_sweep` (at each web
  process's start, then periodically) takes them up again: a call whose answer had been relayed
  whole is recorded, any other dropped (its caller saw a failed call, which an SDK sends again).
- **Visible**: a call that cannot be recorded after ``CTXWEB_RECORDING_ATTEMPTS`` tries becomes an
  unread call, raw, with the error, on its session's page.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import socket
import threading
import time
import uuid
import zlib
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import msgspec
from django.conf import settings
from django.db import IntegrityError, close_old_connections, connection, transaction
from django.db.models import F, Q, Sum
from django.utils import timezone

from compaction.streams import STREAM_TAIL
from ctxweb.accounts.models import Project
from ctxweb.contexts.models import PendingCall
from ctxweb.contexts.services.ingest import WINDOW_HEADERS, call_context_window
from ctxweb.contexts.services.proxying import (
    proxy_answer_finished,
    proxy_memory_expire,
    proxy_record,
)
from ctxweb.contexts.services.unread import unread_call_record
from ctxweb.dbwrites import sqlite_writing

logger = logging.getLogger(__name__)

#: The Celery tasks (:mod:`ctxweb.tasks`), sent by name.
DRAIN_TASK = "ctxweb.tasks.recordings_drain"
SWEEP_TASK = "ctxweb.tasks.recordings_sweep"
#: How long a recorder drains one lane before it lets the others go first.
SLICE_SECONDS = 0.25
#: Spool files older than this with no row (a project deleted meanwhile) are removed.
ORPHAN_SECONDS = 3600

_STARTED = timezone.now()


def spool_dir() -> Path:
    return _spool_dir(str(settings.DATA_DIR))


@functools.cache
def _spool_dir(data: str) -> Path:
    folder = Path(data) / "recordings"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def spool_new() -> str:
    """A new spool name (the relay writes the answer's file before the row exists)."""
    return uuid.uuid4().hex


def request_path(spool: str) -> Path:
    return spool_dir() / f"{spool}.request"


def answer_path(spool: str) -> Path:
    return spool_dir() / f"{spool}.answer"


def owner() -> str:
    """This process, as rows name their holder."""
    return f"{socket.gethostname()}:{os.getpid()}"


def lane_for(project_id: int, key_id: int, session: str | None) -> str:
    """The lane a call is recorded in, in order: its named session's, else its key's."""
    return f"{project_id}:s:{session}"[:300] if session else f"{project_id}:k:{key_id}"


# --- the relay's side ----------------------------------------------------------------------------


def call_path(spool: str) -> Path:
    return spool_dir() / f"{spool}.call"


def spool_write(
    *, project_id: int, key_id: int, spool: str, call: dict[str, Any], request_body: bytes
) -> None:
    """Write a call's request and what it is (project, key, how to record it, this process)
    before anything of its answer is relayed: small writes to the page cache, which survive the
    process. A process killed before its row was added leaves these, and the sweep adds it."""
    request_path(spool).write_bytes(request_body)
    what = {"project_id": project_id, "key_id": key_id, "call": call, "owner": owner()}
    # Whole or not at all (written aside, then renamed): a sweep that read it half written took
    # the call for a broken one and removed the files of a call being relayed.
    writing = call_path(spool).with_suffix(".call-writing")
    writing.write_bytes(json.dumps(what).encode())
    os.replace(writing, call_path(spool))


@dataclass(frozen=True)
class Spooled:
    """A call whose exchange is spooled as it is relayed (:func:`recording_spool`): its files'
    name, and what queueing it takes once its answer is over (:func:`recording_finish`)."""

    project_id: int
    key_id: int
    spool: str
    call: dict[str, Any]
    request_bytes: int
    lane: str


def recording_spool(
    *,
    project_id: int,
    key_id: int,
    format: str,
    streamed: bool,
    session: str | None,
    original: Sequence[str],
    events: list[dict[str, Any]],
    content_encoding: str,
    headers: Sequence[tuple[str, str]],
    length: int | None,
    request_body: bytes,
) -> Spooled:
    """Spool a call whose answer is about to be relayed: what it is and how to record it (the
    request ``headers`` that select its window among them), then its request, before any of its
    answer (:func:`spool_write`: the record a crash leaves; its row is added once the answer has
    gone back). The relay writes the answer to ``answer_path(spooled.spool)`` as it relays it,
    then calls :func:`recording_finish`."""
    spool = spool_new()
    call = {
        "format": format,
        "streamed": streamed,
        "session": session,
        "original": list(original),
        "events": events,
        "content_encoding": content_encoding,
        "window_headers": [[n, v] for n, v in headers if n.lower() in WINDOW_HEADERS],
        "length": length,
    }
    spool_write(
        project_id=project_id, key_id=key_id, spool=spool, call=call, request_body=request_body
    )
    return Spooled(
        project_id=project_id,
        key_id=key_id,
        spool=spool,
        call=call,
        request_bytes=len(request_body),
        lane=lane_for(project_id, key_id, session),
    )


class _Shard:
    """Queueing calls whose answer is over, off the relay's event loop: one thread per shard of
    lanes, so that a lane's calls are queued in the order they were relayed; the calls waiting
    in a shard are queued together, one transaction (SQLite's write lock taken once for all,
    not once a call, beside every other writer)."""

    def __init__(self, n: int) -> None:
        self.executor = ThreadPoolExecutor(1, thread_name_prefix=f"ctxweb-proxy-spool-{n}")
        self.lock = threading.Lock()
        self.waiting: list[tuple[Spooled, int, bool, str, Future[None]]] = []
        self.scheduled = False


_SHARDS = [_Shard(n) for n in range(4)]
#: The calls being queued (:func:`recordings_queued` waits for them).
_FINISHING: set[Future[None]] = set()


def recording_finish(*, spooled: Spooled, answer_bytes: int, complete: bool, cut: str = "") -> None:
    """The answer to a spooled call is over (``complete``: relayed to its end; else ``cut`` says
    why it ended before): queue the call (:func:`recording_queue`) on its lane's thread, after
    the lane's earlier calls. Returns at once (the relay calls it on its event loop)."""
    shard = _SHARDS[zlib.crc32(spooled.lane.encode()) % len(_SHARDS)]
    finishing: Future[None] = Future()
    _FINISHING.add(finishing)
    finishing.add_done_callback(_FINISHING.discard)
    with shard.lock:
        shard.waiting.append((spooled, answer_bytes, complete, cut, finishing))
        if shard.scheduled:
            return
        shard.scheduled = True
    shard.executor.submit(_finish, shard)


def _finish(shard: _Shard) -> None:
    with shard.lock:
        batch, shard.waiting = shard.waiting, []
        shard.scheduled = False
    try:
        recordings_queue(
            [
                {
                    "project_id": spooled.project_id,
                    "key_id": spooled.key_id,
                    "spool": spooled.spool,
                    "call": spooled.call,
                    "request_bytes": spooled.request_bytes,
                    "answer_bytes": answer_bytes,
                    "complete": complete,
                    "cut": cut,
                }
                for spooled, answer_bytes, complete, cut, _ in batch
            ]
        )
    except Exception:
        # the files stay: the sweep queues the calls
        logger.exception("recording: %s relayed calls could not be queued", len(batch))
    finally:
        for *_, finishing in batch:
            finishing.set_result(None)


def recordings_queued(timeout: float = 30) -> None:
    """Wait until every call whose answer is over so far is queued, or dropped (tests, and a
    process shutting down)."""
    for finishing in list(_FINISHING):
        finishing.result(timeout=timeout)


def recording_queue(
    *,
    project_id: int,
    key_id: int,
    spool: str,
    call: dict[str, Any],
    request_bytes: int,
    answer_bytes: int,
    complete: bool,
    cut: str = "",
) -> bool:
    """The answer to a spooled call has been relayed (``complete``: to its end; else ``cut``
    says why it ended before): queue the call for a recorder (one row, one statement). A call
    whose answer was cut is recorded all the same (nothing the agent sent is lost), its turn
    saying the answer was cut and why (:func:`cut_event`). A call past the queue's bounds is
    kept as an unread call saying so. Whether it was queued."""
    return recordings_queue(
        [
            {
                "project_id": project_id,
                "key_id": key_id,
                "spool": spool,
                "call": call,
                "request_bytes": request_bytes,
                "answer_bytes": answer_bytes,
                "complete": complete,
                "cut": cut,
            }
        ]
    )[0]


def recordings_queue(calls: Sequence[dict[str, Any]]) -> list[bool]:
    """:func:`recording_queue` for several calls (the arguments of each), their rows added in
    order in one statement; whether each was queued."""
    rows: list[PendingCall] = []
    full: list[tuple[PendingCall, str]] = []
    queued: list[bool] = []
    try:
        for what in calls:
            pending = PendingCall(
                project_id=what["project_id"],
                key_id=what["key_id"],
                lane=lane_for(what["project_id"], what["key_id"], what["call"].get("session")),
                state=PendingCall.PENDING,
                call=dict(what["call"]),
                spool=what["spool"],
                size=what["request_bytes"] + what["answer_bytes"],
                owner=owner(),
            )
            if not what["complete"] and not _whole(pending):
                why = what.get("cut") or "its caller left before the answer's end"
                event = cut_event(why, what["answer_bytes"])
                pending.call["cut"] = True
                pending.call["events"] = [*(pending.call.get("events") or ()), event]
                logger.info(
                    "recording: a call (%s, session %s) recorded with its answer cut: %s",
                    pending.call.get("format"),
                    pending.call.get("session") or "(none named)",
                    event["message"],
                )
            why = _over_bounds(pending.project_id, pending.lane, pending.size)
            if why:
                full.append((pending, why))
            else:
                rows.append(pending)
            queued.append(not why)
        with sqlite_writing():
            for pending, why in full:
                _unread(pending, why, keep_bodies=False)
            if rows:
                PendingCall.objects.bulk_create(rows)
    finally:
        close_old_connections()
    for lane in dict.fromkeys(row.lane for row in rows):
        recordings_dispatch(lane)
    return queued


def cut_event(why: str, relayed: int) -> dict[str, Any]:
    """The event a turn whose answer was cut carries (shown on its page, in the API's
    ``events``): ``why`` it ended before its end, and how much of it was relayed."""
    return {
        "type": "interrupted",
        "source": "proxy",
        "warning": True,
        "message": (
            f"The answer was cut after {relayed} bytes: {why}. The request is recorded whole;"
            " the response is what the provider sent before the cut."
        ),
    }


def _whole(pending: PendingCall) -> bool:
    """Whether the answer on disk is whole though its relaying did not reach the end: a stream
    whose last event was relayed (an SDK leaves as soon as it reads it), or an answer of the
    length it declared. Reads the stream's last :data:`STREAM_TAIL` bytes at most (the web
    process asks, for every call cut short: never the whole answer)."""
    call = pending.call
    try:
        with answer_path(pending.spool).open("rb") as answer:
            size = answer.seek(0, os.SEEK_END)
            if call.get("streamed") and not call.get("content_encoding"):
                answer.seek(max(0, size - STREAM_TAIL))
                return proxy_answer_finished(str(call.get("format")), answer.read())
    except OSError:
        return False
    declared = call.get("length")
    return declared is not None and size == int(declared)


#: The queue's totals are read at most this often per process (one aggregate, not two per call):
#: a bound is kept to within what a process queues in that time.
TOTALS_SECONDS = 1.0
_TOTALS: dict[str, Any] = {"at": -1e9, "all": 0, "projects": {}, "lanes": {}}
_TOTALS_LOCK = threading.Lock()


def _queued_bytes(project_id: int, lane: str) -> tuple[int, int, int]:
    """Bytes waiting in the queue (recent to within :data:`TOTALS_SECONDS`, plus what this
    process queued since): in all, of the project, and of the lane."""
    with _TOTALS_LOCK:
        stale = time.monotonic() - _TOTALS["at"] > TOTALS_SECONDS
    if stale:
        rows = PendingCall.objects.exclude(state=PendingCall.RECEIVING)
        projects: dict[int, int] = {}
        lanes: dict[str, int] = {}
        for row in rows.values("project_id", "lane").annotate(total=Sum("size")).order_by():
            projects[row["project_id"]] = projects.get(row["project_id"], 0) + row["total"]
            lanes[row["lane"]] = row["total"]
        with _TOTALS_LOCK:
            _TOTALS.update(
                at=time.monotonic(), all=sum(projects.values()), projects=projects, lanes=lanes
            )
    with _TOTALS_LOCK:
        return (
            int(_TOTALS["all"]),
            int(_TOTALS["projects"].get(project_id, 0)),
            int(_TOTALS["lanes"].get(lane, 0)),
        )


def _counted(project_id: int, lane: str, size: int) -> None:
    with _TOTALS_LOCK:
        _TOTALS["all"] += size
        _TOTALS["projects"][project_id] = _TOTALS["projects"].get(project_id, 0) + size
        _TOTALS["lanes"][lane] = _TOTALS["lanes"].get(lane, 0) + size


def _over_bounds(project_id: int, lane: str, size: int) -> str:
    """Why the queue cannot take a call of ``size`` bytes in ``lane`` (``""``: it can, and it
    is counted). The lane's bound comes first: a session that bursts fills its own share, and
    the project's other sessions are still recorded."""
    waiting, own, lane_own = _queued_bytes(project_id, lane)
    if lane_own + size > settings.CTXWEB_RECORDING_LANE_BYTES:
        return (
            f"this session's recording queue was full (over CTXWEB_RECORDING_LANE_BYTES="
            f"{settings.CTXWEB_RECORDING_LANE_BYTES}): the call was relayed, not recorded"
        )
    if waiting + size > settings.CTXWEB_RECORDING_QUEUE_BYTES:
        return (
            f"ctxweb's recording queue was full ({waiting + size} bytes waiting, over"
            f" CTXWEB_RECORDING_QUEUE_BYTES={settings.CTXWEB_RECORDING_QUEUE_BYTES}): the call"
            " was relayed, not recorded"
        )
    if own + size > settings.CTXWEB_RECORDING_PROJECT_BYTES:
        return (
            f"this project's recording queue was full (over CTXWEB_RECORDING_PROJECT_BYTES="
            f"{settings.CTXWEB_RECORDING_PROJECT_BYTES}): the call was relayed, not recorded"
        )
    _counted(project_id, lane, size)
    return ""


# --- recorders -----------------------------------------------------------------------------------

_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()
_QUEUED: set[str] = set()  # lanes waiting in the pool, each once
_DRAINING = [0]  # drains running in the pool


def _pool() -> ThreadPoolExecutor:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(
                settings.CTXWEB_RECORDING_WORKERS, thread_name_prefix="ctxweb-recorder"
            )
        return _POOL


def recordings_dispatch(lane: str) -> None:
    """Have a recorder drain ``lane``: a Celery task, or a thread of this process (the
    recorder process finds it by itself)."""
    if settings.CTXWEB_RECORDER == "process":
        return
    if settings.CTXWEB_RECORDING_CELERY:
        from ctxweb.celery import app

        try:
            app.send_task(DRAIN_TASK, args=(lane,))
        except Exception:  # the broker is down: the periodic sweep sends it again
            logger.exception("recording: could not queue lane %s", lane)
        return
    with _POOL_LOCK:
        if lane in _QUEUED:
            return
        _QUEUED.add(lane)
    _pool().submit(_drain_in_thread, lane)


def _drain_in_thread(lane: str) -> None:
    with _POOL_LOCK:
        _QUEUED.discard(lane)
        _DRAINING[0] += 1
    try:
        recordings_drain(lane)
    except Exception:
        logger.exception("recording: draining lane %s failed", lane)
    finally:
        close_old_connections()
        with _POOL_LOCK:
            _DRAINING[0] -= 1


def recorders_busy() -> bool:
    """Whether this process's recorders have a lane queued or draining."""
    with _POOL_LOCK:
        return bool(_QUEUED) or _DRAINING[0] > 0


#: At most this many calls of a lane are claimed at once (one transaction), and only calls
#: smaller than ``CTXWEB_RECORDING_BIG_BYTES`` together: a big call is claimed alone.
CLAIM_BATCH = 16


def recordings_drain(lane: str, seconds: float = SLICE_SECONDS, *, small_only: bool = False) -> int:
    """Record ``lane``'s waiting calls in order for about ``seconds``, then queue the rest
    behind the other lanes; nothing when another recorder has the lane (or, with
    ``small_only``, when its next call is big). Calls recorded."""
    deadline = time.monotonic() + seconds
    done = 0
    while True:
        with sqlite_writing():
            claimed = _claim_batch(lane, small_only=small_only)
        if not claimed:
            return done
        for n, pending in enumerate(claimed):
            with sqlite_writing():
                recorded = _record(pending)
            if not recorded:  # to be tried again: the calls after it wait for it
                _release(claimed[n + 1 :])
                break
            done += 1
            if time.monotonic() > deadline:
                _release(claimed[n + 1 :])
                more = PendingCall.objects.filter(lane=lane, state=PendingCall.PENDING).exists()
                if more:
                    recordings_dispatch(lane)
                return done


def _lease() -> timedelta:
    return timedelta(seconds=settings.CTXWEB_RECORDING_LEASE)


def _claim(lane: str) -> PendingCall | None:
    """The lane's first waiting call, now this recorder's; None when there is none or another
    recorder holds the lane."""
    claimed = _claim_batch(lane, limit=1)
    return claimed[0] if claimed else None


def _claim_batch(
    lane: str, *, limit: int = CLAIM_BATCH, small_only: bool = False
) -> list[PendingCall]:
    """The lane's first waiting calls, in order, now this recorder's: up to ``limit`` small
    ones, or one big one (none with ``small_only``); none when another recorder holds the lane
    (a conditional update: two recorders never hold one lane)."""
    now = timezone.now()
    expired = now - _lease()
    big = settings.CTXWEB_RECORDING_BIG_BYTES
    with transaction.atomic():
        calls = PendingCall.objects.filter(lane=lane)
        if calls.filter(state=PendingCall.WORKING, claimed_at__gt=expired).exists():
            return []
        first = list(
            calls.filter(state__in=(PendingCall.PENDING, PendingCall.WORKING))
            .order_by("pk")
            .values_list("pk", "size")[:limit]
        )
        if not first or (small_only and first[0][1] >= big):
            return []
        wanted = [first[0][0]]
        if first[0][1] < big:
            for pk, size in first[1:]:
                if size >= big:
                    break
                wanted.append(pk)
        taken = (
            PendingCall.objects.filter(pk__in=wanted)
            .filter(
                Q(state=PendingCall.PENDING) | Q(state=PendingCall.WORKING, claimed_at__lte=expired)
            )
            .update(
                state=PendingCall.WORKING,
                owner=owner(),
                claimed_at=now,
                attempts=F("attempts") + 1,
            )
        )
        if taken != len(wanted):  # another recorder took some meanwhile: it has the lane
            transaction.set_rollback(True)
            return []
    return list(PendingCall.objects.select_related("project").filter(pk__in=wanted).order_by("pk"))


def _release(calls: Sequence[PendingCall]) -> None:
    """Give back claimed calls not recorded (the slice ended): waiting again, not an attempt."""
    if calls:
        with sqlite_writing():
            PendingCall.objects.filter(
                pk__in=[c.pk for c in calls], state=PendingCall.WORKING, owner=owner()
            ).update(state=PendingCall.PENDING, claimed_at=None, attempts=F("attempts") - 1)


class _Model(msgspec.Struct):
    """The one field of a request body the window needs (msgspec skips the rest unread)."""

    model: Any = None


def _window(body: bytes, headers: Sequence[Sequence[str]]) -> dict[str, Any]:
    """What the call says of its window (the model it names, the headers selecting a longer
    one), as ``proxy_record``'s ``context_window`` and ``context_window_source``."""
    try:
        model = msgspec.json.decode(body, type=_Model).model
    except msgspec.DecodeError:  # not a JSON object: proxy_record says so
        model = None
    window, source = call_context_window(
        model=model if isinstance(model, str) else None,
        headers=[(str(name), str(value)) for name, value in headers],
    )
    return {"context_window": window, "context_window_source": source}


@functools.cache
def _delete_sql() -> str:
    quote = connection.ops.quote_name
    return f"DELETE FROM {quote(PendingCall._meta.db_table)} WHERE {quote('id')} = %s"


def _record(pending: PendingCall) -> bool:
    """Record a claimed call (or keep it as an unread call); False when it failed and waits to
    be tried again."""
    call = pending.call
    try:
        request = request_path(pending.spool).read_bytes()
        answer = answer_path(pending.spool).read_bytes()
    except OSError as error:
        _unread(pending, f"the recording's files are gone ({error})", keep_bodies=False)
        return True
    called: list[bool] = []

    def recorded() -> list[tuple[str, list[Any]]]:
        # What the call is goes before its row: a sweep never finds the file of a call whose
        # row is gone (it would take it up again: recorded twice).
        call_path(pending.spool).unlink(missing_ok=True)
        called.append(True)
        # no deletion collector: nothing refers to the row; run with the memory's writes
        return [(_delete_sql(), [pending.pk])]

    try:
        session = proxy_record(
            project=pending.project,
            key_id=pending.key_id,
            format=str(call["format"]),
            request_body=request,
            response_body=answer,
            streamed=bool(call.get("streamed")),
            session=call.get("session"),
            original=tuple(call.get("original") or ()),
            events=list(call.get("events") or ()),
            compressed=bool(call.get("content_encoding")),
            content_encoding=str(call.get("content_encoding") or ""),
            cut=bool(call.get("cut")),
            **_window(request, call.get("window_headers") or ()),
            recorded=recorded,
            one_transaction=pending.size < settings.CTXWEB_RECORDING_BIG_BYTES,
        )
    except Exception as error:  # proxy_record keeps what it cannot read: this is the database
        logger.exception("recording: call %s failed (attempt %s)", pending.pk, pending.attempts)
        close_old_connections()
        if pending.attempts >= settings.CTXWEB_RECORDING_ATTEMPTS:
            why = f"recording failed {pending.attempts} times: {type(error).__name__}: {error}"
            _unread(pending, why, keep_bodies=True)
            return True
        PendingCall.objects.filter(pk=pending.pk).update(state=PendingCall.PENDING, claimed_at=None)
        return False
    if called and session is not None:  # recorded: its row went with the turn, committed
        _files_remove(pending.spool)
    else:  # kept as an unread call
        _discard(pending)
    return True


def _unread(pending: PendingCall, why: str, *, keep_bodies: bool) -> None:
    """Keep the call as an unread call saying ``why`` it was not recorded, then drop it."""
    call = pending.call
    request = answer = b""
    if keep_bodies:
        try:
            request = request_path(pending.spool).read_bytes()
            answer = answer_path(pending.spool).read_bytes()
        except OSError:
            pass
    try:
        unread_call_record(
            project=pending.project,
            session_external_id=call.get("session"),
            format=str(call.get("format") or ""),
            request_body=request,
            response_body=answer,
            streamed=bool(call.get("streamed")),
            compressed=bool(call.get("content_encoding")),
            content_encoding=str(call.get("content_encoding") or ""),
            error=why,
        )
    except Exception:
        logger.exception("recording: could not keep call %s as unread (%s)", pending.pk, why)
    logger.warning("recording: call %s not recorded: %s", pending.pk, why)
    _discard(pending)


def _discard(pending: PendingCall) -> None:
    if pending.pk is not None:
        PendingCall.objects.filter(pk=pending.pk).delete()
    _files_remove(pending.spool)


def _files_remove(spool: str) -> None:
    # what the call is goes first: a sweep never finds it without the rest (its row is gone)
    for path in (call_path(spool), request_path(spool), answer_path(spool)):
        path.unlink(missing_ok=True)


# --- after a crash -------------------------------------------------------------------------------


def _holder_gone(pending: PendingCall, *, started_before: bool = False) -> bool:
    """Whether the process named by ``owner`` is gone: on this host, no process of that pid,
    or this very process when the row is older than it (``started_before``: known to be).
    Another host's: never known here."""
    host, _, pid = pending.owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    if int(pid) == os.getpid():
        return started_before or pending.created_at < _STARTED
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def recordings_sweep() -> dict[str, int]:
    """Take up what crashes left: ``receiving`` calls whose web process is gone (or that are
    older than an answer may last) are queued when their answer was relayed whole, else
    dropped; ``working`` calls whose recorder died or whose lease ended are queued again; every
    lane with waiting calls gets a recorder; spool files with no row are removed. Counts."""
    counts = {"recovered": 0, "dropped": 0, "released": 0, "lanes": 0, "orphans": 0}
    with sqlite_writing():
        lanes = _sweep(counts)
    for lane in sorted(lanes):
        recordings_dispatch(lane)
    if any(counts[name] for name in ("recovered", "dropped", "released", "orphans")):
        logger.info("recording: sweep %s", json.dumps(counts))
    return counts


def _adopt_unqueued() -> None:
    """Add the row of each call whose relaying process died before adding it (its files say
    what it is), as ``receiving``: the sweep then records it if its answer was relayed whole."""
    known = set(PendingCall.objects.values_list("spool", flat=True))
    for path in spool_dir().glob("*.call"):
        spool = path.stem
        if spool in known:
            continue
        try:
            written = path.stat().st_mtime
            what = json.loads(path.read_bytes())
            probe = PendingCall(owner=str(what["owner"]), created_at=timezone.now())
            too_old = time.time() - written > settings.CTXWEB_PROXY_MAX_ANSWER_SECONDS + 60
            written_before_us = written < _STARTED.timestamp()
            if not too_old and not _holder_gone(probe, started_before=written_before_us):
                continue  # its process is relaying it now (or is on another host)
            if not Project.objects.filter(pk=what["project_id"]).exists():
                raise LookupError("its project is gone")
            with transaction.atomic():
                PendingCall.objects.create(
                    project_id=what["project_id"],
                    key_id=what["key_id"],
                    lane=lane_for(what["project_id"], what["key_id"], what["call"].get("session")),
                    call=what["call"],
                    spool=spool,
                    size=_size(request_path(spool)),
                    owner=probe.owner,
                )
        except IntegrityError:
            continue  # another recorder's sweep queued it meanwhile (one row a spool)
        except FileNotFoundError:
            continue  # recorded, or dropped, meanwhile
        except (OSError, ValueError, KeyError, LookupError) as error:
            logger.warning("recording: spooled call %s cannot be taken up: %s", spool, error)
            _files_remove(spool)


def _sweep(counts: dict[str, int]) -> set[str]:
    """:func:`recordings_sweep`'s writes; the lanes to drain."""
    try:
        proxy_memory_expire()
        _adopt_unqueued()
        now = timezone.now()
        too_old = now - timedelta(seconds=settings.CTXWEB_PROXY_MAX_ANSWER_SECONDS + 60)
        for pending in PendingCall.objects.select_related("project").filter(
            state=PendingCall.RECEIVING
        ):
            if pending.created_at >= too_old and not _holder_gone(pending):
                continue
            if _whole(pending):
                size = _size(answer_path(pending.spool))
                # another recorder's sweep may have taken it up meanwhile: counted once
                counts["recovered"] += PendingCall.objects.filter(
                    pk=pending.pk, state=PendingCall.RECEIVING
                ).update(state=PendingCall.PENDING, size=F("size") + size)
            else:
                _discard(pending)
                counts["dropped"] += 1
        for pending in PendingCall.objects.filter(state=PendingCall.WORKING):
            if pending.claimed_at is None or pending.claimed_at < now - _lease():
                gone = True
            else:
                gone = _holder_gone(pending)
            if gone:
                counts["released"] += PendingCall.objects.filter(
                    pk=pending.pk, state=PendingCall.WORKING, claimed_at=pending.claimed_at
                ).update(state=PendingCall.PENDING, claimed_at=None)
        lanes = set(
            PendingCall.objects.filter(state=PendingCall.PENDING).values_list("lane", flat=True)
        )
        counts["lanes"] = len(lanes)
        counts["orphans"] = _orphans_remove()
    finally:
        close_old_connections()
    return lanes


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _orphans_remove() -> int:
    cutoff = time.time() - ORPHAN_SECONDS
    known = set(PendingCall.objects.values_list("spool", flat=True))
    removed = 0
    for path in spool_dir().iterdir():
        if path.stem in known:
            continue
        try:
            if path.stat().st_mtime < cutoff:
                path.unlink()
                removed += 1
        except OSError:
            continue
    return removed


def recordings_waiting(project: Project | None = None) -> int:
    """Calls relayed and not yet recorded (of ``project``, or all)."""
    calls = PendingCall.objects.all()
    if project is not None:
        calls = calls.filter(project=project)
    return calls.count()


# --- the recorder process ------------------------------------------------------------------------

#: How often the recorder process looks for calls to record when it found none.
POLL_SECONDS = 0.1
#: How long a recorder process whose web process is gone goes on recording what waits (the
#: queue does not stall while a killed server is started again and its recorders start).
ORPHAN_SECONDS_MAX = 60.0


def background_priority() -> None:
    """Lower this process's CPU priority by ``CTXWEB_BACKGROUND_NICE`` (recorders and Celery
    workers: recording is background work, callers and health checks go first)."""
    if settings.CTXWEB_BACKGROUND_NICE > 0:
        try:
            os.nice(settings.CTXWEB_BACKGROUND_NICE)
        except OSError:
            logger.warning("recording: this process's priority could not be lowered")


def lanes_waiting(*, small_only: bool = False) -> list[str]:
    """The lanes with calls waiting, the lanes whose next call is big (at least
    ``CTXWEB_RECORDING_BIG_BYTES``) first; with ``small_only``, only the others."""
    heads: dict[str, int] = {}
    for lane, size in (
        PendingCall.objects.filter(state=PendingCall.PENDING)
        .order_by("pk")
        .values_list("lane", "size")
    ):
        heads.setdefault(lane, size)
    big = settings.CTXWEB_RECORDING_BIG_BYTES
    small = [lane for lane, size in heads.items() if size < big]
    if small_only:
        return small
    return [lane for lane, size in heads.items() if size >= big] + small[::-1]


def recorder_loop(
    *, parent: int | None = None, once: bool = False, small_only: bool = False
) -> int:
    """The recorder process (``manage.py record_calls``): record every lane's waiting calls, a
    slice per lane in turn, sweeping at its start and every ``CTXWEB_RECORDING_SWEEP_SECONDS``.
    With ``once``, it ends when nothing is left; when ``parent`` (the web process that started
    it) has ended, it goes on while calls wait, for at most :data:`ORPHAN_SECONDS_MAX` (the
    recorders of the process that replaces it share the queue meanwhile). With ``small_only``,
    it leaves lanes whose next call is big to the other recorders (a call of tens of MB takes
    seconds to record: the small lanes never wait behind it; the other recorders take big lanes
    first, then the small ones from the other end). Calls recorded."""
    done = 0
    swept = -1e9
    orphaned: float | None = None
    while True:
        if orphaned is None and parent is not None and os.getppid() != parent:
            orphaned = time.monotonic()
        if orphaned is not None and time.monotonic() - orphaned > ORPHAN_SECONDS_MAX:
            return done
        if time.monotonic() - swept > settings.CTXWEB_RECORDING_SWEEP_SECONDS:
            try:
                recordings_sweep()
            except Exception:
                logger.exception("recording: the sweep failed")
            swept = time.monotonic()
        try:
            lanes = lanes_waiting(small_only=small_only)
            for lane in lanes:
                done += recordings_drain(lane, small_only=small_only)
        except Exception:
            logger.exception("recording: the recorder failed; it goes on")
            lanes = []
        finally:
            close_old_connections()
        if not lanes:
            if once or orphaned is not None:
                return done
            time.sleep(POLL_SECONDS)


# --- in this process -----------------------------------------------------------------------------

_SWEEPER: threading.Thread | None = None


def recordings_start() -> None:
    """At a web process's start: in the embedded shape, start the recorder process and watch
    it (started again if it dies); else sweep at once (a call left by the process this one
    replaces is recorded now, not at the next periodic sweep; Celery beat sweeps from then on in
    the production shape). Nothing with ``threads`` (the test suite's recorders)."""
    global _SWEEPER
    if settings.CTXWEB_RECORDER == "threads":
        return  # the test suite's shape: its tests sweep when they mean to
    with _POOL_LOCK:
        if _SWEEPER is not None:
            return
        if settings.CTXWEB_RECORDER == "process":
            count = max(1, settings.CTXWEB_RECORDING_WORKERS)
            # With two or more, the first records small calls only (see recorder_loop).
            watchers = [
                threading.Thread(
                    target=_watch_recorder,
                    args=(n == 0 and count > 1,),
                    name=f"ctxweb-recorder-{n}",
                    daemon=True,
                )
                for n in range(count)
            ]
        else:
            watchers = [threading.Thread(target=_sweep_loop, name="ctxweb-sweep", daemon=True)]
        _SWEEPER = watchers[0]
    for watcher in watchers:
        watcher.start()


def _watch_recorder(small_only: bool) -> None:
    import subprocess
    import sys

    from ctxweb.datadir import BASE_DIR

    command = [sys.executable, str(BASE_DIR / "manage.py"), "record_calls"]
    if small_only:
        command.append("--small-only")
    while True:
        # A session of its own: Ctrl-C and a signal to the server's group are the server's; the
        # recorder ends when the server has (recorder_loop watches its parent).
        child = subprocess.Popen([*command, "--parent", str(os.getpid())], start_new_session=True)
        code = child.wait()
        logger.warning("recording: the recorder process ended (%s); starting it again", code)
        time.sleep(1)


def _sweep_loop() -> None:
    while True:
        try:
            recordings_sweep()
        except Exception:
            logger.exception("recording: the sweep failed")
        if settings.CTXWEB_RECORDING_CELERY:
            return  # beat sweeps from now on
        time.sleep(settings.CTXWEB_RECORDING_SWEEP_SECONDS)


def recordings_idle(timeout: float = 30) -> None:
    """Wait until every call relayed so far is recorded and this process's recorders are idle
    (tests, and a process shutting down)."""
    deadline = time.monotonic() + timeout

    def waiting() -> bool:
        return PendingCall.objects.exists() or recorders_busy()

    try:
        while waiting():
            if time.monotonic() > deadline:
                raise TimeoutError(f"calls still waiting to be recorded after {timeout:g}s")
            time.sleep(0.05)
    finally:
        close_old_connections()
