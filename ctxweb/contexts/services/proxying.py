"""Recording what an unmodified agent sends through ctxweb's proxy (:mod:`ctxweb.proxy`): each
model call the proxy relayed becomes a turn, once the answer has gone back to the agent.

The session is the one the agent names (``X-Ctxweb-Session``); else a call whose messages extend a
recent call of the same key (its request and the answer it got) joins that call's session, so an
agent's main conversation stays one session while its side calls (titles, summaries with another
model) start sessions of their own, named by time. That memory is kept for an hour in the
database (:class:`~ctxweb.contexts.models.ProxyConversation`), so that every web process and
every recorder finds the conversation a call extends, across a restart too. Messages are compared
by what they say (``message_identity``): Claude Code moves its cache breakpoint to the newest
message on every call, Codex sends the provider's output items back without their ids and with
their keys in another order, and neither makes a new conversation.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import secrets
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from compaction.errors import FormatError
from compaction.messages import (
    message_identity,
    messages_key,
    parse,
    render,
    without_cache_markers,
)
from compaction.messages.incremental import ParseMemo, parse_incremental
from compaction.messages.model import Context, Message, Part
from compaction.regions import raw_region
from compaction.streams import provider_answer, stream_finished
from ctxweb.accounts.models import Project
from ctxweb.bodies import BadBody, TooLarge, inflate
from ctxweb.contexts import selectors
from ctxweb.contexts.models import ProxyConversation, ProxyMainCalls
from ctxweb.contexts.services._canonical import _same_message
from ctxweb.contexts.services._memory_sql import (
    conversation_remember_sql,
    conversations_remembered,
    main_calls_remember,
    main_calls_remembered,
)
from ctxweb.contexts.services._rewrites import (
    Rewrite,
    _rewrite_get,
    _rewrite_set,
    _rewrites_clear,
    _rewrites_forget,
)
from ctxweb.contexts.services._sql import _execute_in_order
from ctxweb.contexts.services.ingest import session_id_problem, turn_ingest

logger = logging.getLogger(__name__)

#: The proxy's sessions' ``source``.
SOURCE = "proxy"
#: How long a call can be extended by the next one and still join its session.
RECENT_SECONDS = 3600
#: Calls the proxy relayed but could not record (the call itself succeeded), since start.
failures = 0


def _hashes(format: str, request: dict[str, Any], extra: list[dict[str, Any]]) -> tuple[str, ...]:
    key = messages_key(format)
    items = list(request.get(key) or [])
    if isinstance(request.get(key), str):  # a Responses request's bare string input
        items = [{"role": "user", "content": request[key]}]
    context = parse(format, {**request, key: [*items, *extra]})
    return tuple(message_identity(m) for m in context.messages)


def _prefix_digests(hashes: Sequence[str]) -> list[str]:
    """The digest of each prefix of ``hashes``: item ``k - 1`` is that of ``hashes[:k]``."""
    digest = hashlib.blake2b(digest_size=16)
    digests = []
    for identity in hashes:
        digest.update(identity.encode())
        digest.update(b"\0")
        digests.append(digest.hexdigest())
    return digests


#: The last recorded call's messages and their identities, per key, named session (a key's
#: unnamed calls share one) and first message, at most :data:`IDENTITIES_KEPT` of them and
#: :data:`IDENTITIES_BYTES` of request bodies: a call repeats its conversation's previous call,
#: whose messages' identities are reused where the messages are the same (a comparison in C,
#: where an identity is the message's JSON written and hashed). A conversation of a few hundred
#: messages spent a third of its recording on identities. A call of more than a quarter of
#: the bytes is not kept; the messages kept hold their texts, about 1.3 times their bodies' size
#: in a recorder (a 0.9 MB chat request of 450 messages: 0.27 MB of objects besides its text).
_IDENTITIES: OrderedDict[tuple[int, str, str], tuple[tuple[Message, ...], tuple[str, ...], int]] = (
    OrderedDict()
)
_IDENTITIES_LOCK = threading.Lock()
IDENTITIES_KEPT = 64
IDENTITIES_BYTES = 16 * 1024 * 1024


def _identities(
    key_id: int, session: str | None, messages: Sequence[Message], size: int
) -> tuple[str, ...]:
    """The identities of ``messages`` (a call of ``size`` bytes), those the key's last call to
    ``session`` that began with the same message had in common with it reused
    (:data:`_IDENTITIES`). The first message tells apart a session's main calls from its side
    calls (a title, a summary), which come between them: each finds its own last call."""
    if not messages:
        return ()
    first = message_identity(messages[0])
    slot = (key_id, session or "", first)
    with _IDENTITIES_LOCK:
        known = _IDENTITIES.get(slot)
    same = 1
    if known is not None:
        before, identities, _ = known
        limit = min(len(messages), len(before))
        while same < limit and (
            messages[same] is before[same]  # reused by the parse (_parsed): the same object
            or _same_message(messages[same], before[same])
        ):
            same += 1
        reused = identities[:same]
    else:
        reused = (first,)
    found = reused + tuple(message_identity(m) for m in messages[same:])
    _keep(_IDENTITIES, slot, (tuple(messages), found, size))
    return found


def _keep(memory: OrderedDict[Any, Any], slot: Any, entry: tuple[Any, ...]) -> None:
    """Keep ``entry`` as ``slot``'s last call in ``memory`` (:data:`_IDENTITIES`,
    :data:`_PARSES`), its last item the call's size in bytes: a call of more than a quarter of
    :data:`IDENTITIES_BYTES` is not kept, and the oldest go past :data:`IDENTITIES_KEPT` calls
    or :data:`IDENTITIES_BYTES` in all."""
    if entry[-1] > IDENTITIES_BYTES // 4:
        return
    with _IDENTITIES_LOCK:
        memory.pop(slot, None)
        memory[slot] = entry
        held = sum(kept[-1] for kept in memory.values())
        while len(memory) > IDENTITIES_KEPT or held > IDENTITIES_BYTES:
            held -= memory.popitem(last=False)[1][-1]


#: The parse of the last recorded call, per key, named session, format and first message (its
#: JSON's digest, the request's as sent: a session's side calls begin otherwise), bounded as
#: :data:`_IDENTITIES`: the next call's messages that repeat it are taken from it, not parsed
#: again (:func:`~compaction.messages.incremental.parse_incremental` compares them first), and
#: are the very objects whose identities :func:`_identities` kept. A parse costs the whole
#: conversation's messages at every call, about a sixth of a long conversation's recording.
_PARSES: OrderedDict[tuple[int, str, str, bytes], tuple[ParseMemo, int]] = OrderedDict()


def _parsed(
    key_id: int, session: str | None, format: str, request: dict[str, Any], size: int
) -> Context:
    """``parse(format, request)`` (a call of ``size`` bytes), reusing the parse of the last call
    of the same slot (:data:`_PARSES`)."""
    items = request.get(messages_key(format))
    first = b""
    if isinstance(items, list) and items:
        try:
            written = json.dumps(items[0], ensure_ascii=False).encode()
            first = hashlib.blake2b(written, digest_size=16).digest()
        except (ValueError, RecursionError):  # the parse says what is wrong with it
            first = b"?"
    slot = (key_id, session or "", format, first)
    with _IDENTITIES_LOCK:
        known = _PARSES.get(slot)
    context, memo = parse_incremental(format, request, known[0] if known is not None else None)
    _keep(_PARSES, slot, (memo, size))
    return context


#: The prefixes of a call looked up first, its longest: a call extends its conversation's last
#: call by that call's answer and the agent's next messages (tool results, a user's message),
#: which are a few, and seldom more than this many.
NEAR_PREFIXES = 64
#: At most this many digests a query past those, and the most rows of a key's memory read whole
#: instead (a parameter a digest: SQLite takes at most 32,766 of them, PostgreSQL 65,535).
FAR_PREFIXES = 1024


def _joined(key_id: int, hashes: tuple[str, ...], *, external_id: str | None = None) -> str | None:
    """The session whose last call (request and answer) this call's messages extend: the
    longest remembered of the key (of the session ``external_id`` only, when named) within the
    last :data:`RECENT_SECONDS`, else None.

    A long session's call has thousands of prefixes, and it extends one of the last few: the
    memory is asked for the :data:`NEAR_PREFIXES` longest (one query). Only when none of them is
    remembered, the key's memory is read whole when it holds at most :data:`FAR_PREFIXES`
    conversations, else asked for the other prefixes :data:`FAR_PREFIXES` at a time, longest
    first: the answer is the one the longest remembered prefix gives."""
    digests = _prefix_digests(hashes)
    since = timezone.now() - timedelta(seconds=RECENT_SECONDS)

    def remembered(among: Sequence[str] | None, limit: int | None = None) -> dict[str, str]:
        return conversations_remembered(
            key_id, since, external_id=external_id, among=among, limit=limit
        )

    end = max(0, len(digests) - NEAR_PREFIXES)
    found = remembered(digests[end:])
    if not found and end:
        found = remembered(None, FAR_PREFIXES + 1)
        if len(found) > FAR_PREFIXES:  # too many to read whole: the older prefixes by chunks
            found = {}
            while end and not found:
                start = max(0, end - FAR_PREFIXES)
                found = remembered(digests[start:end])
                end = start
    if not found:
        return None
    return next((found[digest] for digest in reversed(digests) if digest in found), None)


#: What the main calls of a named session look like, by key and session: whether they send tool
#: definitions, and their system prompt's identity. A call naming the session that does not
#: extend it, sends no tools where its main calls do, and has another system prompt is a side
#: call (a title, a commit message, a summary with a small model): it goes to ``<name>/side``.
SIDE_SUFFIX = "/side"
#: How long the look of a named session's main calls is remembered.
MAIN_SECONDS = 24 * 3600


def _shape(context: Context) -> tuple[bool, str]:
    tools = bool(context.tools) or any(
        raw_region(part) == "tools" for message in context.messages for part in message.parts
    )
    return tools, message_identity(Message(role="system", parts=context.system))


def _session_for(
    key_id: int, session: str | None, hashes: tuple[str, ...], context: Context
) -> str | None:
    """The session a call goes to: the one it names (its side calls beside it, see
    :data:`_MAIN`), else the recent conversation of the same key it extends, else None."""
    return _session_and_main(key_id, session, hashes, context)[0]


def _session_and_main(
    key_id: int, session: str | None, hashes: tuple[str, ...], context: Context
) -> tuple[str | None, tuple[bool, str] | None]:
    """:func:`_session_for`, and the look of the named session's main calls as it read it."""
    if not session or session_id_problem(session) is not None:
        return _joined(key_id, hashes), None
    main = _main_shape(key_id, session)
    if main is None or _joined(key_id, hashes, external_id=session) is not None:
        return session, main
    tools, system = _shape(context)
    side = session + SIDE_SUFFIX
    if main[0] and not tools and system != main[1] and session_id_problem(side) is None:
        return side, main
    return session, main


