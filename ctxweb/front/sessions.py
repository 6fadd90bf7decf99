"""Dashboard pages: the sessions list and a session's chart.

Each view parses, authorizes through :func:`ctxweb.accounts.access.access_for_request`, reads
through selectors and renders. Every page works without JavaScript; scripts only add the chart,
tooltips and keyboard shortcuts. Each runs a constant number of queries.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from ctxweb.accounts.access import Access, access_for_request
from ctxweb.contexts import selectors
from ctxweb.contexts.selectors import unread as unread_selectors
from ctxweb.front import charts
from ctxweb.front.access import page_access, page_session
from ctxweb.front.live import live_urls
from ctxweb.front.unread import unread_rows
from ctxweb.shapes import OperationOutput

if TYPE_CHECKING:
    from ctxweb.contexts.models import Operation

PAGE_SIZE = 25
#: Operations per page on the session page (``?operations=N`` turns the pages).
OPERATIONS_PAGE_SIZE = 20
#: Unread calls listed in a page's warning, the newest (the API lists them all).
UNREAD_SHOWN = 20
#: A column header's first sort when clicked, and each sort's reverse.
SORT_COLUMNS = {"name": "name", "turns": "-turns", "fill": "-fill", "recent": "recent"}
REVERSED_SORT = {
    "name": "-name",
    "-name": "name",
    "turns": "-turns",
    "-turns": "turns",
    "fill": "-fill",
    "-fill": "fill",
    "recent": "-recent",
    "-recent": "recent",
}


# --- sessions list ----------------------------------------------------------------------------


def _fill_filter(raw: str) -> tuple[float | None, float | None]:
    band = charts.FILL_BANDS.get(raw)
    return (None, None) if band is None else (band[1], band[2])


@login_required
def session_list(request: HttpRequest) -> HttpResponse:
    """``/``: the project's sessions with fill, trend and compactions; filter, sort, paginate."""
    access = access_for_request(request)
    if access is None:
        return render(request, "accounts/no_project.html")
    q = request.GET.get("q", "").strip()
    model = request.GET.get("model", "")
    fill = request.GET.get("fill", "")
    if fill not in charts.FILL_BANDS:
        fill = ""
    sort = request.GET.get("sort", "recent")
    if sort not in charts.SORTS:
        sort = "recent"
    min_fill, max_fill = _fill_filter(fill)
    sessions = selectors.session_list(
        project=access.project,
        search=q,
        model=model,
        min_fill=min_fill,
        max_fill=max_fill,
        sort=sort,
    )
    page = Paginator(sessions, PAGE_SIZE).get_page(request.GET.get("page"))
    totals = selectors.session_totals(session_ids=[s.pk for s in page.object_list])
    rows = []
    for session in page.object_list:
        b = selectors.session_budget(session)
        rows.append(
            {
                "session": session,
                "fill": session.last_fill,
                "level": charts.fill_level(session.last_fill),
                "spark": charts.sparkline(totals.get(session.pk, []), b.usable),
                "usable": b.usable,
            }
        )
    filtered = bool(q or model or fill)
    kept = {"q": q, "model": model, "fill": fill, "sort": sort}

    def query(**changes: Any) -> str:
        params = {k: v for k, v in {**kept, **changes}.items() if v and v != "recent"}
        if params.get("sort") == "recent":
            params.pop("sort")
        return "?" + urlencode(params) if params else "?"

    sort_links = {}
    for column, first in SORT_COLUMNS.items():
        active = sort in (first, REVERSED_SORT[first])
        ascending = sort in ("name", "turns", "fill", "-recent")
        sort_links[column] = {
            "url": query(sort=REVERSED_SORT[sort] if active else first, page=""),
            "active": active,
            "arrow": ("▲" if ascending else "▼") if active else "",
            "aria": ("ascending" if ascending else "descending") if active else "none",
        }
    project_has_sessions = page.paginator.count > 0 or (
        filtered and selectors.session_any(project=access.project)
    )
    context = {
        "access": access,
        "page": page,
        "rows": rows,
        "q": q,
        "model": model,
        "fill": fill,
        "sort": sort,
        "models": selectors.session_models(project=access.project),
        "fill_bands": [(k, v[0]) for k, v in charts.FILL_BANDS.items()],
        "sorts": list(charts.SORTS.items()),
        "filtered": filtered,
        "project_has_sessions": project_has_sessions,
        "sort_links": sort_links,
        "page_prefix": query(page="") + ("&" if query(page="") != "?" else ""),
        "fill_near": charts.FILL_NEAR,
        "fill_over": charts.FILL_OVER,
    }
    # Calls ctxweb could not read whose session does not exist: only this page shows them.
    unattached = unread_selectors.unread_call_list(project=access.project, unattached=True)
    shown = list(unattached[: UNREAD_SHOWN + 1])
    context["unread"] = unread_rows(shown[:UNREAD_SHOWN])
    context["unread_count"] = unattached.count() if len(shown) > UNREAD_SHOWN else len(shown)
    if not project_has_sessions:
        context.update(_first_turn_help(request, access))
    return render(request, "contexts/sessions.html", context)


