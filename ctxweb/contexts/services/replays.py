"""Replays: a recorded session walked again under one to six policies, side by side
(:class:`~ctxweb.contexts.models.Replay`), and the chosen policy set as the session's automatic
policy or the project's default.

A replay is created ``queued`` with column 0, the session as recorded, before the caller's
policies; it is scheduled after commit as operations are (:mod:`._background`). Running it loads
the session's turns once (each message parsed once, however many turns send it) and walks them
under each column's policy with :func:`compaction.replay.replay`. In the production shape the
Celery task sends one task a column (:data:`COLUMN_TASK`), so columns run in parallel on as many
workers as there are; each writes its column under a row lock and the last one finishes the
replay. Elsewhere (a background thread, or inline in tests) the columns run one after the other.

A session of more than ``CTXWEB_REPLAY_MAX_TURNS`` turns is refused (:class:`ReplayTooLong`):
a replay holds every turn's context and every column's per-turn results at once.

Progress (turns walked over every column) is stored and published over the session's socket
(``replay.progress``), at most every :data:`PROGRESS_SECONDS` per column; ``replay.finished``
ends it. Any error fails the replay, saying which column and why. A replay whose worker died stops
reporting progress; :func:`replay_reap_stale` fails it after :data:`STALE_SECONDS`.

Summaries in a replay are the offline fact summarizer's (:func:`replay_summarizer`): replaying a
session under six policies must not make hundreds of paid LLM calls, so a summary's size and what
it keeps are the offline summarizer's, and costs count the session's calls only.

Sits on top of the services' stack: it reads plans' defaults (:mod:`.planning`) and sets policies
(:mod:`.policy`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.db.models.functions import Least
from django.utils import timezone

from compaction.cache import last_breakpoint, price_for
from compaction.errors import StrategyError
from compaction.regions import Policy, budget
from compaction.replay import MAX_TRIGGER_TOKENS, ReplayPolicy, ReplayTurn
from compaction.replay import replay as walk
from compaction.strategies import get_strategy
from compaction.summarizers import FactSummarizer, Summarizer
from ctxweb.accounts.models import Project
from ctxweb.contexts import events, selectors
from ctxweb.contexts.models import AuditEvent, Replay, Session
from ctxweb.contexts.services import planning
from ctxweb.contexts.services._background import schedule_after_commit
from ctxweb.contexts.services.audit import audit_record
from ctxweb.contexts.services.counting import counter_for
from ctxweb.contexts.services.policy import (
    policy_strategy_validate,
    policy_trigger_validate,
    project_default_policy_set,
    session_policy_set,
)
from ctxweb.contexts.services.pricing import model_prices

logger = logging.getLogger(__name__)

#: The Celery task that runs a replay, and the one that runs one of its columns, sent by name.
REPLAY_TASK = "ctxweb.tasks.replay_run"
COLUMN_TASK = "ctxweb.tasks.replay_run_column"

#: Policies a caller may give (column 0, as recorded, comes on top).
MAX_POLICIES = 6
#: Characters of a column's label.
MAX_LABEL = 100
#: A column's keys as a caller gives them.
POLICY_KEYS = ("label", "strategy", "params", "trigger")
#: The trigger of a policy that gives none: ctxweb's default, above 80% of usable.
DEFAULT_TRIGGER: dict[str, Any] = {"fraction": 0.8}
#: Column 0: the session as it was recorded.
AS_RECORDED: dict[str, Any] = {
    "label": "as recorded",
    "strategy": None,
    "params": {},
    "trigger": None,
}

#: Seconds between two progress reports of one column.
PROGRESS_SECONDS = 0.5
#: A running replay without progress for this long has lost its worker.
STALE_SECONDS = 300.0
#: A queued replay never started after this long was lost on its way to a worker.
QUEUED_STALE_SECONDS = 3600.0

ACTIVE = (Replay.Status.QUEUED, Replay.Status.RUNNING)


class ReplayUnavailable(Exception):
    """The session cannot be replayed now (no turns yet). ``path`` names the field at fault."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason

    def fields(self) -> dict[str, str]:
        """The error as ``{path: reason}``."""
        return {self.path: self.reason}


