"""Pages: a session's strategy preview (before and after, edits, warnings, apply) and an
artifact's content. Both work without JavaScript; every piece of content is escaped."""

from __future__ import annotations

import json
from collections import Counter
from typing import TYPE_CHECKING, Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from compaction.errors import StrategyError
from ctxweb.accounts.access import Access
from ctxweb.contexts import selectors
from ctxweb.contexts.services import budgets, planning
from ctxweb.front.access import page_access, page_session
from ctxweb.front.forms import parameter_form
from ctxweb.front.live import live_urls
from ctxweb.front.paging import page_number
from ctxweb.numbers import parse_whole

if TYPE_CHECKING:
    from compaction.messages import Context
    from compaction.regions import RegionTotals
    from compaction.strategies import Plan
    from ctxweb.contexts.models import Operation, Session

DEFAULT_STRATEGY = "ctxweb-auto"
#: Edits shown on one page of a preview (a plan may hold thousands).
EDITS_PER_PAGE = 100
# --- bars ---------------------------------------------------------------------------------------


def _bar(totals: RegionTotals, *, window: int, reserve: int, scale: int) -> list[dict[str, Any]]:
    """Stacked segments, bottom region first: each used region, then reserve and free."""
    tokens = [(name, int(totals.regions.get(name, 0))) for name in selectors.USED_REGIONS]
    if window:
        tokens.append(("reserve", reserve))
        tokens.append(("free", max(0, window - reserve - int(totals.total))))
    return [
        {"region": name, "tokens": count, "width": f"{100 * count / scale:.3f}"}
        for name, count in tokens
        if count > 0
    ]


def _comparison(plan: Plan, session: Session) -> dict[str, Any]:
    window = session.context_window
    reserve = min(session.output_reserve, window)
    scale = max(window, int(plan.before.total) + reserve, int(plan.after.total) + reserve, 1)
    saved = planning.regions_saved(plan)
    rows = [
        {
            "region": name,
            "before": plan.before.regions.get(name, 0),
            "after": plan.after.regions.get(name, 0),
            "saved": saved[name],
        }
        for name in selectors.USED_REGIONS
        if plan.before.regions.get(name, 0) or plan.after.regions.get(name, 0)
    ]
    usable = max(0, window - reserve)
    return {
        "before": _bar(plan.before, window=window, reserve=reserve, scale=scale),
        "after": _bar(plan.after, window=window, reserve=reserve, scale=scale),
        "rows": rows,
        "before_total": plan.before.total,
        "after_total": plan.after.total,
        "saved": plan.tokens_saved,
        "added": -plan.tokens_saved,
        "usable": usable,
        "reserve": reserve,
        "before_fill": f"{100 * plan.before.total / max(1, usable):.1f}",
        "after_fill": f"{100 * plan.after.total / max(1, usable):.1f}",
    }


def _turn(raw: str | None) -> tuple[int | None, str]:
    text = (raw or "").strip()
    if not text:
        return None, ""
    number = parse_whole(text)
    if number is None:
        return None, "must be a turn number (0 or more), or empty for the latest"
    return number, ""


def _operation(access: Access, session: Session, raw: str | None) -> Operation | None:
    """The operation the Apply form just queued (its id comes back in the query), if any."""
    operation_id = parse_whole(raw)
    if operation_id is None:
        return None
    operation = selectors.operation_get(project=access.project, operation_id=operation_id)
    if operation is None or operation.session_id != session.pk:
        return None
    return operation


