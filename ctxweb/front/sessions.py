"""Dashboard pages: the sessions list, a session's chart and a turn's inspector.

Each view parses, authorizes through :func:`ctxweb.accounts.access.access_for_request`, reads
through selectors and renders. Every page works without JavaScript; scripts only add the chart,
tooltips and keyboard shortcuts. Each runs a constant number of queries.
"""

from __future__ import annotations

import shlex
from typing import Any
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from ctxweb.accounts.access import Access, access_for_request
from ctxweb.contexts import selectors
from ctxweb.contexts.models import Session
from ctxweb.front import charts

PAGE_SIZE = 25
#: Text longer than this (characters or lines) is collapsed behind a <details>.
LONG_CHARS = 1500
LONG_LINES = 25
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


def _session(access: Access, external_id: str) -> Session:
    session = selectors.session_get(project=access.project, external_id=external_id)
    if session is None:
        raise Http404("Session not found")
    return session


def _access(request: HttpRequest) -> Access:
    access = access_for_request(request)
    if access is None:  # a member of no project: nothing of any project exists for them
        raise Http404("Not found")
    return access


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
    totals = charts.session_totals(session_ids=[s.pk for s in page.object_list])
    rows = []
    for session in page.object_list:
        b = charts.session_budget(session)
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
        filtered and Session.objects.filter(project=access.project).exists()
    )
    context = {
        "access": access,
        "page": page,
        "rows": rows,
        "q": q,
        "model": model,
        "fill": fill,
        "sort": sort,
        "models": charts.session_models(project=access.project),
        "fill_bands": [(k, v[0]) for k, v in charts.FILL_BANDS.items()],
        "sorts": list(charts.SORTS.items()),
        "filtered": filtered,
        "project_has_sessions": project_has_sessions,
        "sort_links": sort_links,
        "page_prefix": query(page="") + ("&" if query(page="") != "?" else ""),
        "fill_near": charts.FILL_NEAR,
        "fill_over": charts.FILL_OVER,
    }
    if not project_has_sessions:
        context.update(_first_turn_help(request, access))
    return render(request, "contexts/sessions.html", context)


def _first_turn_help(request: HttpRequest, access: Access) -> dict[str, str]:
    """How to post a first turn: a curl command against this server, and how to get a key."""
    url = request.build_absolute_uri("/api/v1/sessions/my-first-session/turns")
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


@login_required
def session_detail(request: HttpRequest, external_id: str) -> HttpResponse:
    """A session: the stacked chart of every turn, its settings and its latest turn's regions."""
    access = _access(request)
    session = _session(access, external_id)
    turns = list(selectors.turn_list(session=session))
    latest = turns[-1] if turns else None
    b = charts.session_budget(session)
    chart = charts.chart_data(session=session, turns=turns)
    chart["turn_url"] = reverse("turn-jump", args=[session.external_id])
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
            "policy": charts.POLICY,
            "latest": latest,
            "latest_fill": (latest.total_tokens / b.usable) if latest and b.usable else 0.0,
            "breakdown": rows,
            "chart": chart,
            "events": charts.turn_events(turns),
            "present": {name for t in turns for name, n in t.regions.items() if n},
        },
    )


@login_required
def turn_jump(request: HttpRequest, external_id: str) -> HttpResponse:
    """``turns/?index=N``: the inspector of turn N (clamped); the latest turn without one."""
    session = _session(_access(request), external_id)
    if session.turn_count == 0:
        return redirect("session-detail", external_id=session.external_id)
    raw = request.GET.get("index", "")
    index = int(raw) if raw.lstrip("-").isdigit() else session.turn_count - 1
    index = max(0, min(index, session.turn_count - 1))
    return redirect("turn-detail", external_id=session.external_id, index=index)


# --- turn inspector ---------------------------------------------------------------------------


def _is_long(text: str) -> bool:
    return len(text) > LONG_CHARS or text.count("\n") > LONG_LINES


def _preview(text: str, limit: int = 160) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _part(part: Any) -> dict[str, Any]:
    """A stored part as the inspector shows it (text measured, arguments pretty-printed)."""
    if not isinstance(part, dict):
        return {"kind": "unknown", "text": str(part), "long": False}
    kind = part.get("kind", "unknown")
    view: dict[str, Any] = {"kind": kind}
    if kind in ("text", "reasoning"):
        text = str(part.get("text", ""))
        view.update(
            text=text,
            long=_is_long(text),
            preview=_preview(text),
            chars=len(text),
            redacted=bool(part.get("redacted")),
        )
    elif kind == "tool_call":
        arguments = str(part.get("arguments", ""))
        view.update(
            name=str(part.get("name", "")),
            id=str(part.get("id", "")),
            arguments=arguments,
            long=_is_long(arguments),
            chars=len(arguments),
        )
    elif kind == "tool_result":
        content = [_part(p) for p in part.get("content", []) or []]
        view.update(
            tool_call_id=str(part.get("tool_call_id", "")),
            is_error=bool(part.get("is_error")),
            content=content,
        )
    elif kind == "media":
        data = part.get("data") or ""
        view.update(
            media=part.get("media", "file"),
            media_type=part.get("media_type") or "",
            url=part.get("url") or "",
            width=part.get("width"),
            height=part.get("height"),
            data_bytes=len(data) * 3 // 4,
        )
    else:
        view.update(text=str(part), long=False)
    return view