class ReplayTooLong(Exception):
    """The session has more turns than a replay walks (``CTXWEB_REPLAY_MAX_TURNS``)."""

    path = "session"

    def __init__(self, turns: int, limit: int) -> None:
        self.reason = (
            f"has {turns:,} turns: a replay walks at most {limit:,}"
            " (CTXWEB_REPLAY_MAX_TURNS). Replay a shorter session, or ask the server's operator"
            " to raise the bound."
        )
        super().__init__(f"The session {self.reason}")
        self.turns = turns
        self.limit = limit

    def fields(self) -> dict[str, str]:
        """The error as ``{"session": reason}``."""
        return {self.path: self.reason}


class ReplayBusy(Exception):
    """The project already runs as many replays as it may at once."""

    def __init__(self, active: int, limit: int) -> None:
        super().__init__(
            f"{active} replays of this project are queued or running, the most it may run at"
            f" once (CTXWEB_REPLAYS_ACTIVE_PER_PROJECT={limit}): wait for one to finish."
        )
        self.active = active
        self.limit = limit


def replays_kept() -> int:
    """How many replays a session keeps (``CTXWEB_REPLAYS_KEPT``, at least 1)."""
    return max(1, int(getattr(settings, "CTXWEB_REPLAYS_KEPT", 20)))


def replays_active_limit() -> int:
    """How many replays a project may have queued or running at once
    (``CTXWEB_REPLAYS_ACTIVE_PER_PROJECT``, at least 1)."""
    return max(1, int(getattr(settings, "CTXWEB_REPLAYS_ACTIVE_PER_PROJECT", 2)))


def replay_max_turns() -> int:
    """The most turns a replayed session may have (``CTXWEB_REPLAY_MAX_TURNS``, at least 1)."""
    return max(1, int(getattr(settings, "CTXWEB_REPLAY_MAX_TURNS", 5000)))


def replay_summarizer() -> Summarizer:
    """The summarizer replays use: always the offline one (see the module's docstring)."""
    return FactSummarizer()


# ---------------------------------------------------------------------------------------------
# Presets


def _preset(
    session: Session,
    label: str,
    strategy: str,
    when: dict[str, Any],
    overrides: Mapping[str, Any] | None = None,
) -> dict[str, Any] | None:
    """The preset, or None when its parameters cannot fit this session (a reserve as large as
    the window leaves BaseAgent nothing to plan for)."""
    params = {**planning.session_defaults(session=session, strategy=strategy), **(overrides or {})}
    try:
        get_strategy(strategy).validate(params)
    except StrategyError:
        logger.info("preset %s left out for session %s", label, session.pk, exc_info=True)
        return None
    return {"label": label, "strategy": strategy, "params": params, "trigger": when}


def _tokens_trigger(window: int, reserve: int, policy: Policy) -> dict[str, Any]:
    """A seed's trigger in tokens for this window, as ``{"tokens": n}`` with a strict "above"
    (a seed's ``>= t`` is ``> t - 1`` on whole tokens)."""
    limits = budget(window, reserve, policy)
    threshold = limits.trigger if limits.strict else limits.trigger - 1
    return {"tokens": max(1, threshold)}


