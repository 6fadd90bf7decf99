"""Prune and compact strategies: each seed agent's own, faithful by default, and ctxweb's.

Every strategy has a stable id, a description, its source and validated parameters, and a pure
``plan(context, params, *, counter, summarizer=None) -> Plan``.

Example:
    >>> [s.id for s in list_strategies()][:2]
    ['baseagent-prune', 'baseagent-middle-out']
"""

from __future__ import annotations

from compaction.strategies.base import (
    EDIT_KINDS,
    Artifact,
    Draft,
    Edit,
    EditKind,
    Param,
    ParamType,
    Plan,
    Strategy,
    make_artifact,
)
from compaction.strategies.registry import STRATEGIES, get_strategy, list_strategies

__all__ = [
    "EDIT_KINDS",
    "STRATEGIES",
    "Artifact",
    "Draft",
    "Edit",
    "EditKind",
    "Param",
    "ParamType",
    "Plan",
    "Strategy",
    "get_strategy",
    "list_strategies",
    "make_artifact",
]
