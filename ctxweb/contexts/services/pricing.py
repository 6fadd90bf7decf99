"""What a plan does to the provider's prompt cache, priced: the numbers every preview shows beside
before and after (leading tokens kept byte-identical, tokens written to the cache again, the next
call's input cost before and after at the model's list prices).

Prices come from the table in :mod:`compaction.cache`, overridden or extended by the setting
``CTXWEB_MODEL_PRICES`` (``{"<model prefix>": {"input", "cache_write", "cache_read"}}``, USD per
million tokens).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings

from compaction.cache import PRICES, PRICES_DATE, ModelPrice, cache_impact, call_cost, price_for
from compaction.messages import Context
from compaction.strategies import Plan
from ctxweb.contexts.services.counting import counter_for


def model_prices() -> dict[str, ModelPrice]:
    """The price table: the library's, with ``CTXWEB_MODEL_PRICES`` over it (a malformed entry
    is skipped: prices inform, they never break a preview)."""
    table = dict(PRICES)
    extra = getattr(settings, "CTXWEB_MODEL_PRICES", None) or {}
    if isinstance(extra, Mapping):
        for name, entry in extra.items():
            try:
                table[str(name)] = ModelPrice(
                    float(entry["input"]),
                    float(entry.get("cache_write", entry["input"])),
                    float(entry.get("cache_read", entry["input"])),
                )
            except (TypeError, KeyError, ValueError, AttributeError):
                continue
    return table


def plan_cache(
    *, context: Context, plan: Plan, encoding: str, model: str | None = None
) -> dict[str, Any]:
    """The prompt-cache numbers of ``plan`` made on ``context``, as JSON-ready data.

    ``model`` defaults to the request's own ``model``; costs are None for a model the price
    table does not know.
    """
    impact = cache_impact(
        context,
        plan.context,
        counter_for(encoding),
        totals=(int(plan.before.total), int(plan.after.total)),
    )
    if model is None:
        found = context.extra.get("model")
        model = found if isinstance(found, str) else None
    priced = price_for(model, model_prices())
    out: dict[str, Any] = {
        "prefix_messages": impact.prefix_messages,
        "prefix_tokens": impact.prefix_tokens,
        "rewrite_tokens": impact.rewrite_tokens,
        "model": model,
        "priced_as": None,
        "prices": None,
        "next_call_cost_before": None,
        "next_call_cost_after": None,
    }
    if priced is not None:
        name, price = priced
        before, after = call_cost(impact, price)
        custom = name not in PRICES or PRICES[name] != price
        out.update(
            priced_as=name,
            prices={
                "input": price.input,
                "cache_write": price.cache_write,
                "cache_read": price.cache_read,
                "per": "USD per million tokens",
                "as_of": "CTXWEB_MODEL_PRICES" if custom else PRICES_DATE,
            },
            next_call_cost_before=round(before, 6),
            next_call_cost_after=round(after, 6),
        )
    return out