@login_required
def session_preview(request: HttpRequest, external_id: str) -> HttpResponse:
    """Pick a strategy, tune it, see before and after; operators may apply it."""
    access = page_access(request)
    session = page_session(access, external_id)
    catalog = planning.strategy_catalog()
    by_id = {entry["id"]: entry for entry in catalog}
    errors: dict[str, str] = {}

    strategy_id = request.GET.get("strategy") or (
        DEFAULT_STRATEGY if DEFAULT_STRATEGY in by_id else catalog[0]["id"]
    )
    if strategy_id not in by_id:
        errors["strategy"] = f"unknown strategy {strategy_id!r}"
        strategy_id = DEFAULT_STRATEGY if DEFAULT_STRATEGY in by_id else catalog[0]["id"]
    spec = by_id[strategy_id]
    turn, turn_error = _turn(request.GET.get("turn"))
    if turn_error:
        errors["turn"] = turn_error

    form = parameter_form(
        spec, request.GET, planning.session_defaults(session=session, strategy=strategy_id)
    )
    errors.update(form.errors)

    context = None
    plan = None
    status = 200
    if not errors:
        try:
            context = planning.session_preview_context(session=session, turn=turn)
        except planning.PreviewUnavailable as problem:
            errors[problem.path] = problem.reason
    if context is not None and not errors:
        try:
            plan = planning.preview_plan(
                context=context,
                strategy=strategy_id,
                params=form.params,
                encoding=session.encoding,
            )
        except budgets.Busy as problem:
            errors["preview"] = (
                f"Every preview slot of this server stayed busy ({problem}): reload shortly."
            )
            status = 503
        except budgets.OverBudget as problem:
            errors["preview"] = (
                f"The preview {problem} and was stopped. Preview an earlier turn, or apply the"
                " strategy: operations run in the background without this limit."
            )
        except StrategyError as problem:
            errors[problem.path] = problem.reason
            for item in form.fields:
                if problem.path == f"params.{item.name}":
                    item.error = problem.reason

    operation = _operation(access, session, request.GET.get("operation"))
    page: dict[str, Any] = {
        "session": session,
        "catalog": catalog,
        "strategy": spec,
        "form": form,
        "turn": turn,
        "turn_text": request.GET.get("turn", ""),
        "last_turn": max(0, session.turn_count - 1),
        "errors": errors,
        "plan": plan,
        "can_operate": access.can_operate,
        "operation": operation,
        "live": live_urls(
            external_id=session.external_id,
            project_id=session.project_id,
            operation_id=operation.pk if operation else None,
        ),
    }
    if plan is not None and context is not None:
        page["comparison"] = _comparison(plan, session)
        page["cache"] = planning.plan_cache(
            context=context, plan=plan, encoding=session.encoding, model=session.model or None
        )
        page.update(_edits_page(request, access, context, plan))
        page["apply_params"] = json.dumps(
            {k: list(v) if isinstance(v, tuple) else v for k, v in plan.params.items()}
        )
    response = render(request, "contexts/preview.html", page, status=status)
    if status == 503:
        response["Retry-After"] = "5"
    return response


def _edits_page(
    request: HttpRequest, access: Access, context: Context, plan: Plan
) -> dict[str, Any]:
    """One page of the plan's edits (``edits_page``, :data:`EDITS_PER_PAGE` a page) with
    their excerpts, the count of every kind, and links to the other pages."""
    edits = plan.edits
    number, pages = page_number(request, "edits_page", len(edits), EDITS_PER_PAGE)
    start = (number - 1) * EDITS_PER_PAGE
    shown = edits[start : start + EDITS_PER_PAGE]
    stored = selectors.artifact_keys_stored(
        project=access.project, keys=[e.artifact_id for e in shown if e.artifact_id]
    )

    def link(to: int) -> str:
        query = request.GET.copy()
        query["edits_page"] = str(to)
        return f"?{query.urlencode()}#edits-heading"

    return {
        "edits": [
            {
                "number": position,
                **planning.edit_to_json(edit),
                "role": planning.edit_role(context, edit),
                "excerpt": planning.edit_excerpt(context, edit),
                "artifact_stored": edit.artifact_id in stored,
            }
            for position, edit in enumerate(shown, start=start + 1)
        ],
        "edit_count": len(edits),
        "edit_kinds": Counter(e.kind for e in edits).most_common(),
        "edits_page": {
            "number": number,
            "pages": pages,
            "first": start + 1,
            "last": start + len(shown),
            "previous": link(number - 1) if number > 1 else None,
            "next": link(number + 1) if number < pages else None,
        },
    }
