"""Template filters and tags of the dashboard: numbers, shares, JSON, artifact pointers and the
project switcher. Content is always escaped before anything is marked safe."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta
from typing import Any

from django import template
from django.utils import timezone
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from django.utils.timesince import timesince

from ctxweb.accounts.access import SESSION_PROJECT_KEY
from ctxweb.accounts.selectors import project_list_for_user
from ctxweb.front.charts import fill_level as _fill_level

register = template.Library()

# Matched on ESCAPED text. Ids are restricted to characters that escaping never produces or
# changes, so a match can neither split an HTML entity nor smuggle markup into the href.
POINTER = re.compile(
    r"\[EXTERNALIZED:(?P<id>[A-Za-z0-9_.-]+)\]"
    r"|\[EXTERNALIZED: (?P<llm4s>content_[0-9a-f]{64}) \| [A-Z]+ \| [^\]]*\]"
)


@register.filter(is_safe=True)
def pointers(text: Any) -> SafeString:
    """``text`` escaped, then each artifact pointer (``[EXTERNALIZED:<id>]``, LLM4S's
    ``[EXTERNALIZED: content_<sha> | TYPE | summary]``) turned into a link to its artifact page."""
    escaped = str(escape("" if text is None else str(text)))

    def link(match: re.Match[str]) -> str:
        artifact = match.group("id") or match.group("llm4s")
        return f'<a class="artifact-link" href="/artifacts/{artifact}/">{match.group(0)}</a>'

    return mark_safe(POINTER.sub(link, escaped))  # escaped above; links made of safe characters


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
