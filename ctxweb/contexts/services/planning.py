"""Plans: the one place ctxweb computes what a strategy would do to a context.

Every interface (REST preview, the preview page, operations) calls these functions, so a preview
and an applied operation are computed the same way: the same parameter validation, the same
counter for the session's encoding and the same default summarizer. Computing a plan writes
nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from compaction.messages import (
    Context,
    MediaPart,
    Message,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    parse,
    render,
)
from compaction.regions import USED_REGIONS, RegionTotals
from compaction.strategies import Edit, Plan, get_strategy, list_strategies
from compaction.summarizers import Summarizer
from ctxweb.contexts import selectors
from ctxweb.contexts.models import Session
from ctxweb.contexts.services import budgets
from ctxweb.contexts.services.counting import counter_for, encoding_for
from ctxweb.contexts.services.llm import summarizer_from_settings

# every preview shows the plan's prompt-cache numbers beside it
from ctxweb.contexts.services.pricing import plan_cache as plan_cache

#: Characters of an edited message shown beside the edit on the preview page.
EXCERPT_CHARS = 300


class PreviewUnavailable(Exception):
    """There is no context to preview: the session has no turns, or not the one asked for.

    ``path`` names the request field at fault (``turn``), as the API's error ``fields`` do.
    """

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason

    def fields(self) -> dict[str, str]:
        """The error as ``{path: reason}``."""
        return {self.path: self.reason}


def strategy_catalog() -> list[dict[str, Any]]:
    """Every registered strategy as JSON-ready data: id, description, source and parameters
    (name, type, default, min, max, choices, help), in the design's order."""
    return [strategy.describe() for strategy in list_strategies()]


#: Parameters that mean the model's window or output reserve, whatever a seed calls them.
WINDOW_PARAMS = ("context_window", "context_limit", "max_input_length")
RESERVE_PARAMS = ("output_reserve",)


def session_defaults(*, session: Session, strategy: str) -> dict[str, Any]:
    """The strategy's defaults with its window and reserve parameters taken from ``session``
    (within each parameter's range), so a preview form starts from the session's model. A
    session with a known window lends its reserve even when that is 0 (no max output tokens
    sent), as its usable line and compaction trigger count it: a strategy's own fallback
    (32,000) would leave nothing usable in a small window."""
    values: dict[str, Any] = {}
    for param in get_strategy(strategy).params:
        value = param.default
        if param.name in WINDOW_PARAMS and session.context_window:
            value = session.context_window
        elif param.name in RESERVE_PARAMS and (session.output_reserve or session.context_window):
            value = session.output_reserve
        if value is not param.default and isinstance(value, int):
            if param.min is not None:
                value = max(value, int(param.min))
            if param.max is not None:
                value = min(value, int(param.max))
        values[param.name] = _json_value(value)
    return values


def default_summarizer() -> Summarizer:
    """The configured LLM summarizer when there is one, else the offline fact summarizer."""
    return summarizer_from_settings()


def plan_for_context(
    *,
    context: Context,
    strategy: str,
    params: Mapping[str, Any] | None,
    encoding: str,
    summarizer: Summarizer | None = None,
) -> Plan:
    """What ``strategy`` would do to ``context``, counted with ``encoding``. Writes nothing.

    Raises :class:`~compaction.errors.StrategyError` on path ``strategy`` for an unknown id and
    ``params.<name>`` for a bad parameter (missing parameters take their defaults).
    """
    chosen = get_strategy(strategy)
    resolved = chosen.validate(params)
    return chosen.plan(
        context,
        resolved,
        counter=counter_for(encoding),
        summarizer=summarizer if summarizer is not None else default_summarizer(),
    )


def preview_plan(
    *,
    context: Context,
    strategy: str,
    params: Mapping[str, Any] | None,
    encoding: str,
) -> Plan:
    """:func:`plan_for_context` for a preview: on a thread of its own, a few at a time, stopped
    after ``CTXWEB_PREVIEW_SECONDS`` (:mod:`~ctxweb.contexts.services.budgets`), so one costly
    preview never holds up the requests beside it.

    Raises what :func:`plan_for_context` raises, :class:`~.budgets.OverBudget` when the plan ran
    out of time and :class:`~.budgets.Busy` when every preview slot stayed taken.
    """
    return budgets.run_within_budget(
        lambda: plan_for_context(
            context=context, strategy=strategy, params=params, encoding=encoding
        ),
        name="preview",
    )


