"""Dashboard pages: a turn's inspector (every message with its tokens, biggest first, in pages)
and the jump to a turn by number. Works without JavaScript; a constant number of queries."""

from __future__ import annotations

import json
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from ctxweb.contexts import selectors
from ctxweb.front import charts
from ctxweb.front.access import page_access, page_session
from ctxweb.numbers import parse_whole

#: Text longer than this (characters or lines) is collapsed behind a <details>.
LONG_CHARS = 1500
LONG_LINES = 25


@login_required
def turn_jump(request: HttpRequest, external_id: str) -> HttpResponse:
    """``turns/?index=N``: the inspector of turn N (clamped); the latest turn without one."""
    session = page_session(page_access(request), external_id)
    if session.turn_count == 0:
        return redirect("session-detail", external_id=session.external_id)
    raw = request.GET.get("index", "")
    asked = parse_whole(raw.removeprefix("-"))
    index = session.turn_count - 1 if asked is None else (-asked if raw.startswith("-") else asked)
    index = max(0, min(index, session.turn_count - 1))
    return redirect("turn-detail", external_id=session.external_id, index=index)


# --- turn inspector ---------------------------------------------------------------------------


def _is_long(text: str) -> bool:
    return len(text) > LONG_CHARS or text.count("\n") > LONG_LINES


def _preview(text: str, limit: int = 160) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _tool_names(tools: Any, namespace: str = "") -> list[dict[str, str]]:
    """The tools an item defines (namespaces flattened), as name and description."""
    out: list[dict[str, str]] = []
    for tool in tools if isinstance(tools, list) else []:
        if not isinstance(tool, dict):
            continue
        name = str(tool.get("name") or tool.get("type") or "")
        if tool.get("type") == "namespace":
            out += _tool_names(tool.get("tools"), f"{namespace}{name}.")
            continue
        description = str(tool.get("description") or "")
        out.append({"name": namespace + name, "description": _preview(description, 120)})
    return out


def _item_view(raw: dict[str, Any], text: str) -> dict[str, Any]:
    """An item or message kept verbatim (a type or role no adapter reads): its type, the tools
    it defines when it defines some (Codex's ``additional_tools``), and its JSON."""
    kind = raw.get("type") or "item"
    if "role" in raw and kind in ("message", "item"):
        kind = f"role {raw['role']}"
    return {
        "kind": "item",
        "item_type": str(kind),
        "tools": _tool_names(raw.get("tools")),
        "text": text,
        "long": _is_long(text) or len(text) > 400,
        "chars": len(text),
    }


def _part(part: Any) -> dict[str, Any]:
    """A stored part as the inspector shows it (text measured, arguments pretty-printed)."""
    if not isinstance(part, dict):
        return {"kind": "unknown", "text": str(part), "long": False}
    kind = part.get("kind", "unknown")
    view: dict[str, Any] = {"kind": kind}
    raw = (part.get("extra") or {}).get("ctxweb:raw") if kind == "text" else None
    if isinstance(raw, dict):
        return _item_view(raw, str(part.get("text", "")))
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
    items = [
        f"{p['item_type']} ({len(p['tools'])} tools)" if p["tools"] else p["item_type"]
        for p in parts
        if p["kind"] == "item"
    ]
    return {
        **message,
        "parts": parts,
        "name": data.get("name"),
        "summary": _preview(first_text, 120) if first_text else ", ".join(calls or items),
    }


#: Event types shown as warnings on the turn page (something went other than asked).
WARNING_EVENTS = frozenset({"warning", "error"})


