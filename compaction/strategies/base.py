"""What every strategy shares: parameters and their validation, edits, artifacts and plans.

A strategy is a named, parameterised prune or compact algorithm. :meth:`Strategy.plan` is pure: it
takes a :class:`~compaction.messages.model.Context`, returns a :class:`Plan` (ordered edits, the
resulting context, region totals before and after, warnings and the artifacts that keep whatever
was removed) and writes nothing.

Edits name positions in the *input* context: ``message_index`` is the index of the message in
``context.messages`` and ``part_index`` the index of the part in that message. The one exception
is ``insert-summary``: its ``message_index`` is where the summary sits in the *resulting* context,
or ``-1`` when the summary goes into the system prompt.

Example:
    >>> from compaction.strategies import get_strategy
    >>> plan = get_strategy("baseagent-prune").plan(context, {}, counter=counter)  # doctest: +SKIP
    >>> plan.after.total <= plan.before.total  # doctest: +SKIP
    True
"""

from __future__ import annotations

import hashlib
import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeAlias

from compaction.errors import StrategyError
from compaction.messages.model import Context, Message, Part, TextPart
from compaction.turns import is_configuration

if TYPE_CHECKING:
    from compaction.regions import RegionMemo, RegionTotals
    from compaction.summarizers import Summarizer
    from compaction.tokens import TokenCounter

__all__ = [
    "EDIT_KINDS",
    "Artifact",
    "Draft",
    "Edit",
    "EditKind",
    "Param",
    "ParamType",
    "Plan",
    "Strategy",
    "make_artifact",
]

EditKind: TypeAlias = Literal[
    "clear",
    "truncate",
    "externalize",
    "compact-inline",
    "summarize-range",
    "drop",
    "insert-summary",
]
EDIT_KINDS: tuple[EditKind, ...] = (
    "clear",
    "truncate",
    "externalize",
    "compact-inline",
    "summarize-range",
    "drop",
    "insert-summary",
)

ParamType: TypeAlias = Literal["int", "float", "bool", "str", "str-list"]


@dataclass(frozen=True)
class Param:
    """One parameter of a strategy: its type, default, range and allowed choices.

    ``default`` may be ``None`` for an optional parameter; ``None`` is then also accepted.

    Example:
        >>> Param("keep", "int", 3, min=0, help="tool uses to keep").check(5)
        5
    """

    name: str
    type: ParamType
    default: Any
    min: float | None = None
    max: float | None = None
    choices: tuple[Any, ...] | None = None
    help: str = ""

    def check(self, value: Any) -> Any:
        """Validate ``value`` and return it normalised; raise :class:`StrategyError` naming
        ``params.<name>``."""
        path = f"params.{self.name}"
        if value is None:
            if self.default is None:
                return None
            raise StrategyError(path, "must not be null")
        if self.type == "bool":
            if not isinstance(value, bool):
                raise StrategyError(path, "must be a boolean")
            return value
        if self.type == "int":
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise StrategyError(path, "must be an integer")
            if isinstance(value, float):
                if not value.is_integer():
                    raise StrategyError(path, "must be an integer")
                value = int(value)
            self._check_range(path, value)
            return value
        if self.type == "float":
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise StrategyError(path, "must be a number")
            value = float(value)
            if not math.isfinite(value):
                raise StrategyError(path, "must be a finite number")
            self._check_range(path, value)
            return value
        if self.type == "str":
            if not isinstance(value, str):
                raise StrategyError(path, "must be a string")
            if self.choices is not None and value not in self.choices:
                allowed = ", ".join(repr(c) for c in self.choices)
                raise StrategyError(path, f"must be one of {allowed}")
            return value
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
            raise StrategyError(path, "must be a list of strings")
        return tuple(value)

    def _check_range(self, path: str, value: float) -> None:
        if self.min is not None and value < self.min:
            raise StrategyError(path, f"must be at least {_num(self.min)}")
        if self.max is not None and value > self.max:
            raise StrategyError(path, f"must be at most {_num(self.max)}")

    def describe(self) -> dict[str, Any]:
        """The parameter as JSON-ready data, the shape of ``GET strategies``."""
        default = list(self.default) if isinstance(self.default, tuple) else self.default
        return {
            "name": self.name,
            "type": self.type,
            "default": default,
            "min": self.min,
            "max": self.max,
            "choices": list(self.choices) if self.choices is not None else None,
            "help": self.help,
        }


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