def _main_shape(key_id: int, session: str) -> tuple[bool, str] | None:
    return main_calls_remembered(key_id, session, timezone.now() - timedelta(seconds=MAIN_SECONDS))


def _remember_main(
    key_id: int, external_id: str, context: Context, known: tuple[bool, str] | None
) -> None:
    """Remember what the named session's main calls look like (the first call, until one that
    sends tools); ``known``: what was remembered when the call's session was decided."""
    if known is not None and known[0]:
        return  # a main call that sends tools is remembered already: nothing can change it
    shape = _shape(context)
    if known is None or shape[0]:
        main_calls_remember(key_id, external_id, shape[0], shape[1], timezone.now())


def _remember_sql(
    key_id: int, external_id: str, hashes: tuple[str, ...]
) -> list[tuple[str, list[Any]]]:
    """The statement that remembers that ``hashes`` (a call's messages and its answer) are
    ``external_id``'s, for :data:`RECENT_SECONDS` (the next call that extends them joins it), to
    send with others; none when there is nothing to remember."""
    if not hashes:
        return []
    at = timezone.now()
    return [conversation_remember_sql(key_id, _prefix_digests(hashes)[-1], external_id, at)]


def proxy_memory_expire() -> int:
    """Forget conversations and main calls past their time (the recorders' sweep calls it)."""
    now = timezone.now()
    gone, _ = ProxyConversation.objects.filter(
        remembered_at__lt=now - timedelta(seconds=RECENT_SECONDS)
    ).delete()
    mains, _ = ProxyMainCalls.objects.filter(
        remembered_at__lt=now - timedelta(seconds=MAIN_SECONDS)
    ).delete()
    return gone + mains