def preview_request_context(*, format: str, request: Mapping[str, Any]) -> tuple[Context, str]:
    """A posted request parsed for a stateless preview, and the encoding its model counts with.
    Raises :class:`~compaction.errors.FormatError` naming the bad field."""
    context = parse(format, request)
    model = context.extra.get("model")
    encoding, _ = encoding_for(model if isinstance(model, str) else None)
    return context, encoding


def _json_value(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _totals(totals: RegionTotals) -> dict[str, Any]:
    return {"regions": dict(totals.regions), "total": int(totals.total)}


def edit_to_json(edit: Edit) -> dict[str, Any]:
    return {
        "kind": edit.kind,
        "message_index": edit.message_index,
        "part_index": edit.part_index,
        "tokens_before": edit.tokens_before,
        "tokens_after": edit.tokens_after,
        "tokens_saved": edit.tokens_before - edit.tokens_after,
        "detail": edit.detail,
        "artifact_id": edit.artifact_id,
    }


def regions_saved(plan: Plan) -> dict[str, int]:
    """Tokens saved per used region (negative where the plan adds, as a summary does)."""
    before, after = plan.before.regions, plan.after.regions
    return {name: before.get(name, 0) - after.get(name, 0) for name in USED_REGIONS}


def plan_to_json(plan: Plan) -> dict[str, Any]:
    """A plan in the contract's shape. Artifacts are listed without their content."""
    return {
        "strategy": plan.strategy,
        "params": {name: _json_value(value) for name, value in plan.params.items()},
        "context": {"format": plan.context.format, "request": render(plan.context)},
        "before": _totals(plan.before),
        "after": _totals(plan.after),
        "tokens_saved": plan.tokens_saved,
        "regions_saved": regions_saved(plan),
        "edits": [edit_to_json(edit) for edit in plan.edits],
        "warnings": list(plan.warnings),
        "artifacts": [
            {
                "id": artifact.id,
                "kind": artifact.kind,
                "size": artifact.size,
                "tokens": artifact.tokens,
                "summary": artifact.summary,
            }
            for artifact in plan.artifacts
        ],
    }


def session_preview_context(*, session: Session, turn: int | None) -> Context:
    """The context a session preview works on: turn ``turn``'s, else the session's managed context.

    Raises :class:`PreviewUnavailable` on path ``turn`` when there is no such turn.
    """
    if turn is None:
        # The managed context: the latest turn with every operation applied since.
        try:
            return selectors.managed_context(session=session).context
        except selectors.NoContext:
            raise PreviewUnavailable("turn", "the session has no turns yet") from None
    row = selectors.turn_get(session=session, index=turn)
    if row is None:
        raise PreviewUnavailable("turn", f"the session has no turn {turn}")
    return selectors.turn_context(turn=row)


def _part_text(part: Part) -> str:
    if isinstance(part, TextPart | ToolResultPart | ReasoningPart):
        return part.text
    if isinstance(part, ToolCallPart):
        return f"{part.name}({part.arguments})"
    if isinstance(part, MediaPart):
        return f"[{part.media}]"
    return ""


def _message_text(message: Message) -> str:
    return "\n".join(text for text in (_part_text(p) for p in message.parts) if text)


def edit_excerpt(context: Context, edit: Edit, *, limit: int = EXCERPT_CHARS) -> str:
    """The start of what ``edit`` touches in the input ``context`` (plain text, to be escaped
    wherever it is shown); empty for an inserted summary or a position outside the context."""
    if edit.kind == "insert-summary" or not 0 <= edit.message_index < len(context.messages):
        return ""
    message = context.messages[edit.message_index]
    if edit.part_index is not None and 0 <= edit.part_index < len(message.parts):
        text = _part_text(message.parts[edit.part_index])
    else:
        text = _message_text(message)
    return text if len(text) <= limit else text[:limit] + "…"


def edit_role(context: Context, edit: Edit) -> str:
    """The role of the input message ``edit`` touches ("" for an inserted summary)."""
    if edit.kind == "insert-summary" or not 0 <= edit.message_index < len(context.messages):
        return ""
    return context.messages[edit.message_index].role