def replay_presets(*, session: Session) -> list[dict[str, Any]]:
    """One policy a seed agent runs, as each agent runs it, and ctxweb-auto at three targets:
    ``[{"label", "strategy", "params", "trigger"}]``, ready for :func:`replay_create`.

    Parameters are the strategy's defaults with the window and reserve taken from the session
    (:func:`~ctxweb.contexts.services.planning.session_defaults`); each trigger is the seed's own
    (``compaction.regions.Policy``), as a fraction of usable or in tokens for this window:

    - BaseAgent (``baseagent-compact``): above 85% of usable.
    - picoclaw (``picoclaw-summarize``): above 75% of the window (its history-only count and
      20-message rule are the strategy's own checks when it runs).
    - LLM4S (``llm4s-pipeline``): above 92% of its budget, the usable window (its final trim
      runs unless the count is within ``budget × 0.92``; digests above the budget).
    - nanobot (``nanobot-trim``): above its ``budget`` (4,000 tokens by default).
    - CoPaw (``copaw-compact``): at 75% of the window.
    - Codex (``codex-compact``): BaseAgent's trigger, which copied Codex's compaction.
    - OpenCode (``opencode-prune``): at usable less ``min(20K, output reserve)``.
    - Claude Code's context editing (``anthropic-clear-tool-uses``): above 100,000 input
      tokens, or 80% of usable on a smaller window (100K would never fire there).
    - ctxweb-auto: targets 30%, 50% and 70% of usable, above 80% of usable.

    A preset whose parameters cannot fit the session (a reserve as large as its window) is left
    out.
    """
    window, reserve = session.context_window, session.output_reserve
    usable = budget(window, reserve, Policy.ctxweb()).usable
    clear_at = max(1, min(100_000, int(usable * 0.8)))
    nanobot_budget = int(
        planning.session_defaults(session=session, strategy="nanobot-trim")["budget"]
    )
    presets = [
        _preset(session, "BaseAgent", "baseagent-compact", {"fraction": 0.85}),
        _preset(
            session,
            "picoclaw",
            "picoclaw-summarize",
            _tokens_trigger(window, reserve, Policy.picoclaw_summarize()),
        ),
        _preset(session, "LLM4S", "llm4s-pipeline", {"fraction": 0.92}),
        _preset(session, "nanobot", "nanobot-trim", {"tokens": max(1, nanobot_budget)}),
        _preset(
            session, "CoPaw", "copaw-compact", _tokens_trigger(window, reserve, Policy.copaw())
        ),
        _preset(session, "Codex", "codex-compact", {"fraction": 0.85}),
        _preset(
            session,
            "OpenCode",
            "opencode-prune",
            _tokens_trigger(window, reserve, Policy.opencode()),
        ),
        _preset(
            session,
            "Claude Code context editing",
            "anthropic-clear-tool-uses",
            {"tokens": clear_at},
            {"trigger": clear_at},
        ),
        *(
            _preset(
                session,
                f"ctxweb-auto {target:.0%}",
                "ctxweb-auto",
                DEFAULT_TRIGGER,
                {"target_fraction": target},
            )
            for target in (0.3, 0.5, 0.7)
        ),
    ]
    return [preset for preset in presets if preset is not None]


# ---------------------------------------------------------------------------------------------
# Creating