def _first_turn_help(request: HttpRequest, access: Access) -> dict[str, str]:
    """How to post a first turn: a curl command against this server, and how to get a key."""
    url = request.build_absolute_uri(reverse("api-turns", args=["my-first-session"]))
    body = (
        '{"format": "openai-chat", "model": "gpt-4o", "request": {"model": "gpt-4o", '
        '"messages": [{"role": "system", "content": "You are a helpful agent."}, '
        '{"role": "user", "content": "Hello!"}]}}'
    )
    curl = (
        f"curl -X POST {shlex.quote(url)} \\\n"
        '  -H "Authorization: Bearer $CTXWEB_API_KEY" \\\n'
        '  -H "Content-Type: application/json" \\\n'
        f"  -d {shlex.quote(body)}"
    )
    name = shlex.quote(access.project.name)
    return {
        "curl": curl,
        "key_command": f"python manage.py create_api_key --project {name}",
        "import_command": f"python manage.py import_transcript PATH --project {name}",
    }


# --- session page -----------------------------------------------------------------------------


def operation_actor(operation: Operation) -> str:
    """Who applied an operation, as the audit log names them: ``policy`` (the session's automatic
    policy), a member's username, ``key <prefix>`` for an API key, else ``system``."""
    if operation.automatic:
        return "policy"
    if operation.created_by is not None:
        return operation.created_by.get_username()
    if operation.key_prefix:
        return f"key {operation.key_prefix}"
    return "system"


def _operation_row(operation: Operation, *, project_id: int) -> dict[str, Any]:
    """An operation as the session page lists it: its one shape (the API's), its times as
    datetimes for the page's filters, who applied it and where to follow it."""
    result = operation.result or {}
    return {
        **OperationOutput(operation).data,
        "created": operation.created_at,
        "undone": operation.undone_at,
        "tokens_before": result.get("tokens_before"),
        "tokens_after": result.get("tokens_after"),
        "who": operation_actor(operation),
        # The page's project, as the live URLs name it: right whatever project the user last
        # switched to.
        "url": f"{reverse('api-operation', args=[operation.pk])}?project={project_id}",
    }


@login_required
def session_detail(request: HttpRequest, external_id: str) -> HttpResponse:
    """A session: the stacked chart of every turn, its settings and its latest turn's regions."""
    access = page_access(request)
    session = page_session(access, external_id)
    turns = list(selectors.turn_list(session=session))
    latest = turns[-1] if turns else None
    b = selectors.session_budget(session)
    chart = charts.chart_data(
        session=session, turns=turns, turn_url=reverse("turn-jump", args=[session.external_id])
    )
    operation_page = Paginator(
        selectors.operation_list_for_session(session=session), OPERATIONS_PAGE_SIZE
    ).get_page(request.GET.get("operations"))
    operation_rows = [
        _operation_row(operation, project_id=session.project_id)
        for operation in operation_page.object_list
    ]
    unread = (
        unread_selectors.unread_call_list_for_session(session=session)[:UNREAD_SHOWN]
        if session.unread_call_count
        else []
    )
    rows: list[dict[str, Any]] = []
    if latest is not None:
        reserve = latest.max_output_tokens or session.output_reserve
        rows = charts.breakdown(
            latest.regions,
            window=latest.context_window,
            reserve=reserve,
            total=latest.total_tokens,
        )
    return render(
        request,
        "contexts/session.html",
        {
            "access": access,
            "session": session,
            "budget": b,
            "policy": selectors.policy_label(selectors.session_policy(session)),
            "latest": latest,
            "latest_fill": (latest.total_tokens / b.usable) if latest and b.usable else 0.0,
            "breakdown": rows,
            "chart": chart,
            "live": live_urls(external_id=session.external_id, project_id=session.project_id),
            "events": charts.turn_events(turns),
            "operations": operation_rows,
            "operation_page": operation_page,
            "present": {name for t in turns for name, n in t.regions.items() if n},
            "unread": unread_rows(unread),
            # The recording proxy sends this session's calls compacted (managed mode).
            "managed": latest is not None
            and any(e.get("type") == "managed" for e in (latest.events or [])),
        },
    )
