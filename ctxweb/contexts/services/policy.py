"""A session's automatic policy: validated, set, and started when a turn crosses the compaction
trigger (:func:`operation_auto_after_turn`, which listens to ingestion's
:data:`~ctxweb.contexts.services.ingest.turn_stored`). The top of the services' stack: it builds on
operations, which build on planning, ingest and storage.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from django.db import transaction

from compaction.regions import Policy, budget
from compaction.strategies import get_strategy
from ctxweb.contexts import selectors
from ctxweb.contexts.models import Session, Turn
from ctxweb.contexts.services.operations import operation_create

logger = logging.getLogger(__name__)


def session_policy_validate(policy: Any) -> dict[str, Any]:
    """A session's policy, checked: ``{"auto": {"strategy", "params", "enabled"}}``.

    Only the parameters the operator gave are kept (checked against the strategy): the rest
    are resolved when the operation runs, the window and reserve from the session then
    (:func:`~ctxweb.contexts.services.planning.session_defaults`), so a policy never plans
    for a 200K window on a session whose model has 8K.
    Raises :class:`~compaction.errors.StrategyError` naming the field."""
    from compaction.errors import StrategyError

    if not isinstance(policy, Mapping):
        raise StrategyError("policy", "must be an object")
    out = dict(policy)
    auto = policy.get("auto")
    if auto is None:
        return out
    if not isinstance(auto, Mapping):
        raise StrategyError("policy.auto", "must be an object")
    if not isinstance(auto.get("enabled", True), bool):
        raise StrategyError("policy.auto.enabled", "must be a boolean")
    strategy = auto.get("strategy")
    if not isinstance(strategy, str):
        raise StrategyError("policy.auto.strategy", "must name a strategy")
    given = auto.get("params") or {}
    try:
        resolved = get_strategy(strategy).validate(given)
    except StrategyError as exc:
        raise StrategyError(f"policy.auto.{exc.path}", exc.reason) from None
    out["auto"] = {
        "strategy": strategy,
        "params": {
            k: list(v) if isinstance(v, tuple) else v for k, v in resolved.items() if k in given
        },
        "enabled": auto.get("enabled", True),
    }
    return out


def session_policy_set(*, session: Session, policy: Mapping[str, Any]) -> Session:
    """Replace the session's policy after validating it."""
    session.policy = session_policy_validate(policy)
    session.save(update_fields=["policy"])
    return session


def operation_auto_after_turn(
    *, session: Session, turn: Turn, previous_total: int | None, **_: Any
) -> None:
    """Start the session's automatic operation when ``turn`` crosses the compaction trigger and
    nothing is queued or running. Never raises into ingestion: problems are logged."""
    auto = (session.policy or {}).get("auto") if isinstance(session.policy, dict) else None
    if not isinstance(auto, dict) or not auto.get("enabled", True) or not auto.get("strategy"):
        return
    reserve = turn.max_output_tokens or session.output_reserve
    limits = budget(turn.context_window, reserve, Policy.ctxweb())
    if not limits.over_trigger(turn.total_tokens):
        return
    if previous_total is not None and limits.over_trigger(previous_total):
        return  # crossed earlier: one automatic operation per crossing
    if selectors.operation_active(session=session) is not None:
        return
    try:
        with transaction.atomic():
            operation_create(
                session=session,
                strategy=auto["strategy"],
                params=auto.get("params") or {},
                automatic=True,
            )
    except Exception:
        logger.exception("automatic operation of session %s not started", session.pk)