def replay_policies_validate(policies: Any) -> list[dict[str, Any]]:
    """The caller's policies, checked: a list of 1 to :data:`MAX_POLICIES` objects
    ``{"label"?, "strategy", "params"?, "trigger"?}``. Errors raise
    :class:`~compaction.errors.StrategyError` naming the field (``policies[2].trigger.fraction``).

    Each comes back ``{"label", "strategy", "params", "trigger"}``: the parameters given (checked
    against the strategy; the window and reserve missing are the session's when it runs), the
    trigger given or ctxweb's default, a label given or made of the strategy and trigger (labels
    are made unique with `` (2)``...).
    """
    if not isinstance(policies, Sequence) or isinstance(policies, str | bytes):
        raise StrategyError("policies", "must be a list of policies")
    if not 1 <= len(policies) <= MAX_POLICIES:
        raise StrategyError(
            "policies", f"give 1 to {MAX_POLICIES} policies (as recorded is added to them)"
        )
    out: list[dict[str, Any]] = []
    seen = {AS_RECORDED["label"]}
    for position, given in enumerate(policies):
        path = f"policies[{position}]"
        if not isinstance(given, Mapping):
            raise StrategyError(
                path, 'must be an object: {"label", "strategy", "params", "trigger"}'
            )
        for key in given:
            if key not in POLICY_KEYS:
                raise StrategyError(
                    f"{path}.{key}",
                    'unknown key: a policy is {"label", "strategy", "params", "trigger"}',
                )
        strategy, params = policy_strategy_validate(
            given.get("strategy"), given.get("params"), path=path
        )
        trigger = (
            policy_trigger_validate(given["trigger"], path=f"{path}.trigger")
            if given.get("trigger") is not None
            else dict(DEFAULT_TRIGGER)
        )
        if trigger.get("tokens", 0) > MAX_TRIGGER_TOKENS:
            raise StrategyError(
                f"{path}.trigger.tokens", f"must be a whole number, 1 to {MAX_TRIGGER_TOKENS:,}"
            )
        label = given.get("label")
        if label is None or label == "":
            label = f"{strategy} {_trigger_words(trigger)}"
        if not isinstance(label, str) or len(label) > MAX_LABEL:
            raise StrategyError(f"{path}.label", f"must be text of at most {MAX_LABEL} characters")
        label = label.strip() or strategy
        unique, n = label, 2
        while unique in seen:
            unique, n = f"{label} ({n})", n + 1
        seen.add(unique)
        out.append({"label": unique, "strategy": strategy, "params": params, "trigger": trigger})
    return out


def _trigger_words(trigger: Mapping[str, Any]) -> str:
    if "tokens" in trigger:
        return f"above {int(trigger['tokens']):,} tokens"
    return f"above {float(trigger['fraction']):.0%} of usable"


def _actor_name(created_by: Any, key_name: str) -> tuple[Any, str]:
    user = created_by if getattr(created_by, "is_authenticated", False) else None
    return user, (key_name or "")[:100]


def replay_create(
    *,
    session: Session,
    policies: Any,
    created_by: Any = None,
    key_name: str = "",
) -> Replay:
    """Queue a replay of the session under ``policies`` (see :func:`replay_policies_validate`)
    and schedule it; column 0 is the session as recorded.

    Raises :class:`~compaction.errors.StrategyError` (a bad policy, naming the field),
    :class:`ReplayUnavailable` (the session has no turn yet), :class:`ReplayTooLong` (more turns
    than ``CTXWEB_REPLAY_MAX_TURNS``: the whole session is replayed or none of it, since the last
    turns alone would start a policy on a context already past its trigger) and
    :class:`ReplayBusy` (the project runs ``CTXWEB_REPLAYS_ACTIVE_PER_PROJECT`` replays already).
    The session keeps its ``CTXWEB_REPLAYS_KEPT`` newest replays: older finished ones are deleted.
    """
    checked = replay_policies_validate(policies)
    for position, policy in enumerate(checked):
        # As the run will resolve them: the window and reserve left out are the session's.
        defaults = planning.session_defaults(session=session, strategy=policy["strategy"])
        try:
            get_strategy(policy["strategy"]).validate({**defaults, **policy["params"]})
        except StrategyError as exc:
            raise StrategyError(f"policies[{position}].{exc.path}", exc.reason) from None
    replay_reap_stale()
    turns = selectors.turn_list(session=session).count()
    if not turns:
        raise ReplayUnavailable("session", "has no turns yet: post a turn before replaying it")
    if turns > replay_max_turns():
        raise ReplayTooLong(turns, replay_max_turns())
    user, key = _actor_name(created_by, key_name)
    columns = [dict(AS_RECORDED), *checked]
    with transaction.atomic():
        # The project's row is the lock that counts its active replays one creation at a time.
        Project.objects.select_for_update().filter(pk=session.project_id).first()
        active = selectors.replay_active_count(project_id=session.project_id)
        limit = replays_active_limit()
        if active >= limit:
            raise ReplayBusy(active, limit)
        replay = Replay.objects.create(
            session=session,
            created_by=user,
            key_name=key,
            policies=columns,
            results=[None] * len(columns),
            total=turns * len(columns),
        )
        _prune(session)
        replay_schedule(replay.pk)
    return replay