@dataclass(frozen=True)
class Edit:
    """One change a plan makes, in order.

    ``tokens_before`` and ``tokens_after`` are the counter's tokens of the touched message (or part)
    before and after the edit; ``artifact_id`` points at the artifact that keeps the original.
    """

    kind: EditKind
    message_index: int
    part_index: int | None
    tokens_before: int
    tokens_after: int
    detail: str
    artifact_id: str | None = None


@dataclass(frozen=True)
class Artifact:
    """Content taken out of a context, kept whole. ``id`` is the sha256 hex of ``content``.

    ``size`` is the content's UTF-8 byte length; ``tokens`` its tokens by the plan's counter.
    """

    id: str
    kind: str
    content: str
    size: int
    tokens: int
    summary: str


def make_artifact(kind: str, content: str, *, tokens: int, summary: str) -> Artifact:
    """Build a content-addressed :class:`Artifact`.

    Example:
        >>> make_artifact("tool_result", "x", tokens=1, summary="one x").id[:8]
        '2d711642'
    """
    raw = content.encode("utf-8")
    return Artifact(
        id=hashlib.sha256(raw).hexdigest(),
        kind=kind,
        content=content,
        size=len(raw),
        tokens=tokens,
        summary=summary,
    )


@dataclass(frozen=True)
class Plan:
    """What a strategy would do to one context. Computing it writes nothing."""

    strategy: str
    params: Mapping[str, Any]
    edits: tuple[Edit, ...]
    context: Context
    before: RegionTotals
    after: RegionTotals
    warnings: tuple[str, ...] = ()
    artifacts: tuple[Artifact, ...] = ()

    @property
    def tokens_saved(self) -> int:
        """Counted tokens before minus after (negative when the plan grows the context)."""
        return int(self.before.total) - int(self.after.total)


@dataclass
class Draft:
    """The mutable scratch pad a strategy fills while it runs; :meth:`Strategy.plan` freezes it.

    ``messages`` and ``system`` start as the input's; ``origin`` maps each current message to its
    index in the input (``None`` for messages the strategy inserted). ``pinned`` holds the
    input's configuration messages (:func:`compaction.turns.is_configuration`), which
    :meth:`Strategy.plan` sets aside before the run and puts back after it: a strategy never
    sees them in ``messages``, but :meth:`total_tokens` counts them.
    """

    context: Context
    counter: TokenCounter
    messages: list[Message] = field(default_factory=list)
    origin: list[int | None] = field(default_factory=list)
    system: tuple[Part, ...] = ()
    edits: list[Edit] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    artifacts: dict[str, Artifact] = field(default_factory=dict)
    pinned: tuple[Message, ...] = ()

    @classmethod
    def start(
        cls, context: Context, counter: TokenCounter, pinned: tuple[Message, ...] = ()
    ) -> Draft:
        """A draft holding ``context`` unchanged (``pinned``: configuration set aside)."""
        return cls(
            context=context,
            counter=counter,
            messages=list(context.messages),
            origin=list(range(len(context.messages))),
            system=context.system,
            pinned=pinned,
        )

    def tokens(self, message: Message) -> int:
        """The counter's tokens for ``message`` (cached by the counter)."""
        return int(self.counter.count_message(message).total)

    def total_tokens(self) -> int:
        """The draft's tokens as sent: the request overhead (the counter's ``REQUEST_OVERHEAD``,
        else the default), the system prompt, the tool definitions and every message."""
        from compaction.tokens import REQUEST_OVERHEAD

        counter = self.counter
        total = int(getattr(counter, "REQUEST_OVERHEAD", REQUEST_OVERHEAD))
        if self.system:
            total += counter.count_system(self.system)
        if self.context.tools:
            total += counter.count_tools(self.context.tools)
        total += sum(self.tokens(m) for m in self.pinned)
        return total + sum(self.tokens(m) for m in self.messages)

    def text_tokens(self, text: str) -> int:
        """The counter's tokens for a bare string."""
        return int(self.counter.count_text(text))

    def keep(self, kind: str, content: str, summary: str) -> Artifact:
        """Store ``content`` as an artifact (deduplicated by hash) and return it."""
        artifact = make_artifact(kind, content, tokens=self.text_tokens(content), summary=summary)
        self.artifacts.setdefault(artifact.id, artifact)
        return artifact

    def warn(self, text: str) -> None:
        """Add a warning once."""
        if text not in self.warnings:
            self.warnings.append(text)

    def record(
        self,
        kind: EditKind,
        message_index: int,
        part_index: int | None,
        before: int,
        after: int,
        detail: str,
        artifact_id: str | None = None,
    ) -> None:
        """Append an :class:`Edit`."""
        self.edits.append(Edit(kind, message_index, part_index, before, after, detail, artifact_id))

    def replace_message(
        self,
        position: int,
        new: Message,
        kind: EditKind,
        detail: str,
        *,
        part_index: int | None = None,
        artifact_id: str | None = None,
    ) -> None:
        """Swap the message at ``position`` (a current position) and record the edit."""
        old = self.messages[position]
        self.messages[position] = new
        origin = self.origin[position]
        self.record(
            kind,
            origin if origin is not None else position,
            part_index,
            self.tokens(old),
            self.tokens(new),
            detail,
            artifact_id,
        )

    def drop(
        self,
        positions: Sequence[int],
        kind: EditKind = "drop",
        detail: str = "dropped",
        *,
        keep_artifacts: bool = True,
    ) -> None:
        """Remove the messages at the current ``positions``, recording one edit each and keeping
        each removed message's text as an artifact."""
        doomed = set(positions)
        for position in sorted(doomed):
            message = self.messages[position]
            origin = self.origin[position]
            artifact_id = None
            if keep_artifacts:
                text = render_message(message)
                if text:
                    artifact_id = self.keep("message", text, f"{message.role} message").id
            self.record(
                kind,
                origin if origin is not None else position,
                None,
                self.tokens(message),
                0,
                detail,
                artifact_id,
            )
        self.messages = [m for i, m in enumerate(self.messages) if i not in doomed]
        self.origin = [o for i, o in enumerate(self.origin) if i not in doomed]

    def insert(self, position: int, message: Message, detail: str) -> None:
        """Insert a new message (a summary) at ``position`` and record ``insert-summary``."""
        self.messages.insert(position, message)
        self.origin.insert(position, None)
        self.record("insert-summary", position, None, 0, self.tokens(message), detail)

    def set_system(self, system: tuple[Part, ...], detail: str) -> None:
        """Replace the system prompt (a summary injected into it) and record the edit."""
        before = sum(self.text_tokens(p.text) for p in self.system if isinstance(p, TextPart))
        after = sum(self.text_tokens(p.text) for p in system if isinstance(p, TextPart))
        self.system = system
        self.record("insert-summary", -1, None, before, after, detail)

    def result(self) -> Context:
        """The resulting context."""
        return replace(self.context, messages=tuple(self.messages), system=self.system)


