"""Template filters and tags of the dashboard: numbers, shares, JSON, artifact pointers and the
project switcher. Content is always escaped before anything is marked safe."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from django import template
from django.urls import NoReverseMatch, reverse
from django.utils import timezone
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe
from django.utils.timesince import timesince

from ctxweb.accounts.access import SESSION_PROJECT_KEY
from ctxweb.accounts.selectors import project_list_for_user
from ctxweb.contexts import selectors
from ctxweb.front.charts import fill_level as _fill_level

register = template.Library()


@register.filter(is_safe=True)
def pointers(text: Any) -> SafeString:
    """``text`` escaped, each artifact pointer in it (``[EXTERNALIZED:<id>]``, LLM4S's
    ``[EXTERNALIZED: content_<sha> | TYPE | summary]``, as the library finds them) a link to its
    artifact page. Pointers are found on the raw text and every piece is escaped on its own; the
    link's URL is reversed, so an id can neither break out of the attribute nor add markup."""
    raw = "" if text is None else str(text)
    pieces: list[str] = []
    last = 0
    for start, end, artifact in selectors.find_artifact_pointers(raw):
        try:
            url = reverse("artifact-detail", args=[artifact])
        except NoReverseMatch:  # an id with a slash names no artifact page
            continue
        pieces.append(escape(raw[last:start]))
        pieces.append(format_html('<a class="artifact-link" href="{}">{}</a>', url, raw[start:end]))
        last = end
    pieces.append(escape(raw[last:]))
    return mark_safe("".join(pieces))  # every piece escaped above


@register.filter
def pretty_json(value: Any) -> str:
    """JSON (a string holding JSON, or a value) indented for reading; other strings unchanged.
    The result is plain text: the template escapes it."""
    if isinstance(value, str):
        text = value
        try:
            value = json.loads(text)
        except ValueError:
            return text
        if isinstance(value, str):
            return text
    try:
        return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False)
    except (TypeError, ValueError):
        return str(value)


@register.filter
def tokens(value: Any) -> str:
    """An integer with thousands separators (``12,345``); ``—`` when unknown."""
    if value is None or value == "":
        return "—"
    try:
        return f"{int(value):,}"
    except (TypeError, ValueError):
        return str(value)


@register.filter
def pct(value: Any, digits: int = 0) -> str:
    """A share as a percentage (``0.123`` → ``12%``); ``—`` when unknown."""
    if value is None or value == "":
        return "—"
    try:
        return f"{float(value):.{int(digits)}%}"
    except (TypeError, ValueError):
        return "—"


@register.filter
def width(value: Any) -> str:
    """A share as a CSS width percentage, clamped to [0, 100] (``0.5`` → ``50.00%``)."""
    try:
        share = float(value)
    except (TypeError, ValueError):
        share = 0.0
    return f"{max(0.0, min(share, 1.0)) * 100:.2f}%"


@register.filter
def fill_level(value: Any) -> str:
    """``ok``, ``near`` or ``over`` for a fill (share of the usable window)."""
    try:
        return _fill_level(float(value))
    except (TypeError, ValueError):
        return "ok"


@register.filter
def ago(value: Any) -> str:
    """How long ago a datetime was, for people: ``just now``, ``5 minutes ago``."""
    if not isinstance(value, datetime):
        return ""
    if timezone.now() - value < timedelta(minutes=1):
        return "just now"
    return f"{timesince(value)} ago"


@register.filter
def label(value: Any) -> str:
    """A region or kind name for people: ``tool_results`` → ``tool results``."""
    return str(value).replace("_", " ")


@register.filter
def get(mapping: Any, key: Any) -> Any:
    """``mapping[key]`` (None when absent), for dicts keyed by a variable."""
    try:
        return mapping.get(key)
    except AttributeError:
        return None


@register.inclusion_tag("accounts/_project_switcher.html", takes_context=True)
def project_switcher(context: template.Context) -> dict[str, Any]:
    """The header's project switcher: only the user's own projects (one query)."""
    request = context.get("request")
    user = getattr(request, "user", None)
    if request is None or user is None or not user.is_authenticated:
        return {"projects": [], "current": None}
    projects = list(project_list_for_user(user=user))
    chosen = request.session.get(SESSION_PROJECT_KEY)
    current = next((p for p in projects if p.pk == chosen), projects[0] if projects else None)
    return {
        "projects": projects,
        "current": current,
        "next": request.get_full_path(),
        "csrf_token": context.get("csrf_token"),
    }


#: How each way in reads on a session's line (a transcript format otherwise).
SOURCES = {
    "otel": "captured from OpenTelemetry spans",
    "langfuse": "captured from Langfuse batches",
    "proxy": "recorded by the proxy",
}


@register.filter
def source_label(source: str) -> str:
    """Where a session's turns came from, in words."""
    return SOURCES.get(source, f"imported from a {source} transcript")
