"""Claude Code session files (``~/.claude/projects/<project>/<session>.jsonl``).

Each line is a record: ``user`` and ``assistant`` records carry an Anthropic ``message`` and link
to their parent by ``parentUuid``; ``summary`` records are titles; ``system`` records include the
``compact_boundary`` that starts a compacted conversation; ``file-history-snapshot`` records are
ignored. One assistant response is often split over several records sharing ``message.id``.

Rebuilding: every record's conversation is its parent's plus its own message, so branches and
rewinds follow the ``parentUuid`` tree and consecutive turns share their message objects.
Consecutive user records merge into one user message (several tool results, as Claude Code sends
them); split assistant records merge into one response. Each distinct assistant ``message.id`` is
a turn whose context is the conversation before it. A compact boundary empties the conversation;
the compact summary that follows keeps ``isCompactSummary`` in ``Message.extra`` and the next turn
carries a ``compaction`` event. Sidechain records (sub-agents started by the Task tool) form one
session per sidechain root, ``<sessionId>:sidechain-<n>``. A conversation that ends on user
messages gets a last turn with no response: the call the agent was about to make. The file records
neither the system prompt nor the tool definitions: every turn marks both unknown.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from compaction.errors import FormatError
from compaction.messages.model import Context, Message, Part

from ._dialects import anthropic_message, anthropic_parts, anthropic_usage
from ._records import iter_jsonl, opt_str
from .model import ImportedSession, ImportedTurn

__all__ = ["parse"]

_UNKNOWN = frozenset({"system", "tools"})
_SessionKey = tuple[str, str | None]  # (sessionId, sidechain root uuid or None)


@dataclass(frozen=True)
class _Node:
    """The conversation as it stands after one record."""

    key: _SessionKey
    messages: tuple[Message, ...] = ()
    last_id: str | None = None  # message.id of the trailing assistant message
    events: tuple[Mapping[str, Any], ...] = ()  # markers waiting for the next turn


@dataclass
class _Draft:
    key: _SessionKey
    context: tuple[Message, ...]
    message: Message
    events: tuple[Mapping[str, Any], ...]
    model: str | None
    timestamp: str | None
    usage: dict[str, int] | None = None


@dataclass
class _Session:
    key: _SessionKey
    drafts: list[_Draft] = field(default_factory=list)
    last: _Node | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


def parse(data: bytes | str, *, name: str = "") -> list[ImportedSession]:
    """Parse a Claude Code session JSONL into its main session and one session per sub-agent.

    Example:
        >>> line = (
        ...     '{"type":"user","uuid":"u1","parentUuid":null,"sessionId":"s",'
        ...     '"message":{"role":"user","content":"hi"}}'
        ... )
        >>> [(s.external_id, len(s.turns)) for s in parse(line)]
        [('s', 1)]
    """
    nodes: dict[str, _Node] = {}
    sessions: dict[_SessionKey, _Session] = {}
    drafts: dict[tuple[_SessionKey, str], _Draft] = {}
    titles: list[str] = []

    for number, record in iter_jsonl(data):
        kind = record.get("type")
        if kind == "summary":
            if isinstance(record.get("summary"), str):
                titles.append(record["summary"])
            continue
        uuid = opt_str(record, "uuid")
        session_id = opt_str(record, "sessionId")
        if uuid is None or session_id is None:
            continue
        sidechain = bool(record.get("isSidechain"))
        parent = nodes.get(str(record.get("parentUuid") or record.get("logicalParentUuid") or ""))
        if parent is None or parent.key[0] != session_id:
            key: _SessionKey = (session_id, uuid if sidechain else None)
            base = _Node(key)
        else:
            key = parent.key
            base = parent
        session = sessions.get(key)
        if session is None:
            session = sessions[key] = _Session(key, metadata=_metadata(record))

        if kind == "system" and record.get("subtype") == "compact_boundary":
            node = _Node(key, (), None, (*base.events, _compaction_event(record)))
        elif kind == "user":
            node = _user(base, record, number)
        elif kind == "assistant" and not _synthetic(record):
            node = _assistant(base, record, number, session, drafts)
        else:
            node = base
        nodes[uuid] = node
        if node is not base or session.last is None:
            session.last = node

    return _build(sessions, titles)


def _metadata(record: Mapping[str, Any]) -> dict[str, Any]:
    return {k: record[k] for k in ("cwd", "version", "gitBranch") if isinstance(record.get(k), str)}


def _compaction_event(record: Mapping[str, Any]) -> dict[str, Any]:
    meta = record.get("compactMetadata")
    meta = meta if isinstance(meta, dict) else {}
    return {
        "type": "compaction",
        "source": "claude-code",
        "trigger": meta.get("trigger"),
        "pre_tokens": meta.get("preTokens"),
        "timestamp": record.get("timestamp"),
    }


def _synthetic(record: Mapping[str, Any]) -> bool:
    """Claude Code's own placeholder replies (API errors, "No response requested.")."""
    message = record.get("message")
    return bool(record.get("isApiErrorMessage")) or (
        isinstance(message, dict) and message.get("model") == "<synthetic>"
    )


