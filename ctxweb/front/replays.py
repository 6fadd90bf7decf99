"""Pages: a session's replays (the list, and a form that starts one under the picked policies)
and one replay (its progress, then the replayed charts stacked on one scale and a table a policy
a column, with buttons that set a column's policy for the session or the project).

Both pages work without JavaScript (a running replay says to reload); ``static/ctxweb/replay.js``
adds the charts and live progress (the session's socket, else polling ``?format=json``).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseForbidden, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from compaction.errors import StrategyError
from ctxweb.contexts import selectors
from ctxweb.contexts.services import planning, replays
from ctxweb.front.access import page_access, page_session
from ctxweb.front.forms import ReplayForm
from ctxweb.front.live import live_urls
from ctxweb.numbers import parse_whole

if TYPE_CHECKING:
    from ctxweb.accounts.access import Access
    from ctxweb.contexts.models import Replay, Session

#: The statuses of a replay still under way.
ACTIVE = ("queued", "running")
#: The table's rows: (key in a column's totals, title, which value is best).
ROWS = (
    ("input_tokens", "Total input tokens", min),
    ("cache_read", "Cache reads (tokens)", max),
    ("cache_write", "Cache writes (tokens)", min),
    ("cost", "Cost (USD)", min),
    ("compactions", "Compactions", min),
    ("peak_fill", "Peak fill", min),
    ("turns_over_window", "Turns over the window", min),
    ("facts_lost", "Facts lost", min),
)
#: Where a column's policy goes: the form's ``target`` -> (service, confirmation, confirmation
#: for the column as recorded, which sets no automatic policy).
TARGETS = {
    "session": (
        replays.replay_set_session_policy,
        "This session's automatic policy is now {label}.",
        "This session has no automatic policy now: its agent compacts as it did.",
    ),
    "project": (
        replays.replay_set_project_default,
        "The project's default policy for new sessions is now {label}.",
        "The project's new sessions start without an automatic policy now.",
    ),
}


def _label(policy: dict[str, Any], position: int) -> str:
    return str(policy.get("label") or ("As recorded" if position == 0 else f"Policy {position}"))


def _replay_or_404(session: Session, raw: str, *, results: bool = True) -> Replay:
    """The session's replay ``raw`` (404 otherwise); without ``results`` its results stay in the
    database (the progress a page polls for must not load megabytes each time)."""
    replay_id = parse_whole(raw)
    if replay_id is None:
        raise Http404("Replay not found")
    if results:
        replay = selectors.replay_get(session=session, replay_id=replay_id)
    else:
        replay = selectors.replay_list(session=session).filter(pk=replay_id).first()
    if replay is None:
        raise Http404("Replay not found")
    return replay


# --- the list and the form ----------------------------------------------------------------------


def _form(session: Session, data: Any = None, *, shown: bool = True) -> ReplayForm:
    """The policies form; its presets only where it is shown (an operator, a session with turns).
    A session whose presets do not validate (a window no larger than its output reserve) gets
    the custom row alone, and the form says why."""
    presets: list[dict[str, Any]] = []
    unavailable = ""
    if shown and session.turn_count:
        try:
            presets = replays.replay_presets(session=session)
        except StrategyError as problem:
            unavailable = f"{problem.path} {problem.reason}"
    strategies = [entry["id"] for entry in planning.strategy_catalog()]
    form = ReplayForm(data, presets=presets, strategies=strategies, maximum=replays.MAX_POLICIES)
    form.presets_unavailable = unavailable
    return form


def _policy_error(form: ReplayForm, problem: StrategyError, policies: list[dict[str, Any]]) -> None:
    """Show a policy the service refused next to its field: the custom row's strategy, params or
    trigger (the last policy, ``policies[N].params.x``, when the row was filled), else above the
    form, naming the policy."""
    path = problem.path
    last = f"policies[{len(policies) - 1}]."
    if form.cleaned_data.get("strategy") and path.startswith(last):
        rest = path[len(last) :]
        field = rest.split(".", 1)[0]
        if field in ("params", "trigger", "strategy"):
            form.add_error(field, f"{rest}: {problem.reason}" if "." in rest else problem.reason)
            return
    for position, policy in enumerate(policies):
        if path.startswith(f"policies[{position}]"):
            form.add_error(None, f"{policy['label']}: {path} {problem.reason}")
            return
    form.add_error(None, f"{path}: {problem.reason}")


def _row(replay: Replay, *, url: str) -> dict[str, Any]:
    data = selectors.replay_data(replay)
    return {
        **data,
        "created": replay.created_at,
        "labels": [_label(p, i) for i, p in enumerate(data["policies"])],
        "url": url,
        "active": data["status"] in ACTIVE,
    }


@login_required
@require_http_methods(["GET", "POST"])
def replay_list(request: HttpRequest, external_id: str) -> HttpResponse:
    """``/sessions/{id}/replays/``: the session's replays; operators pick policies and POST to
    start one, then land on its page."""
    access = page_access(request)
    session = page_session(access, external_id)
    status = 200
    if request.method == "POST":
        if not access.can_operate:
            return HttpResponseForbidden("Only operators may replay a session.")
        form = _form(session, request.POST)
        if session.turn_count and form.is_valid():
            policies = form.policies()
            try:
                replay = replays.replay_create(
                    session=session, policies=policies, created_by=request.user
                )
            except StrategyError as problem:
                _policy_error(form, problem, policies)
            except replays.ReplayUnavailable as problem:
                form.add_error(None, f"Not replayed: the {problem.path} {problem.reason}.")
            except replays.ReplayBusy as problem:
                form.add_error(None, str(problem))
            except replays.ReplayTooLong as problem:
                form.add_error(None, f"Not replayed: {problem}")
            else:
                return redirect("session-replay", session.external_id, replay.pk)
        status = 400
    else:
        form = _form(session, shown=access.can_operate)
    rows = [
        _row(replay, url=reverse("session-replay", args=[session.external_id, replay.pk]))
        for replay in selectors.replay_list(session=session)
    ]
    return render(
        request,
        "contexts/replays.html",
        {
            "session": session,
            "access": access,
            "form": form,
            "presets": form.preset_list,
            "picked": set(request.POST.getlist("presets")),
            "maximum": replays.MAX_POLICIES,
            "max_turns": replays.replay_max_turns(),
            "rows": rows,
            "live": live_urls(external_id=session.external_id, project_id=session.project_id),
            "progress": [
                {"id": r["id"], "url": f"{r['url']}?format=json"} for r in rows if r["active"]
            ],
        },
        status=status,
    )


# --- one replay ---------------------------------------------------------------------------------


def _trigger_tokens(trigger: Any, usable: int) -> int | None:
    """A policy's trigger as tokens (a fraction is of ``usable``), or None when it has none."""
    if not isinstance(trigger, dict):
        return None
    tokens, fraction = trigger.get("tokens"), trigger.get("fraction")
    if isinstance(tokens, int | float) and not isinstance(tokens, bool):
        return int(tokens)
    if isinstance(fraction, int | float) and not isinstance(fraction, bool):
        return int(fraction * usable)
    return None