def proxy_memory_clear() -> None:
    """Forget the managed rewrites and the identities this process remembers, as a new web
    process starts (tests start each so; the conversations are rows, which each test's database
    starts without)."""
    _rewrites_clear()
    with _IDENTITIES_LOCK:
        _IDENTITIES.clear()
        _PARSES.clear()


# --- managed mode: an operator's compaction reaches the agent's next call -----------------------


@dataclass
class Prepared:
    """A call about to be relayed: the body to send, its session, the agent's own messages (by
    identity, for the next call to join), and the events to record with it."""

    body: bytes
    session: str | None
    original: tuple[str, ...] = ()
    events: list[dict[str, Any]] = field(default_factory=list)


def _system_identity(system: Sequence[Part]) -> str | None:
    """What a top-level system prompt says (None when there is none), as stored turns' are read
    (:func:`~ctxweb.contexts.selectors.turn_system_identity`)."""
    if not system:
        return None
    return message_identity(Message("system", tuple(system)))


def _starts_with(hashes: Sequence[str], prefix: Sequence[str]) -> bool:
    return len(prefix) <= len(hashes) and tuple(hashes[: len(prefix)]) == tuple(prefix)


#: What preparing a managed call holds at its peak, in times its body's size: the body, its
#: parsed text, and the longest message's text twice more while it is decoded, while its identity
#: is computed (as JSON, then encoded) and while the rewritten request is encoded (measured with
#: tracemalloc on a 24 MB call). The relay admits preparations within
#: ``CTXWEB_PROXY_PREPARE_BYTES`` of this cost (:func:`proxy_prepare_cost`).
PREPARE_COST = 4


