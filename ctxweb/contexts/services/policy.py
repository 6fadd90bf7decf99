"""A session's automatic policy: validated, set, and started when a turn crosses the compaction
trigger (:func:`operation_auto_after_turn`, which listens to ingestion's
:data:`~ctxweb.contexts.services.ingest.turn_stored`). The top of the services' stack: it builds on
operations, which build on planning, ingest and storage.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any

from django.db import transaction

from compaction.regions import budget
from compaction.strategies import get_strategy
from ctxweb.accounts.models import Project
from ctxweb.contexts import selectors
from ctxweb.contexts.models import Session, Turn
from ctxweb.contexts.services.operations import operation_create
from ctxweb.numbers import MAX_COUNT

logger = logging.getLogger(__name__)


#: A policy's keys, and those of its ``auto`` and ``trigger`` objects.
POLICY_KEYS = ("auto", "trigger")
AUTO_KEYS = ("strategy", "params", "enabled")
TRIGGER_KEYS = ("fraction", "tokens")
_SHAPE = (
    'a policy is {"auto": {"strategy", "params", "enabled"}, "trigger": {"fraction"} or {"tokens"}}'
)


def session_policy_validate(policy: Any) -> dict[str, Any]:
    """A session's policy, checked: ``{"auto": {"strategy", "params", "enabled"}, "trigger":
    {"fraction": f} | {"tokens": n}}``, both keys optional.

    ``auto`` applies ``strategy`` by itself when a turn crosses the trigger. Only the
    parameters the operator gave are kept (checked against the strategy): the rest are resolved
    when the operation runs, the window and reserve from the session then
    (:func:`~ctxweb.contexts.services.planning.session_defaults`), so a policy never plans
    for a 200K window on a session whose model has 8K. ``trigger`` is where it fires: a
    ``fraction`` of the usable window (above 0, at most 1) or a number of ``tokens``; without
    it, ctxweb's default (above 80% of usable).

    Any other key, or a value of the wrong type or range, raises
    :class:`~compaction.errors.StrategyError` naming the field (``policy.strategy``,
    ``policy.trigger.fraction``).

    Example:
        >>> session_policy_validate({"trigger": {"tokens": 150_000}})
        {'trigger': {'tokens': 150000}}
    """
    from compaction.errors import StrategyError

    if not isinstance(policy, Mapping):
        raise StrategyError("policy", "must be an object")
    for key in policy:
        if key not in POLICY_KEYS:
            hint = f" (policy.auto.{key}?)" if key in AUTO_KEYS else ""
            raise StrategyError(f"policy.{key}", f"unknown key{hint}: {_SHAPE}")
    out: dict[str, Any] = {}
    if "auto" in policy:
        out["auto"] = _auto_validate(policy["auto"])
    if policy.get("trigger") is not None:
        out["trigger"] = _trigger_validate(policy["trigger"])
    return out


def _auto_validate(auto: Any) -> dict[str, Any] | None:
    from compaction.errors import StrategyError

    if auto is None:
        return None
    if not isinstance(auto, Mapping):
        raise StrategyError("policy.auto", "must be an object")
    for key in auto:
        if key not in AUTO_KEYS:
            raise StrategyError(f"policy.auto.{key}", f"unknown key: {_SHAPE}")
    enabled = auto.get("enabled", True)
    if not isinstance(enabled, bool):
        raise StrategyError("policy.auto.enabled", "must be a boolean")
    strategy, params = policy_strategy_validate(
        auto.get("strategy"), auto.get("params"), path="policy.auto"
    )
    return {"strategy": strategy, "params": params, "enabled": enabled}


def policy_strategy_validate(
    strategy: Any, params: Any, *, path: str
) -> tuple[str, dict[str, Any]]:
    """``strategy`` and the ``params`` given for it, checked against the strategy (errors name
    ``<path>.strategy`` and ``<path>.params.<name>``): the id and the given parameters only, as
    JSON (the rest are resolved when the strategy runs, from the session it runs on)."""
    from compaction.errors import StrategyError

    if not isinstance(strategy, str):
        raise StrategyError(f"{path}.strategy", "must name a strategy")
    given = params
    if given is None:
        given = {}
    if not isinstance(given, Mapping):
        raise StrategyError(f"{path}.params", "must be an object")
    try:
        resolved = get_strategy(strategy).validate(given)
    except StrategyError as exc:
        raise StrategyError(f"{path}.{exc.path}", exc.reason) from None
    return strategy, {
        k: list(v) if isinstance(v, tuple) else v for k, v in resolved.items() if k in given
    }


def _trigger_validate(trigger: Any) -> dict[str, Any]:
    return policy_trigger_validate(trigger, path="policy.trigger")


def policy_trigger_validate(trigger: Any, *, path: str) -> dict[str, Any]:
    """A trigger, checked: ``{"fraction": f}`` (of usable, above 0 and at most 1) or
    ``{"tokens": n}``; errors name ``<path>`` and ``<path>.<key>``."""
    from compaction.errors import StrategyError

    if not isinstance(trigger, Mapping):
        raise StrategyError(path, 'must be an object: {"fraction"} or {"tokens"}')
    for key in trigger:
        if key not in TRIGGER_KEYS:
            raise StrategyError(
                f"{path}.{key}", 'unknown key: a trigger is {"fraction"} or {"tokens"}'
            )
    if len(trigger) != 1:
        raise StrategyError(path, 'one of "fraction" (of usable) or "tokens"')
    if "fraction" in trigger:
        fraction = trigger["fraction"]
        if (
            isinstance(fraction, bool)
            or not isinstance(fraction, int | float)
            or not math.isfinite(fraction)
            or not 0 < fraction <= 1
        ):
            raise StrategyError(
                f"{path}.fraction", "must be a number above 0 and at most 1 (of usable)"
            )
        return {"fraction": float(fraction)}
    tokens = trigger["tokens"]
    if isinstance(tokens, bool) or not isinstance(tokens, int) or not 1 <= tokens <= MAX_COUNT:
        raise StrategyError(f"{path}.tokens", f"must be a whole number, 1 to {MAX_COUNT}")
    return {"tokens": tokens}


def session_policy_set(*, session: Session, policy: Mapping[str, Any]) -> Session:
    """Replace the session's policy after validating it."""
    session.policy = session_policy_validate(policy)
    session.save(update_fields=["policy"])
    return session


def project_default_policy_set(*, project: Project, policy: Mapping[str, Any]) -> Project:
    """Replace the project's default policy (what its new sessions start with) after validating
    it as a session's (:func:`session_policy_validate`)."""
    project.default_policy = session_policy_validate(policy)
    project.save(update_fields=["default_policy"])
    return project


def operation_auto_after_turn(
    *, session: Session, turn: Turn, previous_total: int | None, **_: Any
) -> None:
    """Start the session's automatic operation when ``turn`` crosses the trigger of the session's
    policy (:func:`~ctxweb.contexts.selectors.session_policy`) and nothing is queued or
    running. Never raises into ingestion: problems are logged."""
    auto = (session.policy or {}).get("auto") if isinstance(session.policy, dict) else None
    if not isinstance(auto, dict) or not auto.get("enabled", True) or not auto.get("strategy"):
        return
    reserve = turn.max_output_tokens or session.output_reserve
    limits = budget(turn.context_window, reserve, selectors.session_policy(session))
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
