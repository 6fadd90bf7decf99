"""The apply form's page endpoint: an operator applies the previewed strategy and is sent back
to the preview page, where a progress bar follows the operation live."""

from __future__ import annotations

import json
from urllib.parse import quote, urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseForbidden
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from compaction.errors import StrategyError
from ctxweb.contexts.services import operations
from ctxweb.front.access import page_access, page_session


def _refuse(name: str) -> None:
    raise ValueError(f"{name} is not a JSON number")


@login_required
@require_POST
def operation_apply(request: HttpRequest, external_id: str) -> HttpResponse:
    """``POST /sessions/{external_id}/operations/`` with ``strategy`` and ``params`` (JSON)."""
    access = page_access(request)
    session = page_session(access, external_id)
    if not access.can_operate:
        return HttpResponseForbidden("Only operators may apply operations.")
    preview = reverse("session-preview", args=[external_id])
    strategy = request.POST.get("strategy", "")
    try:
        params = json.loads(request.POST.get("params") or "{}", parse_constant=_refuse)
    except (ValueError, RecursionError):
        messages.error(request, "The parameters are not valid JSON.")
        return redirect(f"{preview}?strategy={quote(strategy)}")
    if params is None:
        params = {}
    if not isinstance(params, dict):
        messages.error(request, "Not applied: the parameters must be a JSON object of names.")
        return redirect(f"{preview}?strategy={quote(strategy)}")
    try:
        operation = operations.operation_create(
            session=session, strategy=strategy, params=params, actor=request.user
        )
    except StrategyError as exc:
        messages.error(request, f"Not applied: {exc}")
        return redirect(f"{preview}?strategy={quote(strategy)}")
    except operations.OperationConflict as exc:
        messages.error(request, str(exc))
        active = exc.active.pk if exc.active is not None else ""
        return redirect(f"{preview}?strategy={quote(strategy)}&operation={active}")
    # Back to the same preview (its parameters kept), now showing the operation's progress.
    query = {"strategy": strategy, **{k: v for k, v in params.items() if v is not None}}
    query["operation"] = operation.pk
    return redirect(f"{preview}?{urlencode(query, doseq=True)}")