def proxy_prepare_cost(size: int) -> int:
    """The memory preparing a managed call whose body is ``size`` bytes takes at its peak."""
    return size * PREPARE_COST


def proxy_prepare(
    *,
    project: Project,
    key_id: int,
    format: str,
    body: bytes,
    session: str | None,
    managed: bool,
) -> Prepared:
    """Decide a call's session and, in managed mode, what to send instead of the agent's request.

    When an operator has applied an operation to the session and the request starts with the
    context that operation compacted, that start is replaced by the compacted context and the
    agent's newer messages follow it. Later calls, which still carry the agent's full history,
    get the same replacement (this process remembers it) until the operation is undone or the
    session deleted: every managed call checks that the remembered rewrite's session and
    operation are still there (:mod:`~ctxweb.contexts.services._rewrites`), so a session deleted
    through another process is never substituted again. A request that does not start with that
    context is sent unchanged, with a warning event on its turn.
    """
    try:
        request = json.loads(body)
        context = parse(format, request) if isinstance(request, dict) else None
    except (ValueError, RecursionError, FormatError):
        return Prepared(body, session)
    if context is None:
        return Prepared(body, session)
    hashes = tuple(message_identity(m) for m in context.messages)
    external_id = _session_for(key_id, session, hashes, context)
    prepared = Prepared(body, external_id, hashes)
    if not managed or external_id is None:
        return prepared
    key = (project.pk, external_id)
    stored = selectors.session_get(project=project, external_id=external_id)
    if stored is None:
        _rewrites_forget(project.pk, external_id)
        return prepared
    rewrite = _rewrite_get(key, session_pk=stored.pk)
    messages: list[Message] = list(context.messages)
    system = context.system
    own_system = _system_identity(context.system)
    stands_for = 0  # how many of the agent's messages the start of ``messages`` stands for
    if rewrite is not None and _starts_with(hashes, rewrite.original):
        messages = [*rewrite.replacement, *messages[len(rewrite.original) :]]
        stands_for = len(rewrite.original) - len(rewrite.replacement)
        if rewrite.system is not None and own_system == rewrite.original_system:
            system = rewrite.system
    # Only the version made since the latest turn is sent: the latest turn's own context (a
    # previous call, maybe of tens of megabytes) is never loaded here.
    state = selectors.managed_context_current(session=stored)
    if state is not None and state.operation_id is not None:
        base = selectors.turn_message_identities(session=stored, index=state.turn_index)
        current = [message_identity(m) for m in messages]
        if base and _starts_with(current, base):
            # the agent's own breakpoints, on its newer messages, are the only ones sent
            replacement = tuple(without_cache_markers(m) for m in state.context.messages)
            # The operation's system prompt (picoclaw keeps its summary there) replaces the
            # agent's while the agent's is the one the operation planned on.
            managed_system: tuple[Part, ...] | None = None
            if state.context.system != system and _system_identity(
                system
            ) == selectors.turn_system_identity(session=stored, index=state.turn_index):
                managed_system = state.context.system
            _rewrite_set(
                key,
                Rewrite(
                    stored.pk,
                    state.operation_id,
                    hashes[: len(base) + stands_for],
                    replacement,
                    own_system if managed_system is not None else None,
                    managed_system,
                ),
            )
            messages = [*replacement, *messages[len(base) :]]
            if managed_system is not None:
                system = managed_system
            prepared.events.append(
                {"type": "managed", "source": "proxy", "operation": state.operation_id}
            )
        else:
            prepared.events.append(
                {
                    "type": "warning",
                    "source": "proxy",
                    "message": f"managed mode: the request no longer starts with the context"
                    f" operation {state.operation_id} compacted; it was sent unchanged",
                }
            )
    elif rewrite is not None and _starts_with(hashes, rewrite.original):
        prepared.events.append(
            {"type": "managed", "source": "proxy", "operation": rewrite.operation_id}
        )
    if list(messages) != list(context.messages) or system != context.system:
        rewritten = Context(
            format=context.format,
            messages=tuple(messages),
            system=system,
            tools=context.tools,
            max_output_tokens=context.max_output_tokens,
            extra=context.extra,
        )
        prepared.body = json.dumps(render(rewritten)).encode()
    return prepared