def _user(base: _Node, record: Mapping[str, Any], number: int) -> _Node:
    extra = {"isCompactSummary": True} if record.get("isCompactSummary") else None
    message = anthropic_message(record.get("message"), f"line {number}.message", extra)
    messages = base.messages
    if messages and messages[-1].role == "user":
        last = messages[-1]
        merged = Message("user", last.parts + message.parts, extra={**last.extra, **message.extra})
        return _Node(base.key, (*messages[:-1], merged), None, base.events)
    return _Node(base.key, (*messages, message), None, base.events)


def _assistant(
    base: _Node,
    record: Mapping[str, Any],
    number: int,
    session: _Session,
    drafts: dict[tuple[_SessionKey, str], _Draft],
) -> _Node:
    raw = record.get("message")
    if not isinstance(raw, dict):
        raise FormatError(f"line {number}.message", "expected an object")
    parts: tuple[Part, ...] = anthropic_parts(raw.get("content"), f"line {number}.message.content")
    message_id = opt_str(raw, "id") or str(record["uuid"])
    usage = anthropic_usage(raw.get("usage"))
    draft = drafts.get((base.key, message_id))
    if draft is not None:
        # Another record of a response already seen: extend it.
        merged = Message("assistant", draft.message.parts + parts)
        draft.message = merged
        draft.usage = usage or draft.usage
        if base.last_id == message_id and base.messages:
            return _Node(base.key, (*base.messages[:-1], merged), message_id, ())
        return _Node(base.key, (*base.messages, Message("assistant", parts)), message_id, ())
    message = Message("assistant", parts)
    draft = _Draft(
        key=base.key,
        context=base.messages,
        message=message,
        events=base.events,
        model=opt_str(raw, "model"),
        timestamp=opt_str(record, "timestamp"),
        usage=usage,
    )
    drafts[(base.key, message_id)] = draft
    session.drafts.append(draft)
    return _Node(base.key, (*base.messages, message), message_id, ())


def _context(messages: tuple[Message, ...], model: str | None) -> Context:
    return Context("anthropic-messages", messages, extra={"model": model} if model else {})


def _build(sessions: dict[_SessionKey, _Session], titles: list[str]) -> list[ImportedSession]:
    result: list[ImportedSession] = []
    sidechains: dict[str, int] = {}
    for key, session in sessions.items():
        turns = [
            ImportedTurn(
                context=_context(d.context, d.model),
                response=(d.message,),
                usage=d.usage,
                unknown=_UNKNOWN,
                events=d.events,
                timestamp=d.timestamp,
            )
            for d in session.drafts
        ]
        models = [d.model for d in session.drafts if d.model]
        model = models[-1] if models else None
        last = session.last
        if last is not None and last.messages and last.messages[-1].role == "user":
            turns.append(
                ImportedTurn(
                    context=_context(last.messages, model), unknown=_UNKNOWN, events=last.events
                )
            )
        if not turns:
            continue
        session_id, root = key
        metadata = dict(session.metadata)
        if root is None:
            external_id = session_id
            if titles:
                metadata["titles"] = list(titles)
        else:
            sidechains[session_id] = sidechains.get(session_id, 0) + 1
            external_id = f"{session_id}:sidechain-{sidechains[session_id]}"
            metadata.update(parent_session=session_id, sidechain_root=root, sidechain=True)
        result.append(
            ImportedSession(
                external_id=external_id,
                model=model,
                format="anthropic-messages",
                turns=tuple(turns),
                source="claude-code",
                metadata=metadata,
            )
        )
    return result
