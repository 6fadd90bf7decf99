"""Storing a new managed context version (reading one is
:mod:`ctxweb.contexts.selectors.managed`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from compaction.messages import Context
from ctxweb.contexts import selectors
from ctxweb.contexts.models import ManagedContext, Operation, Session
from ctxweb.contexts.services import storage


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
    stored = storage.message_rows(project=project, messages=context.messages, encoding=encoding)
    system = storage.system_row(project=project, context=context, encoding=encoding)
    toolset = storage.toolset_row(project=project, context=context, encoding=encoding)
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