def _prune(session: Session) -> None:
    """Delete the session's finished replays past the newest ``CTXWEB_REPLAYS_KEPT``."""
    keep = list(
        Replay.objects.filter(session=session)
        .order_by("-created_at", "-pk")
        .values_list("pk", flat=True)[: replays_kept()]
    )
    Replay.objects.filter(session=session).exclude(pk__in=keep).exclude(status__in=ACTIVE).delete()


def replay_schedule(replay_id: int) -> None:
    """Run the replay after the current transaction commits (see the module's docstring)."""
    schedule_after_commit(
        task=REPLAY_TASK,
        job_id=replay_id,
        run=lambda pk: replay_run(replay_id=pk),
        unsent=lambda pk, error: replay_fail(
            replay_id=pk, error=f"could not reach the task broker: {error}"
        ),
    )


# ---------------------------------------------------------------------------------------------
# Running


def _finish(replay: Replay, status: str, error: str = "") -> None:
    """Mark finished (within the caller's transaction) and announce it after commit."""
    replay.status = status
    replay.error = error[:2000]
    replay.finished_at = timezone.now()
    replay.save(update_fields=["status", "error", "finished_at"])
    transaction.on_commit(lambda: events.replay_finished(replay))


def replay_fail(*, replay_id: int, error: str) -> None:
    """Mark a queued or running replay failed with ``error`` (time limit, lost worker)."""
    with transaction.atomic():
        replay = Replay.objects.select_for_update().filter(pk=replay_id, status__in=ACTIVE).first()
        if replay is not None:
            _finish(replay, Replay.Status.FAILED, error)


def replay_reap_stale(
    *, older_than: float | None = None, queued_older_than: float | None = None
) -> list[int]:
    """Fail replays whose worker is gone: running without progress for ``older_than`` seconds
    ("worker lost"), queued for ``queued_older_than`` ("never started"). Returns their ids."""
    now = timezone.now()
    stale = now - timedelta(seconds=STALE_SECONDS if older_than is None else older_than)
    lost = now - timedelta(
        seconds=QUEUED_STALE_SECONDS if queued_older_than is None else queued_older_than
    )
    reaped: list[int] = []
    running = Replay.objects.filter(status=Replay.Status.RUNNING, heartbeat_at__lt=stale)
    queued = Replay.objects.filter(status=Replay.Status.QUEUED, created_at__lt=lost)
    for pk, why in [
        *((pk, "worker lost: no progress") for pk in running.values_list("pk", flat=True)),
        *(
            (pk, "never started: no worker picked it up")
            for pk in queued.values_list("pk", flat=True)
        ),
    ]:
        with transaction.atomic():
            replay = Replay.objects.select_for_update().filter(pk=pk, status__in=ACTIVE).first()
            if replay is None:
                continue
            if replay.status == Replay.Status.RUNNING and (
                replay.heartbeat_at is None or replay.heartbeat_at >= stale
            ):
                continue
            _finish(replay, Replay.Status.FAILED, why)
            reaped.append(pk)
    return reaped


def _start(replay_id: int) -> Replay | None:
    """Mark the replay running; None when there is nothing to run (finished, or unknown)."""
    with transaction.atomic():
        replay = (
            Replay.objects.select_for_update()
            .select_related("session")
            .filter(pk=replay_id)
            .first()
        )
        if replay is None:
            logger.warning("replay %s does not exist (deleted, or another database)", replay_id)
            return None
        if replay.status not in ACTIVE:
            return None
        now = timezone.now()
        replay.status = Replay.Status.RUNNING
        replay.started_at = replay.started_at or now
        replay.heartbeat_at = now
        replay.save(update_fields=["status", "started_at", "heartbeat_at"])
    events.replay_progress(replay)
    return replay


