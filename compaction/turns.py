"""User turns, safe cut points and tool-pair integrity over a normalized message list.

Every strategy that cuts history goes through these functions, so none of them ever splits a user
turn by accident or leaves a tool call without its result (or a result without its call).

The seeds' own helpers are reproduced with their exact semantics:

- :func:`parse_turn_boundaries`, :func:`is_safe_boundary`, :func:`find_safe_boundary` and
  :func:`sanitize_history_for_provider` are picoclaw's (``pkg/agent/context_budget.go`` and
  ``context.go``; ``docs/seed-strategies.md`` §2.3, §2.4);
- :func:`find_legal_start` is nanobot's ``Session._find_legal_start`` (§4.3).

**Tool results in user messages.** In the OpenAI Chat format a tool result is a ``role="tool"``
message carrying one :class:`~compaction.messages.model.ToolResultPart`. In Anthropic's Messages
format tool results arrive as ``tool_result`` blocks inside a ``role="user"`` message, and such a
message is the tool's answer, not a human speaking. Every function here therefore treats a user
message that carries at least one ``ToolResultPart`` as a *tool-result message*: it is never a
user-turn start or a safe boundary, and it is validated like picoclaw's tool messages. "At least
one", not "only": Claude Code appends text (system reminders, a user's interjection) beside the
results, and cutting before such a message would still orphan its results. When the sanitizer has
to drop a result from such a message it removes the ``ToolResultPart`` only; the message survives
as a plain user message if other parts remain (a ``role="tool"`` message is dropped whole).

Example:
    >>> from compaction.messages.model import Message, TextPart
    >>> u = Message("user", (TextPart("hi"),))
    >>> a = Message("assistant", (TextPart("hello"),))
    >>> parse_turn_boundaries([u, a, u, a])
    [0, 2]
    >>> find_safe_boundary([u, a, u, a, u], 3)
    2
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from compaction.messages.model import Message, ToolResultPart

__all__ = [
    "OrphanRef",
    "Orphans",
    "ToolPair",
    "ToolScan",
    "find_legal_start",
    "find_safe_boundary",
    "has_tool_calls",
    "is_configuration",
    "is_safe_boundary",
    "is_tool_result_message",
    "is_user_turn_start",
    "orphans",
    "parse_turn_boundaries",
    "result_ids",
    "sanitize_history_for_provider",
    "tool_pairs",
    "tool_scan",
    "user_turns",
]


# --- message kinds ----------------------------------------------------------------------------


def is_tool_result_message(message: Message) -> bool:
    """Whether ``message`` answers tool calls: a ``tool`` message, or a user message with results.

    Example:
        >>> from compaction.messages.model import Message, ToolResultPart
        >>> is_tool_result_message(Message("user", (ToolResultPart("t1", ()),)))
        True
    """
    if message.role == "tool":
        return True
    return message.role == "user" and any(isinstance(p, ToolResultPart) for p in message.parts)


def is_configuration(message: Message) -> bool:
    """Whether ``message`` configures the model rather than converses with it: a system or
    developer message wherever it sits (Claude Code's agent and skill lists, Codex's permission
    notes and ``additional_tools`` item), or an item of a role no adapter knows. No strategy
    summarizes, moves or removes one (:meth:`compaction.strategies.Strategy.plan` sets them aside).

    Example:
        >>> from compaction.messages.model import Message, TextPart
        >>> is_configuration(Message("developer", (TextPart("sandbox: read-only"),)))
        True
        >>> is_configuration(Message("user", (TextPart("hi"),)))
        False
    """
    return message.role in ("system", "developer")


def is_user_turn_start(message: Message) -> bool:
    """Whether ``message`` starts a user turn: a user message that is not a tool-result message."""
    return message.role == "user" and not is_tool_result_message(message)


def has_tool_calls(message: Message) -> bool:
    """Whether ``message`` is an assistant message with at least one tool call."""
    return message.role == "assistant" and bool(message.tool_calls)


def result_ids(message: Message) -> tuple[str, ...]:
    """The tool-call ids ``message`` answers, in order.

    A ``tool`` message without a ``ToolResultPart`` (malformed input) answers the empty id, so
    the sanitizer drops it the way picoclaw drops a tool message with an empty ``ToolCallID``.
    """
    ids = tuple(p.tool_call_id for p in message.tool_results)
    if message.role == "tool" and not ids:
        return ("",)
    return ids


# --- user turns (picoclaw) --------------------------------------------------------------------


def parse_turn_boundaries(messages: Sequence[Message]) -> list[int]:
    """Indexes of every user-turn start (picoclaw's ``parseTurnBoundaries``).

    Leading non-user messages belong to no turn.

    Example:
        >>> from compaction.messages.model import Message, TextPart
        >>> a = Message("assistant", (TextPart("ok"),))
        >>> parse_turn_boundaries([a, Message("user", (TextPart("q"),)), a])
        [1]
    """
    return [i for i, m in enumerate(messages) if is_user_turn_start(m)]


def user_turns(messages: Sequence[Message]) -> list[range]:
    """The user turns as index ranges: a user message up to (not including) the next one.

    Example:
        >>> from compaction.messages.model import Message, TextPart
        >>> u, a = Message("user", (TextPart("q"),)), Message("assistant", (TextPart("r"),))
        >>> user_turns([a, u, a, u])
        [range(1, 3), range(3, 4)]
    """
    starts = parse_turn_boundaries(messages)
    ends = [*starts[1:], len(messages)]
    return [range(s, e) for s, e in zip(starts, ends, strict=False)]


def is_safe_boundary(messages: Sequence[Message], index: int) -> bool:
    """Whether cutting before ``index`` keeps whole turns (picoclaw's ``isSafeBoundary``).

    True at or beyond either end, else only at a user-turn start.
    """
    if index <= 0 or index >= len(messages):
        return True
    return is_user_turn_start(messages[index])


def find_safe_boundary(messages: Sequence[Message], target: int) -> int:
    """The safe cut nearest ``target`` (picoclaw's ``findSafeBoundary``).

    The last turn start at or before ``target`` is used only if it is above 0; otherwise the
    first turn start after ``target``; otherwise 0 (a single turn cannot be split). With no user
    message at all, ``target`` is returned unchanged, as picoclaw does.

    Example:
        >>> from compaction.messages.model import Message, TextPart, ToolCallPart, ToolResultPart
        >>> u, a = Message("user", (TextPart("q"),)), Message("assistant", (TextPart("r"),))
        >>> tc = Message("assistant", (ToolCallPart("c", "f", "{}"),))
        >>> t = Message("tool", (ToolResultPart("c", ()),))
        >>> find_safe_boundary([u, tc, t, tc, t, a, u, a], 3)
        6
    """
    n = len(messages)
    if n == 0 or target <= 0:
        return 0
    if target >= n:
        return n
    turns = parse_turn_boundaries(messages)
    if not turns:
        return target
    backward = max((b for b in turns if b <= target), default=0)
    if backward > 0:
        return backward
    return next((b for b in turns if b > target), 0)


# --- tool pairs -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolPair:
    """A tool call and the result that answers it, by message index."""

    id: str
    call_index: int
    result_index: int


@dataclass(frozen=True)
class OrphanRef:
    """One side of a tool pair whose other side is missing: the id and the message index."""

    id: str
    index: int


@dataclass(frozen=True)
class Orphans:
    """Tool calls without a later result, and tool results without an earlier call."""

    calls: tuple[OrphanRef, ...] = ()
    results: tuple[OrphanRef, ...] = ()

    @property
    def ok(self) -> bool:
        """Whether nothing is orphaned."""
        return not self.calls and not self.results


def _walk(
    messages: Sequence[Message],
    begin: int,
    pending: dict[str, list[int]],
    pairs: list[ToolPair],
    orphan_results: list[OrphanRef],
) -> None:
    """Pair ``messages[begin:]``'s calls and results, ``pending`` holding the calls still
    unanswered before ``begin``; updates the three collections."""
    # A result answers the oldest still-unanswered call with its id, so an id that a client
    # reuses in a later turn (picoclaw's "call_0" test) pairs up turn by turn.
    for i in range(begin, len(messages)):
        message = messages[i]
        if message.role == "assistant":
            for call in message.tool_calls:
                pending.setdefault(call.id, []).append(i)
        if is_tool_result_message(message):
            for rid in result_ids(message):
                waiting = pending.get(rid)
                if waiting:
                    pairs.append(ToolPair(rid, waiting.pop(0), i))
                else:
                    orphan_results.append(OrphanRef(rid, i))


def _unanswered(pending: dict[str, list[int]]) -> tuple[OrphanRef, ...]:
    return tuple(
        sorted(
            (OrphanRef(cid, i) for cid, idxs in pending.items() for i in idxs),
            key=lambda ref: (ref.index, ref.id),
        )
    )


def _match(messages: Sequence[Message]) -> tuple[list[ToolPair], Orphans]:
    pending: dict[str, list[int]] = {}
    pairs: list[ToolPair] = []
    orphan_results: list[OrphanRef] = []
    _walk(messages, 0, pending, pairs, orphan_results)
    return pairs, Orphans(_unanswered(pending), tuple(orphan_results))


def tool_pairs(messages: Sequence[Message]) -> list[ToolPair]:
    """Every matched tool call and result, in the order the results appear.

    Example:
        >>> from compaction.messages.model import Message, ToolCallPart, ToolResultPart
        >>> tc = Message("assistant", (ToolCallPart("c1", "f", "{}"),))
        >>> tool_pairs([tc, Message("tool", (ToolResultPart("c1", ()),))])
        [ToolPair(id='c1', call_index=0, result_index=1)]
    """
    return _match(messages)[0]


def orphans(messages: Sequence[Message]) -> Orphans:
    """Calls with no later result and results with no earlier call, with their message indexes.

    A strategy's output must have ``orphans(out).ok``; providers reject either kind.
    """
    return _match(messages)[1]


@dataclass(frozen=True)
class ToolScan:
    """Where the tool-pair scan stands after a context's first ``count`` messages, so that a
    context extending them is checked for orphans by scanning only what it adds
    (:func:`tool_scan`). Pairing is the one :func:`orphans` does.

    Attributes:
        count: how many leading messages were scanned.
        pending: call ids still waiting for a result, each with the indexes of its calls, by id.
        results: results that found no call.
    """

    count: int = 0
    pending: tuple[tuple[str, tuple[int, ...]], ...] = ()
    results: tuple[OrphanRef, ...] = ()

    @property
    def orphans(self) -> Orphans:
        """The orphans of the scanned messages, as :func:`orphans` gives them."""
        return Orphans(_unanswered({cid: list(idxs) for cid, idxs in self.pending}), self.results)


def tool_scan(messages: Sequence[Message], start: ToolScan | None = None) -> ToolScan:
    """Scan ``messages`` for tool pairs, continuing from ``start`` (the scan of their first
    ``start.count`` messages, which are not looked at again).

    ``tool_scan(messages).orphans == orphans(messages)``, and for any ``k``,
    ``tool_scan(messages, tool_scan(messages[:k]))`` equals ``tool_scan(messages)``.

    Example:
        >>> from compaction.messages.model import Message, ToolCallPart, ToolResultPart
        >>> call = Message("assistant", (ToolCallPart("c1", "f", "{}"),))
        >>> first = tool_scan([call])
        >>> first.orphans.ok
        False
        >>> tool_scan([call, Message("tool", (ToolResultPart("c1", ()),))], first).orphans.ok
        True
    """
    begin = start.count if start is not None else 0
    pending: dict[str, list[int]] = {
        cid: list(idxs) for cid, idxs in (start.pending if start is not None else ())
    }
    results = list(start.results) if start is not None else []
    _walk(messages, begin, pending, [], results)
    return ToolScan(
        max(begin, len(messages)),
        tuple(sorted((cid, tuple(idxs)) for cid, idxs in pending.items() if idxs)),
        tuple(results),
    )


# --- nanobot ----------------------------------------------------------------------------------


def find_legal_start(messages: Sequence[Message]) -> int:
    """The first index after which every tool result has its call (nanobot's ``_find_legal_start``).

    Scan forward collecting the call ids of assistant messages; at a result whose id was not
    declared since the last reset, the start moves past it and the declared set is cleared. A
    result with an empty id is ignored, as nanobot's ``if tid and ...`` does. Dangling calls
    are not handled (nanobot's front-only trimming cannot create them).

    Example:
        >>> from compaction.messages.model import Message, TextPart, ToolResultPart
        >>> t = Message("tool", (ToolResultPart("gone", ()),))
        >>> find_legal_start([t, Message("user", (TextPart("q"),))])
        1
    """
    declared: set[str] = set()
    start = 0
    for i, message in enumerate(messages):
        if message.role == "assistant":
            declared.update(call.id for call in message.tool_calls if call.id)
        elif is_tool_result_message(message) and any(
            rid and rid not in declared for rid in result_ids(message)
        ):
            start = i + 1
            declared = set()
    return start


# --- picoclaw's sanitizer ---------------------------------------------------------------------


def _keep_results(message: Message, accept: Callable[[str], bool]) -> Message | None:
    """``message`` with only the tool results ``accept`` lets through (called once per part, in
    order), or None when nothing worth sending is left: a ``tool`` message without results, or a
    message without parts. A user message keeps its other parts."""
    parts = tuple(
        p for p in message.parts if not isinstance(p, ToolResultPart) or accept(p.tool_call_id)
    )
    if not parts:
        return None
    if message.role == "tool" and not any(isinstance(p, ToolResultPart) for p in parts):
        return None
    return message if parts == message.parts else replace(message, parts=parts)


def _drop_results(message: Message) -> Message | None:
    return _keep_results(message, lambda _id: False)


def _pass_one(messages: Sequence[Message]) -> list[Message]:
    out: list[Message] = []
    for message in messages:
        # picoclaw builds its own system message; developer is OpenAI's name for the same thing.
        if message.role in ("system", "developer"):
            continue
        if is_tool_result_message(message):
            nearest = next((m for m in reversed(out) if not is_tool_result_message(m)), None)
            if nearest is not None and has_tool_calls(nearest):
                out.append(message)
            elif (rest := _drop_results(message)) is not None:
                out.append(rest)
            continue
        if has_tool_calls(message) and (not out or out[-1].role not in ("user", "tool")):
            continue
        out.append(message)
    return out


def _pass_two(messages: list[Message]) -> list[Message]:
    out: list[Message] = []
    i = 0
    while i < len(messages):
        message = messages[i]
        if not has_tool_calls(message):
            if not is_tool_result_message(message):
                out.append(message)
            elif (rest := _drop_results(message)) is not None:
                out.append(rest)
            i += 1
            continue
        expected = frozenset(call.id for call in message.tool_calls)
        seen: set[str] = set()

        def accept(rid: str, expected: frozenset[str] = expected, seen: set[str] = seen) -> bool:
            if not rid or rid not in expected or rid in seen:
                return False
            seen.add(rid)
            return True

        end = i + 1
        while end < len(messages) and is_tool_result_message(messages[end]):
            end += 1
            if any(not isinstance(p, ToolResultPart) for p in messages[end - 1].parts):
                # text beside its results reads as a user message after them (as picoclaw sees
                # tool messages then a user one): what follows is not contiguous to the calls
                break
        block = [_keep_results(m, accept) for m in messages[i + 1 : end]]
        if "" not in expected and seen == expected:
            out.append(message)
            out.extend(m for m in block if m is not None)
        else:
            dropped = (_drop_results(m) for m in messages[i + 1 : end])
            out.extend(m for m in dropped if m is not None)
        i = end
    return out


def sanitize_history_for_provider(messages: Sequence[Message]) -> list[Message]:
    """picoclaw's ``sanitizeHistoryForProvider``: a history every provider accepts.

    Pass 1 drops system (and developer) messages; a tool-result message whose nearest
    non-tool-result predecessor is not an assistant with tool calls (a leading one included);
    and an assistant with tool calls that comes first or whose predecessor is neither a user nor
    a tool message. Pass 2 takes each assistant with tool calls and its contiguous tool-result
    messages: inside that block results with an empty id, an unexpected id or a repeated id are
    dropped; if a call id is empty or an expected result is missing, the assistant and its
    whole block go. Any remaining stray tool-result message is dropped. A user message holding
    text beside its results ends the block (its text reads as a user message after them), so
    sanitizing twice changes nothing.

    Results inside a user message are removed as parts (see the module docstring). The input is
    not modified.

    Example:
        >>> from compaction.messages.model import Message, TextPart, ToolResultPart
        >>> u = Message("user", (TextPart("q"),))
        >>> stray = Message("tool", (ToolResultPart("x", ()),))
        >>> [m.role for m in sanitize_history_for_provider([u, stray])]
        ['user']
    """
    if not messages:
        return []
    return _pass_two(_pass_one(messages))
