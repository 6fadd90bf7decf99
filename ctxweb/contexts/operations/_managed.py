"""The managed context: what the agent should send next (the latest version while no turn
came after it, else the latest turn's context), and storing a new version.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from compaction.messages import Context
from ctxweb.contexts import selectors, services
from ctxweb.contexts.models import ManagedContext, Operation, Session


class NoContext(Exception):
    """The session has no turn yet, so no managed context."""


@dataclass(frozen=True)
class ManagedState:
    """What the agent should send next, and where it comes from.

    ``version`` is the session's latest managed context version (0 before any); ``current`` says
    whether that version is the context (no turn was posted since it was made), else the context
    is turn ``turn_index``'s. ``etag`` changes whenever the context may have.
    """

    context: Context
    version: int
    turn_index: int
    current: bool
    operation_id: int | None
    total_tokens: int

    @property
    def etag(self) -> str:
        return f'"v{self.version}.t{self.turn_index}"'


def managed_context(*, session: Session) -> ManagedState:
    """The session's managed context: its latest version while no turn came after it, else the
    latest turn's context. Raises :class:`NoContext` before the first turn."""
    latest_turn = selectors.turn_latest(session=session)
    if latest_turn is None:
        raise NoContext(session.external_id)
    managed = selectors.managed_context_latest(session=session)
    version = managed.version if managed is not None else 0
    if managed is not None and managed.turn_index >= latest_turn.index:
        return ManagedState(
            selectors.managed_context_context(managed=managed, session=session),
            version,
            managed.turn_index,
            True,
            managed.operation_id,
            managed.total_tokens,
        )
    return ManagedState(
        selectors.turn_context(turn=latest_turn),
        version,
        latest_turn.index,
        False,
        None,
        latest_turn.total_tokens,
    )


def _regions_of(
    *,
    session: Session,
    regions: Sequence[Mapping[str, int]],
    system: Any,
    toolset: Any,
) -> dict[str, int]:
    """A stored context's regions, added up from its rows as ingestion does."""
    from compaction.regions import sum_regions
    from compaction.tokens import REQUEST_OVERHEAD

    encoding = session.encoding
    return sum_regions(
        [
            {"system": REQUEST_OVERHEAD},
            system.counts[encoding]["regions"] if system else {},
            {"tools": toolset.counts[encoding]} if toolset else {},
            *regions,
        ]
    )


def _version_store(
    *, session: Session, context: Context, operation: Operation | None, turn_index: int
) -> ManagedContext:
    """Store ``context`` as the session's next managed context version (messages stored once,
    with ingestion's own helpers)."""
    project = session.project
    encoding = session.encoding
    stored = services._message_rows(project=project, messages=context.messages, encoding=encoding)
    system = services._system_row(project=project, context=context, encoding=encoding)
    toolset = services._toolset_row(project=project, context=context, encoding=encoding)
    regions = _regions_of(session=session, regions=stored.regions, system=system, toolset=toolset)
    latest = selectors.managed_context_latest(session=session)
    return ManagedContext.objects.create(
        session=session,
        version=(latest.version if latest is not None else 0) + 1,
        operation=operation,
        turn_index=turn_index,
        message_ids=list(stored.ids),
        system=system,
        toolset=toolset,
        request_extra=dict(context.extra),
        max_output_tokens=context.max_output_tokens,
        total_tokens=sum(regions.values()),
        regions=regions,
    )