class _Progress:
    """Counts one column's turns into the replay's ``done``, stored and published at most every
    :data:`PROGRESS_SECONDS` (and at the column's end), however fast the engine walks."""

    def __init__(self, replay: Replay) -> None:
        self.replay = replay
        self.reported = 0
        self.seen = 0
        self.last = time.monotonic()

    def __call__(self, done: int) -> None:
        self.seen = done
        if time.monotonic() - self.last >= PROGRESS_SECONDS:
            self.flush()

    def flush(self) -> None:
        delta = self.seen - self.reported
        self.last = time.monotonic()
        if delta <= 0:
            return
        self.reported = self.seen
        # Never past total: a column redelivered after its worker died walks its turns again.
        Replay.objects.filter(pk=self.replay.pk).update(
            done=Least(F("done") + delta, F("total")), heartbeat_at=timezone.now()
        )
        row = Replay.objects.filter(pk=self.replay.pk).values("done", "total", "status").first()
        if row is None:
            return
        self.replay.done, self.replay.total, self.replay.status = (
            row["done"],
            row["total"],
            row["status"],
        )
        events.replay_progress(self.replay)


def _inputs(replay: Replay) -> dict[str, Any]:
    """What every column of ``replay`` walks: its session's turns as they were when it was
    created (a turn posted since is not in it: ``total`` counted the turns then), and how to
    count, cache and price them."""
    session = replay.session
    recorded = replay.total // max(1, len(replay.policies))
    turns = [
        ReplayTurn(
            index=turn.index,
            context=turn.context,
            window=turn.window,
            reserve=turn.max_output_tokens or session.output_reserve,
            # The stored total (ingest's count plus what the provider reported beyond it) is
            # what the engine takes as reported: whatever it holds beyond the engine's count of
            # the context stays in every call, and as recorded gives each stored total exactly.
            # Not the provider's report alone: a context read back can count fewer tokens than
            # ingest counted (rows stored before migration 0013 on PostgreSQL hold jsonb, which
            # reorders a tool schema's keys: 4 tokens a call on the generated session), and the
            # call cost what was stored.
            reported_input_tokens=turn.total_tokens,
        )
        for turn in selectors.replay_turn_contexts(session=session, turns=recorded)
    ]
    priced = price_for(session.model or None, model_prices())
    return {
        "turns": turns,
        "counter": counter_for(session.encoding),
        "cache_rule": _cache_rule(session, turns),
        "price": priced[1] if priced is not None else None,
    }


#: How many of the last recorded turns are looked at for a cache breakpoint.
BREAKPOINT_SAMPLE = 8


def _cache_rule(session: Session, turns: Sequence[ReplayTurn]) -> str:
    """The prompt-cache rule of the session's provider: OpenAI's automatic caching, or
    Anthropic's breakpoints. A record of Anthropic calls that kept no ``cache_control`` on any of
    its last turns (Claude Code's session files drop them) takes a breakpoint at the end of every
    request, as Claude Code sends them: the plain rule would read nothing from the cache."""
    if session.format != "anthropic-messages":
        return "openai"
    if any(last_breakpoint(turn.context) >= 0 for turn in turns[-BREAKPOINT_SAMPLE:]):
        return "anthropic"
    return "anthropic-end"


def _column_policy(session: Session, column: Mapping[str, Any]) -> ReplayPolicy:
    """The engine's policy of a stored column (parameters resolved on the session)."""
    strategy = column.get("strategy")
    if strategy is None:
        return ReplayPolicy(label=str(column.get("label") or AS_RECORDED["label"]))
    defaults = planning.session_defaults(session=session, strategy=strategy)
    resolved = get_strategy(strategy).validate({**defaults, **(column.get("params") or {})})
    trigger = column.get("trigger") or DEFAULT_TRIGGER
    return ReplayPolicy(
        label=str(column["label"]),
        strategy=strategy,
        params=dict(resolved),
        trigger_fraction=trigger.get("fraction"),
        trigger_tokens=trigger.get("tokens"),
    )


