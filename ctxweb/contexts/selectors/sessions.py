"""Reads of sessions: a project's list (filtered, sorted), one by id, one a user may see."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from django.db.models import QuerySet

from compaction.regions import REGIONS as REGIONS  # re-exported: the chart draws them in order
from compaction.regions import USED_REGIONS as USED_REGIONS
from compaction.regions import Budget, Policy, budget
from ctxweb.accounts.models import Project
from ctxweb.contexts.models import (
    Session,
    Turn,
)

SESSION_SORTS = {
    "recent": "-last_activity_at",
    "-recent": "last_activity_at",
    "fill": "last_fill",
    "-fill": "-last_fill",
    "turns": "turn_count",
    "-turns": "-turn_count",
    "name": "external_id",
    "-name": "-external_id",
}


def session_list(
    *,
    project: Project,
    search: str = "",
    model: str = "",
    min_fill: float | None = None,
    max_fill: float | None = None,
    sort: str = "recent",
) -> QuerySet[Session]:
    """The project's sessions, filtered and sorted (``recent``, ``fill``, ``turns``, ``name``;
    a leading ``-`` reverses)."""
    sessions = Session.objects.filter(project=project)
    if search:
        sessions = sessions.filter(external_id__icontains=search)
    if model:
        sessions = sessions.filter(model=model)
    if min_fill is not None:
        sessions = sessions.filter(last_fill__gte=min_fill)
    if max_fill is not None:
        sessions = sessions.filter(last_fill__lte=max_fill)
    return sessions.order_by(SESSION_SORTS.get(sort, "-last_activity_at"), "-id")


def session_any(*, project: Project) -> bool:
    """Whether the project has any session."""
    return Session.objects.filter(project=project).exists()


def session_get(*, project: Project, external_id: str) -> Session | None:
    """The project's session ``external_id``, or None (never another project's)."""
    return Session.objects.filter(project=project, external_id=external_id).first()


def session_for_user(*, user: Any, external_id: str, project_id: int | None) -> Session | None:
    """Session ``external_id`` of a project ``user`` is a member of (``project_id`` when given,
    else the first by name holding such a session), or None."""
    if user is None or not getattr(user, "is_authenticated", False):
        return None
    sessions = Session.objects.filter(
        external_id=external_id, project__memberships__user=user
    ).order_by("project__name")
    if project_id is not None:
        sessions = sessions.filter(project_id=project_id)
    return sessions.first()


def session_watchable(*, user_id: int, session_id: int) -> bool:
    """Whether the user is still active and a member of the session's project (an open socket
    asks, to close when the answer turns no)."""
    return Session.objects.filter(
        pk=session_id,
        project__memberships__user_id=user_id,
        project__memberships__user__is_active=True,
    ).exists()


#: ctxweb's default policy: the trigger of a session whose policy sets none (drawn on the
#: chart), and the one that colours fill levels in the sessions list.
POLICY = Policy.ctxweb()


def session_policy(session: Session) -> Policy:
    """When the session compacts: the ``trigger`` its policy sets (a ``fraction`` of usable, or
    ``tokens``; both strict: over means above), else ctxweb's default, above 80% of usable."""
    stored = session.policy if isinstance(session.policy, dict) else {}
    trigger = stored.get("trigger")
    if isinstance(trigger, dict):
        tokens, fraction = trigger.get("tokens"), trigger.get("fraction")
        if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens > 0:
            return Policy("ctxweb", "tokens", tokens, strict=True)
        if isinstance(fraction, int | float) and not isinstance(fraction, bool) and fraction > 0:
            return Policy.ctxweb(float(fraction))
    return POLICY


def policy_label(policy: Policy) -> str:
    """A policy's trigger in words: ``above 150,000 tokens``, ``above 80% of usable``."""
    if policy.trigger == "tokens":
        return f"above {int(policy.value):,} tokens"
    return f"above {policy.value:.0%} of usable"


def session_budget(session: Session, *, window: int | None = None) -> Budget:
    """The session's window, reserve, usable limit and trigger under its policy
    (:func:`session_policy`)."""
    return budget(window or session.context_window, session.output_reserve, session_policy(session))


def session_models(*, project: Project) -> list[str]:
    """The distinct models of the project's sessions, for the model filter."""
    return sorted(
        m
        for m in Session.objects.filter(project=project)
        .exclude(model="")
        .values_list("model", flat=True)
        .distinct()
    )


def session_totals(*, session_ids: Iterable[int]) -> dict[int, list[int]]:
    """Every listed session's turn totals in turn order, in ONE query."""
    totals: dict[int, list[int]] = defaultdict(list)
    rows = (
        Turn.objects.filter(session_id__in=list(session_ids))
        .order_by("session_id", "index")
        .values_list("session_id", "total_tokens")
    )
    for session_id, total in rows:
        totals[session_id].append(total)
    return dict(totals)
