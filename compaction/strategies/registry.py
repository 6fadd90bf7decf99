"""The strategy registry: every strategy by its stable id, in docs/design.md §5 order."""

from __future__ import annotations

from types import MappingProxyType

from compaction.errors import StrategyError
from compaction.strategies.anthropic_clear import AnthropicClearToolUses
from compaction.strategies.base import Strategy
from compaction.strategies.baseagent import BaseAgentCompact, BaseAgentMiddleOut, BaseAgentPrune
from compaction.strategies.codex import CodexCompact
from compaction.strategies.copaw import CopawCompact
from compaction.strategies.ctxweb_auto import CtxwebAuto
from compaction.strategies.llm4s import Llm4sPipeline
from compaction.strategies.nanobot import NanobotTrim
from compaction.strategies.opencode import OpencodePrune
from compaction.strategies.picoclaw import PicoclawForceCompress, PicoclawSummarize, PicoclawTrim

__all__ = ["STRATEGIES", "get_strategy", "list_strategies"]

_ALL: tuple[Strategy, ...] = (
    BaseAgentPrune(),
    BaseAgentMiddleOut(),
    BaseAgentCompact(),
    OpencodePrune(),
    CodexCompact(),
    PicoclawSummarize(),
    PicoclawForceCompress(),
    PicoclawTrim(),
    Llm4sPipeline(),
    NanobotTrim(),
    CopawCompact(),
    AnthropicClearToolUses(),
    CtxwebAuto(),
)

#: Every strategy by id, read-only.
STRATEGIES = MappingProxyType({s.id: s for s in _ALL})


def get_strategy(strategy_id: str) -> Strategy:
    """The strategy with this id; :class:`StrategyError` on path ``strategy`` if unknown.

    Example:
        >>> get_strategy("nanobot-trim").source
        'nanobot'
    """
    try:
        return STRATEGIES[strategy_id]
    except (KeyError, TypeError):
        raise StrategyError("strategy", f"unknown strategy '{strategy_id}'") from None


def list_strategies() -> tuple[Strategy, ...]:
    """Every strategy, in the design's order."""
    return _ALL