def _column_compute(
    replay: Replay, column: int, inputs: Mapping[str, Any], summarizer: Summarizer | None
) -> dict[str, Any]:
    progress = _Progress(replay)
    started = time.monotonic()
    try:
        result = walk(
            inputs["turns"],
            policy=_column_policy(replay.session, replay.policies[column]),
            counter=inputs["counter"],
            cache_rule=inputs["cache_rule"],
            price=inputs["price"],
            summarizer=summarizer or replay_summarizer(),
            progress=progress,
        )
    finally:
        progress.flush()
    data: dict[str, Any] = result.to_dict()
    # The walk's own time (the session's load and the stores are the replay's, not a column's).
    data["seconds"] = round(time.monotonic() - started, 3)
    return data


def _column_store(replay_id: int, column: int, data: dict[str, Any]) -> Replay | None:
    """Write column ``column``'s result under the replay's row lock; the last column to land
    finishes the replay ``succeeded``. Returns the replay (None if it is gone)."""
    with transaction.atomic():
        replay = Replay.objects.select_for_update().filter(pk=replay_id).first()
        if replay is None:
            return None
        results = list(replay.results or [])
        results += [None] * (len(replay.policies) - len(results))
        results[column] = data
        replay.results = results
        replay.heartbeat_at = timezone.now()
        replay.save(update_fields=["results", "heartbeat_at"])
        if replay.status == Replay.Status.RUNNING and all(r is not None for r in results):
            replay.done = replay.total
            replay.save(update_fields=["done"])
            _finish(replay, Replay.Status.SUCCEEDED)
    return replay


def _column_failed(replay: Replay, column: int, error: BaseException) -> None:
    label = (replay.policies[column] or {}).get("label", column)
    logger.exception("replay %s column %s failed", replay.pk, column)
    replay_fail(replay_id=replay.pk, error=f"column {column} ({label}): {error}")


def replay_run(
    *,
    replay_id: int,
    fan_out: Callable[[int, int], object] | None = None,
    summarizer: Summarizer | None = None,
) -> Replay | None:
    """Run a queued replay: every column here one after the other, or, with ``fan_out``
    (``fan_out(replay_id, column)`` sends a column's task), each column by its own task
    (:func:`replay_run_column`). Returns the replay (None when there was nothing to run).

    Any error fails the replay with it; nothing is left running.
    """
    replay = _start(replay_id)
    if replay is None:
        return None
    if fan_out is not None:
        for column in range(len(replay.policies)):
            try:
                fan_out(replay.pk, column)
            except Exception as error:
                _column_failed(replay, column, error)
                break
        return replay
    try:
        inputs = _inputs(replay)
    except Exception as error:
        logger.exception("replay %s could not load its session", replay.pk)
        replay_fail(replay_id=replay.pk, error=f"loading the session: {error}")
        return Replay.objects.filter(pk=replay.pk).first()
    for column in range(len(replay.policies)):
        if not Replay.objects.filter(pk=replay.pk, status=Replay.Status.RUNNING).exists():
            break  # failed meanwhile (reaped, or deleted): stop walking
        try:
            data = _column_compute(replay, column, inputs, summarizer)
        except Exception as error:
            _column_failed(replay, column, error)
            break
        _column_store(replay.pk, column, data)
    return Replay.objects.filter(pk=replay.pk).first()