def _chart(
    position: int, label: str, column: dict[str, Any], *, recorded_trigger: int
) -> dict[str, Any]:
    """What replay.js draws for one column: a stack a turn, the lines, the compactions. The
    column as recorded has no policy of its own: its line is the session's trigger."""
    turns = column.get("turns") or []
    last = turns[-1] if turns else {}
    window = int(last.get("window") or 0)
    usable = int(last.get("usable") or 0)
    trigger = _trigger_tokens(column.get("trigger"), usable)
    if trigger is None and position == 0:
        trigger = recorded_trigger
    return {
        "position": position,
        "label": label,
        "window": window,
        "usable": usable,
        "trigger": trigger,
        "turns": [
            {
                "index": t.get("index", i),
                "total": t.get("total", 0),
                "regions": {k: v for k, v in (t.get("regions") or {}).items() if v},
                "window": t.get("window") or window,
                "over": bool(t.get("over_window")),
                "compacted": bool(t.get("compacted")),
            }
            for i, t in enumerate(turns)
        ],
        "compactions": [
            {"turn": c.get("turn"), "before": c.get("before"), "after": c.get("after")}
            for c in column.get("compactions") or []
        ],
    }


def _value(key: str, totals: dict[str, Any]) -> float | None:
    value = totals.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _table(columns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The comparison's rows, each cell with its value and whether it is the row's best (the
    best is marked only where the columns differ)."""
    rows = []
    for key, title, best in ROWS:
        values = [_value(key, c["totals"]) if c["result"] else None for c in columns]
        known = [v for v in values if v is not None]
        top = best(known) if len(set(known)) > 1 else None
        rows.append(
            {
                "key": key,
                "title": title,
                "cells": [
                    {"value": v, "best": v is not None and v == top, "column": c}
                    for v, c in zip(values, columns, strict=True)
                ],
            }
        )
    return rows


def _detail(replay: Replay, session: Session, access: Access) -> dict[str, Any]:
    data = selectors.replay_data(replay, results=True)
    results = data.get("results") or []
    recorded_trigger = selectors.session_budget(session).trigger
    columns = []
    for position, policy in enumerate(data["policies"]):
        result = results[position] if position < len(results) else None
        label = _label(policy, position)
        columns.append(
            {
                "position": position,
                "label": label,
                "policy": policy,
                "recorded": position == 0,
                "result": result,
                "totals": (result or {}).get("totals") or {},
                "facts": (result or {}).get("facts_lost") or {},
                "errors": (result or {}).get("errors") or [],
                "chart": (
                    _chart(position, label, result, recorded_trigger=recorded_trigger)
                    if result
                    else None
                ),
            }
        )
    charts = [c["chart"] for c in columns if c["chart"] is not None]
    return {
        "data": data,
        "columns": columns,
        "table": _table(columns),
        "charts": {"regions": list(selectors.REGIONS), "columns": charts},
        "has_charts": any(c["turns"] for c in charts),
        "active": data["status"] in ACTIVE,
        "can_operate": access.can_operate,
    }


@login_required
@require_http_methods(["GET"])
def replay_detail(request: HttpRequest, external_id: str, replay_id: str) -> HttpResponse:
    """``/sessions/{id}/replays/{rid}/``: progress while it runs, then the charts and the
    table. ``?format=json`` gives its progress (``replay_data``) for the page's script."""
    access = page_access(request)
    session = page_session(access, external_id)
    if request.GET.get("format") == "json":
        progress = _replay_or_404(session, replay_id, results=False)
        return JsonResponse(selectors.replay_data(progress))
    replay = _replay_or_404(session, replay_id)
    page = _detail(replay, session, access)
    url = reverse("session-replay", args=[session.external_id, replay.pk])
    return render(
        request,
        "contexts/replay.html",
        {
            **page,
            "session": session,
            "replay": replay,
            "access": access,
            "live": live_urls(external_id=session.external_id, project_id=session.project_id),
            "progress_url": f"{url}?format=json",
        },
    )


@login_required
@require_POST
def replay_apply(request: HttpRequest, external_id: str, replay_id: str) -> HttpResponse:
    """``POST /sessions/{id}/replays/{rid}/apply/`` with ``column`` and ``target`` (``session``
    or ``project``): the column's policy becomes the session's, or the project's default."""
    access = page_access(request)
    session = page_session(access, external_id)
    replay = _replay_or_404(session, replay_id)
    if not access.can_operate:
        return HttpResponseForbidden("Only operators may set a policy.")
    back = reverse("session-replay", args=[session.external_id, replay.pk])
    target = TARGETS.get(request.POST.get("target", ""))
    column = parse_whole(request.POST.get("column"), maximum=len(replay.policies or []) - 1)
    if target is None or column is None:
        messages.error(request, "Not set: pick a replayed policy's button.")
        return redirect(back)
    service, confirmation, recorded = target
    try:
        service(replay=replay, column=column, actor=request.user)
    except StrategyError as problem:
        messages.error(request, f"Not set: {problem}")
        return redirect(back)
    policy = replay.policies[column]
    if policy.get("strategy") is None:
        messages.success(request, recorded)
    else:
        messages.success(request, confirmation.format(label=_label(policy, column)))
    return redirect(back)