def _whole(value: Any) -> int | None:
    """An id stored in an event, if it is one (events are JSON a client may have shaped)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def event_view(event: Any) -> dict[str, Any]:
    """A stored turn event as the turn page shows it: its type, source and message, the
    operation it names (``managed``: the one whose context the proxy sent; ``operation``: the
    one the turn continues from), its tokens before and after, and whether it is a warning.
    Whatever else it holds is kept, as text, under ``detail``."""
    if not isinstance(event, dict):
        return {"type": "unknown", "source": "", "message": str(event), "warning": False}
    kind = str(event.get("type") or "unknown")
    known = {"type", "source", "message", "operation", "operation_id", "strategy"}
    known |= {"tokens_before", "tokens_after"}
    detail = {k: v for k, v in event.items() if k not in known}
    return {
        "type": kind,
        "source": str(event.get("source") or ""),
        "message": str(event.get("message") or ""),
        "operation": _whole(event.get("operation") or event.get("operation_id")),
        "strategy": str(event.get("strategy") or ""),
        "tokens_before": event.get("tokens_before"),
        "tokens_after": event.get("tokens_after"),
        "warning": kind in WARNING_EVENTS,
        "detail": json.dumps(detail, sort_keys=True, default=str) if detail else "",
    }


#: Messages per page in the turn inspector.
INSPECTOR_PAGE_SIZE = 200

#: How each kind of item is named on the page.
ITEM_KINDS = {
    "tool_definition": "tool definition",
    "tool_call": "tool call",
    "tool_output": "tool output",
    "file": "file",
    "instruction": "instruction",
    "system_prompt": "system prompt",
    "message_text": "text",
    "reasoning": "reasoning",
    "image": "image",
    "media": "media",
    "summary": "summary",
    "raw": "kept verbatim",
    "unattributed": "framing",
}


#: The kinds whose group (MCP server, tool) is worth showing beside their name.
GROUPED = ("tool_definition", "tool_call", "tool_output", "file", "instruction")


def attribution_view(attribution: dict[str, Any]) -> dict[str, Any]:
    """A turn's attribution (:func:`selectors.turn_attribution`) as the turn page shows it: each
    item with its kind's name, a bar relative to its region's largest item, and the message
    positions it is at; the changes with their kind's name."""
    regions = []
    for region in attribution["regions"]:
        largest = max((i["tokens"] for i in region["items"]), default=0)
        items = [
            {
                **item,
                "kind_label": ITEM_KINDS.get(item["kind"], item["kind"]),
                "bar": item["tokens"] / largest if largest else 0.0,
                "positions": [w for w in item["where"] if isinstance(w, int)],
            }
            for item in region["items"]
        ]
        regions.append({**region, "items": items})
    changes = attribution["changes"]
    if changes is not None:
        changes = {
            **changes,
            "rows": [
                {**row, "status": status, "kind_label": ITEM_KINDS.get(row["kind"], row["kind"])}
                for status in ("new", "grown", "shrunk", "gone")
                for row in changes[status]
            ],
        }
    return {**attribution, "regions": regions, "changes": changes, "grouped_kinds": GROUPED}


@login_required
def turn_detail(request: HttpRequest, external_id: str, index: int) -> HttpResponse:
    """A turn's inspector: every message with role, region, tokens, placeholders and links."""
    access = page_access(request)
    session = page_session(access, external_id)
    turn = selectors.turn_get(session=session, index=index)
    if turn is None:
        raise Http404("Turn not found")
    turn.session = session
    order = "size" if request.GET.get("order") == "size" else "position"
    # A long agent turn holds thousands of messages: only one page of them is loaded and shown.
    inspector = selectors.turn_inspector(
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
    artifacts = selectors.artifacts_by_id(
        project=access.project, ids=[a for a in artifact_ids if a]
    )
    b = selectors.session_budget(session, window=turn.context_window)
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
            "secrets": [
                *(s for s in detail["secrets"] if s["position"] is None),
                *inspector["secrets"],
            ],
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
            "turn_events": [event_view(e) for e in turn.events or []],
            "attribution": attribution_view(selectors.turn_attribution(turn=turn)),
            "breakdown": charts.breakdown(
                turn.regions, window=turn.context_window, reserve=reserve, total=turn.total_tokens
            ),
            "previous": index - 1 if index > 0 else None,
            "next": index + 1 if index + 1 < session.turn_count else None,
            "last": session.turn_count - 1,
        },
    )