def _message_view(message: dict[str, Any]) -> dict[str, Any]:
    data = message["message"]
    parts = [_part(p) for p in data.get("parts", [])]
    first_text = next((p.get("text", "") for p in parts if p["kind"] == "text"), "")
    if not first_text:
        first_text = next(
            (
                c.get("text", "")
                for p in parts
                if p["kind"] == "tool_result"
                for c in p["content"]
                if c["kind"] == "text"
            ),
            "",
        )
    calls = [p["name"] for p in parts if p["kind"] == "tool_call"]
    return {
        **message,
        "parts": parts,
        "name": data.get("name"),
        "summary": _preview(first_text, 120) if first_text else ", ".join(calls),
    }


#: Messages per page in the turn inspector.
INSPECTOR_PAGE_SIZE = 200


@login_required
def turn_detail(request: HttpRequest, external_id: str, index: int) -> HttpResponse:
    """A turn's inspector: every message with role, region, tokens, placeholders and links."""
    access = _access(request)
    session = _session(access, external_id)
    turn = selectors.turn_get(session=session, index=index)
    if turn is None:
        raise Http404("Turn not found")
    turn.session = session
    order = "size" if request.GET.get("order") == "size" else "position"
    # A long agent turn holds thousands of messages: only one page of them is loaded and shown.
    inspector = charts.turn_inspector(
        turn=turn,
        order=order,
        page_number=request.GET.get("page"),
        page_size=INSPECTOR_PAGE_SIZE,
    )
    detail = selectors.turn_detail(turn=turn, messages=inspector["messages"])
    largest = inspector["largest"]
    messages = [_message_view(m) for m in inspector["messages"]]
    diff = inspector["diff"]
    added = set(diff["added"])
    for m in messages:
        m["added"] = not diff["first"] and m["position"] in added
        m["bar"] = m["tokens"] / largest if largest else 0.0
        m["share"] = m["tokens"] / turn.total_tokens if turn.total_tokens else 0.0
        m["region_list"] = sorted(m["regions"].items(), key=lambda kv: -kv[1])
    removed = [{**r, "view": _message_view({**r, "regions": {}})} for r in diff["removed"]]
    artifact_ids = {p["artifact_id"] for m in messages for p in m["placeholders"]}
    artifacts = charts.artifacts_by_id(project=access.project, ids=[a for a in artifact_ids if a])
    b = charts.session_budget(session, window=turn.context_window)
    reserve = turn.max_output_tokens or session.output_reserve
    system = detail["system"]
    if system is not None:
        system = {**system, "parts": [_part(p) for p in system["message"].get("parts", [])]}
    tools = detail["tools"]
    if tools is not None:
        tools = {
            **tools,
            "tools": [
                {
                    "name": t.get("name", ""),
                    "description": t.get("description", ""),
                    "parameters": t.get("parameters", {}),
                }
                for t in tools["tools"]
            ],
        }
    response = detail["response"]
    response_views = None
    if isinstance(response, list):
        response_views = [
            _message_view({"message": r}) for r in response if isinstance(r, dict) and "parts" in r
        ]
    return render(
        request,
        "contexts/turn.html",
        {
            "access": access,
            "session": session,
            "turn": turn,
            "detail": detail,
            "items": messages,  # not "messages": that name is the flash messages' in base.html
            "page": inspector["page"],
            "message_count": inspector["count"],
            "order": order,
            "diff": diff,
            "removed": removed,
            "artifacts": artifacts,
            "system": system,
            "tools": tools,
            "response_views": response_views,
            "response_raw": response if response is not None and not response_views else None,
            "budget": b,
            "fill": turn.total_tokens / b.usable if b.usable else 0.0,
            "breakdown": charts.breakdown(
                turn.regions, window=turn.context_window, reserve=reserve, total=turn.total_tokens
            ),
            "previous": index - 1 if index > 0 else None,
            "next": index + 1 if index + 1 < session.turn_count else None,
            "last": session.turn_count - 1,
        },
    )