def replay_run_column(
    *, replay_id: int, column: int, summarizer: Summarizer | None = None
) -> Replay | None:
    """Run one column of a running replay (its own Celery task in the production shape) and
    store it; a column already stored, or a replay no longer running, is left alone."""
    replay = Replay.objects.select_related("session").filter(pk=replay_id).first()
    if replay is None or replay.status != Replay.Status.RUNNING:
        return replay
    if not 0 <= column < len(replay.policies):
        return replay
    if column < len(replay.results or []) and replay.results[column] is not None:
        return replay  # a redelivered task: the column landed already
    try:
        data = _column_compute(replay, column, _inputs(replay), summarizer)
    except Exception as error:
        _column_failed(replay, column, error)
        return Replay.objects.filter(pk=replay.pk).first()
    return _column_store(replay.pk, column, data)


# ---------------------------------------------------------------------------------------------
# Applying a column's policy


def _column(replay: Replay, column: Any) -> dict[str, Any]:
    if isinstance(column, bool) or not isinstance(column, int):
        raise StrategyError("column", "must be a whole number")
    if not 0 <= column < len(replay.policies):
        raise StrategyError("column", f"must be 0 to {len(replay.policies) - 1}")
    return dict(replay.policies[column])


def _auto_policy(column: Mapping[str, Any], *, keep: Mapping[str, Any]) -> dict[str, Any]:
    """The session policy of a replayed column: ``auto`` with its strategy and the parameters
    that are not the window or reserve ``keep`` does not hold (those stay the session's own, so
    the policy never plans for another model's window)."""
    if column.get("strategy") is None:
        return {}
    sized = (*planning.WINDOW_PARAMS, *planning.RESERVE_PARAMS)
    params = {
        k: v
        for k, v in (column.get("params") or {}).items()
        if k not in sized or (k in keep and keep[k] != v)
    }
    out: dict[str, Any] = {
        "auto": {"strategy": column["strategy"], "params": params, "enabled": True}
    }
    if column.get("trigger"):
        out["trigger"] = dict(column["trigger"])
    return out


def replay_set_session_policy(*, replay: Replay, column: int, actor: Any = None) -> Session:
    """Set column ``column``'s policy as the session's automatic policy (column 0, as recorded:
    no automatic policy, its ``auto`` cleared and its trigger kept). Audited."""
    chosen = _column(replay, column)
    session = replay.session
    with transaction.atomic():
        if chosen.get("strategy") is None:
            policy = {k: v for k, v in (session.policy or {}).items() if k != "auto"}
        else:
            defaults = planning.session_defaults(session=session, strategy=chosen["strategy"])
            policy = _auto_policy(chosen, keep=defaults)
        session = session_policy_set(session=session, policy=policy)
        audit_record(
            project_id=session.project_id,
            action=AuditEvent.Action.SESSION_POLICY,
            actor=actor,
            session_external_id=session.external_id,
            detail={"replay": replay.pk, "column": column, "policy": session.policy},
        )
    return session


def replay_set_project_default(*, replay: Replay, column: int, actor: Any = None) -> Project:
    """Set column ``column``'s policy as the project's default for new sessions (column 0: a
    default without automatic policy). Window and reserve parameters are left out: each new
    session takes its own. Audited."""
    chosen = _column(replay, column)
    project = replay.session.project
    with transaction.atomic():
        if chosen.get("strategy") is None:
            policy = {k: v for k, v in (project.default_policy or {}).items() if k != "auto"}
        else:
            policy = _auto_policy(chosen, keep={})
        project = project_default_policy_set(project=project, policy=policy)
        audit_record(
            project_id=project.pk,
            action=AuditEvent.Action.PROJECT_POLICY,
            actor=actor,
            session_external_id=replay.session.external_id,
            detail={"replay": replay.pk, "column": column, "policy": project.default_policy},
        )
    return project


def project_policy_set(
    *, project: Project, policy: Mapping[str, Any], actor: Any = None
) -> Project:
    """Set the project's default policy as given (``PATCH project``), audited."""
    with transaction.atomic():
        project = project_default_policy_set(project=project, policy=policy)
        audit_record(
            project_id=project.pk,
            action=AuditEvent.Action.PROJECT_POLICY,
            actor=actor,
            detail={"policy": project.default_policy},
        )
    return project