def render_message(message: Message) -> str:
    """A message as plain text: its text, tool calls as ``name(arguments)`` and tool results.

    Example:
        >>> render_message(Message("user", (TextPart("hi"),)))
        'hi'
    """
    from compaction.messages.model import ReasoningPart, ToolCallPart, ToolResultPart

    lines: list[str] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            lines.append(part.text)
        elif isinstance(part, ToolCallPart):
            lines.append(f"{part.name}({part.arguments})")
        elif isinstance(part, (ToolResultPart, ReasoningPart)):
            lines.append(part.text)
    return "\n".join(line for line in lines if line)


class Strategy(ABC):
    """A named, parameterised prune or compact algorithm with a pure :meth:`plan`.

    Subclasses set ``id``, ``description``, ``source`` and ``params`` and implement :meth:`run`.
    """

    id: ClassVar[str]
    description: ClassVar[str]
    source: ClassVar[str]
    params: ClassVar[tuple[Param, ...]] = ()

    def defaults(self) -> dict[str, Any]:
        """Every parameter at its default."""
        return {p.name: p.default for p in self.params}

    def validate(self, params: Mapping[str, Any] | None) -> dict[str, Any]:
        """Check ``params`` against :attr:`params`; missing ones take their default.

        Raises :class:`StrategyError` with path ``params.<name>`` for an unknown name or bad value.
        """
        if not isinstance(params, Mapping | None):
            raise StrategyError("params", "must be an object")
        given = dict(params or {})
        known = {p.name: p for p in self.params}
        for name in given:
            if name not in known:
                raise StrategyError(f"params.{name}", f"unknown parameter for '{self.id}'")
        resolved = {
            name: p.check(given[name]) if name in given else p.default for name, p in known.items()
        }
        self.check_together(resolved)
        return resolved

    def check_together(self, params: dict[str, Any]) -> None:  # noqa: B027
        """Constraints between parameters; raise :class:`StrategyError` when they conflict."""

    def describe(self) -> dict[str, Any]:
        """The strategy as JSON-ready data, the shape of ``GET strategies``."""
        return {
            "id": self.id,
            "description": self.description,
            "source": self.source,
            "params": [p.describe() for p in self.params],
        }

    def plan(
        self,
        context: Context,
        params: Mapping[str, Any] | None = None,
        *,
        counter: TokenCounter,
        summarizer: Summarizer | None = None,
        memo: RegionMemo | None = None,
    ) -> Plan:
        """Compute what this strategy would do to ``context``. Pure: writes nothing.

        Args:
            context: the context to plan on.
            params: parameter values by name; missing ones take their defaults.
            counter: the token counter for edits and region totals (it caches by content).
            summarizer: used by summarizing strategies; defaults to the offline
                :class:`~compaction.summarizers.FactSummarizer`.
            memo: the messages' regions already split with this counter's encoding, for a job
                that plans many contexts sharing their messages (a replay); a new one if None.
        """
        from compaction.regions import RegionMemo, context_regions

        resolved = self.validate(params)
        # One scope per plan: the run, the totals before and the totals after count the same
        # messages and texts, each counted once (the scope is dropped with the draft).
        counter = counter.scoped()
        # a cold context's texts encoded at once, on every core, before the run counts them
        counter.prime_context(context)
        pinned = [i for i, m in enumerate(context.messages) if is_configuration(m)]
        draft = _without(context, pinned, counter) if pinned else Draft.start(context, counter)
        self.run(draft, resolved, summarizer)
        result = draft.result()
        edits: Sequence[Edit] = draft.edits
        if pinned:
            result, edits = _put_back(context, pinned, draft)
        memo = memo if memo is not None else RegionMemo()
        before = context_regions(context, counter, memo=memo)
        after = context_regions(result, counter, memo=memo)
        if after.total > before.total:
            draft.warn(
                f"{self.id}: the result is {after.total - before.total} tokens larger than the"
                " input (what the seed adds outweighs what it removes)"
            )
        return Plan(
            strategy=self.id,
            params=resolved,
            edits=tuple(edits),
            context=result,
            before=before,
            after=after,
            warnings=tuple(draft.warnings),
            artifacts=tuple(draft.artifacts.values()),
        )

    @abstractmethod
    def run(self, draft: Draft, params: dict[str, Any], summarizer: Summarizer | None) -> None:
        """Fill ``draft`` with this strategy's edits, given validated ``params``."""