# --- recording ----------------------------------------------------------------------------------


def proxy_answer_finished(format: str, received: bytes | bytearray) -> bool:
    """Whether a streamed answer to a ``format`` call holds the stream's last event: whole, and
    to be recorded, even if the connection ended before the stream did."""
    return stream_finished(format, received)


#: An answer is recorded when it inflates to at most this (the relay keeps as much of it).
ANSWER_LIMIT = 64 * 1024 * 1024


def _answer_inflated(body: bytes, content_encoding: str, compressed: bool) -> bytes:
    """``body`` decoded as its ``Content-Encoding`` says (codings undone last first).

    Raises:
        BadBody: an encoding the recorder does not read, or a body that is not whole.
        TooLarge: it inflates past :data:`ANSWER_LIMIT`.
    """
    codings = [
        coding.strip().lower()
        for coding in content_encoding.split(",")
        if coding.strip().lower() not in ("", "identity")
    ]
    if not codings and compressed:
        codings = ["gzip" if body.startswith(b"\x1f\x8b") else "deflate"]
    for coding in reversed(codings):
        body = inflate(body, coding, ANSWER_LIMIT)
    return body


def proxy_record(
    *,
    project: Project,
    key_id: int,
    format: str,
    request_body: bytes,
    response_body: bytes,
    streamed: bool,
    session: str | None = None,
    original: tuple[str, ...] = (),
    events: Sequence[dict[str, Any]] = (),
    compressed: bool = False,
    content_encoding: str = "",
    cut: bool = False,
    context_window: int | None = None,
    context_window_source: str | None = None,
    recorded: Callable[[], Sequence[tuple[str, Sequence[Any]]]] | None = None,
    one_transaction: bool = False,
) -> str | None:
    """Record one relayed call as a turn; its session's id, or None when it could not be
    recorded (counted in :data:`failures` and logged, and kept as an unread call: the call
    itself already succeeded).

    ``response_body`` is the answer as relayed, in its ``content_encoding`` (gzip, deflate or
    zstd, or several in the order applied; ``compressed`` without it: gzip or deflate, by its
    first bytes). An answer in another encoding, or one that does not inflate whole within
    :data:`ANSWER_LIMIT`, is an unread call, never a turn with no answer. ``original`` is the
    agent's own messages by identity when what was sent differs (managed mode): the next call,
    which extends the agent's history, joins by them.
    ``cut``: the answer ended before its end (its caller left, ctxweb stopped it, relaying it
    failed; an event of the call says so): the turn is recorded with what
    of the answer reads (none when it does not inflate or parse), and the conversation is
    remembered without it (the agent's next call may hold the answer whole, part of it, or none).
    ``context_window`` is the window the call itself selected (a model's 1M-context header), and
    ``context_window_source`` where that figure came from.

    ``recorded`` is called once the turn is written: the statements it returns (the deletion of
    the call's row in the queue) run with the memory of its conversation's, in one round trip
    where the driver batches statements; with ``one_transaction``, all of it is written in
    one transaction (a small call: SQLite's write lock taken once, and the turn and its row's
    deletion committed together). A big call's messages are counted before its turn's
    transaction opens instead (see :func:`turn_ingest`)."""
    global failures
    relayed = response_body
    try:
        try:
            response_body = _answer_inflated(response_body, content_encoding, compressed)
        except (BadBody, TooLarge):
            if not cut:
                raise
            response_body = b""  # a cut answer's compressed stream does not inflate whole
        request = json.loads(request_body)
        if not isinstance(request, dict):
            raise FormatError("request", "expected a JSON object")
        context = _parsed(key_id, session, format, request, len(request_body))
        answer = provider_answer(format, response_body, streamed=streamed)
        hashes = _identities(key_id, session, context.messages, len(request_body))
        external_id, main = _session_and_main(key_id, session, hashes, context)
        if external_id is None:
            stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
            external_id = f"proxy-{stamp}-{secrets.token_hex(3)}"
        try:
            answered = (
                ()
                if cut
                else _hashes(format, {**request, messages_key(format): []}, answer.messages)
            )
        except FormatError:
            answered = ()
        following = (original or hashes) + answered
        own = transaction.atomic() if one_transaction else None  # its commit may be folded
        with own if own is not None else contextlib.nullcontext():
            turn_ingest(
                project=project,
                external_id=external_id,
                context=context,
                model=str(request.get("model") or "") or None,
                response=answer.messages or None,
                usage=answer.usage,
                events=list(events),
                source=SOURCE,
                context_window=context_window,
                # one transaction with the memory's writes: a failure rolls back all of it
                savepoint=False,
                **(
                    {"context_window_source": context_window_source}
                    if context_window_source
                    else {}
                ),
            )
            if session and external_id == session:
                _remember_main(key_id, external_id, context, main)
            # The conversation remembered and what ``recorded`` has run with it: one round trip
            # where the driver batches statements.
            statements: list[tuple[str, Sequence[Any]]] = [
                *_remember_sql(key_id, external_id, following)
            ]
            if recorded is not None:
                statements += recorded()
            if statements:  # the transaction's last writes: its COMMIT may go with them
                with connection.cursor() as cursor:
                    _execute_in_order(cursor, statements, returning=False, commit=own)
        return external_id
    except Exception as error:
        failures += 1
        logger.exception("the proxy could not record a %s call", format)
        # Kept raw and shown on its session (or its project) all the same: never silently lost.
        from ctxweb.contexts.services.unread import unread_call_record

        try:
            named: str | None = external_id  # decided before the failure, if it came that late
        except NameError:
            named = session if session and session_id_problem(session) is None else None
        try:
            unread_call_record(
                project=project,
                session_external_id=named,
                format=format,
                request_body=request_body,
                response_body=relayed,
                streamed=streamed,
                compressed=compressed or bool(content_encoding),
                content_encoding=content_encoding,
                error=error,
            )
        except Exception:
            logger.exception("the proxy could not keep the unread %s call either", format)
        return None


__all__ = [
    "SIDE_SUFFIX",
    "SOURCE",
    "Prepared",
    "proxy_answer_finished",
    "proxy_memory_clear",
    "proxy_prepare",
    "proxy_prepare_cost",
    "proxy_record",
]