# --- configuration is not conversation --------------------------------------------------------


def _without(context: Context, pinned: Sequence[int], counter: TokenCounter) -> Draft:
    """A draft of ``context`` with its configuration messages (at ``pinned``) set aside."""
    aside = set(pinned)
    rest = tuple(m for i, m in enumerate(context.messages) if i not in aside)
    kept = tuple(context.messages[i] for i in pinned)
    return Draft.start(replace(context, messages=rest), counter, pinned=kept)


def _put_back(context: Context, pinned: Sequence[int], draft: Draft) -> tuple[Context, list[Edit]]:
    """The draft's result with the configuration messages back, each before the first message
    that came after it in the input (a message the strategy inserted, such as a summary, stands
    where the message after it came from), and the edits renumbered to the input's positions."""
    aside = set(pinned)
    rest = [i for i in range(len(context.messages)) if i not in aside]
    # where each result message came from in the whole input (a new one: the next one's place)
    anchors: list[float] = []
    following = math.inf
    for origin in reversed(draft.origin):
        if origin is not None:
            following = rest[origin]
        anchors.append(following)
    anchors.reverse()
    messages: list[Message] = []
    placed: list[int] = []  # the final position of each result message
    position = 0
    for index in pinned:
        while position < len(draft.messages) and anchors[position] < index:
            placed.append(len(messages))
            messages.append(draft.messages[position])
            position += 1
        messages.append(context.messages[index])
    for message in draft.messages[position:]:
        placed.append(len(messages))
        messages.append(message)
    edits = []
    for edit in draft.edits:
        if edit.kind == "insert-summary":
            if 0 <= edit.message_index < len(placed):
                edit = replace(edit, message_index=placed[edit.message_index])
        elif 0 <= edit.message_index < len(rest):
            edit = replace(edit, message_index=rest[edit.message_index])
        edits.append(edit)
    return replace(draft.result(), messages=tuple(messages)), edits
