"""Every strategy plans over 1 MB of hostile text in time linear in it.

Each context holds one kind of text that makes regular expressions backtrack (repeated keywords
with no full stop, one keyword then a long sentence, long runs of one character, an identifier
before a long run of spaces, deep nesting, JSON escapes), 1 MB of it over a user message, a tool
call, its result and an assistant message, with parameters small enough that every step of every
strategy runs. A quadratic step takes many minutes on 1 MB; a watchdog fails the test after
:data:`WATCHDOG_SECONDS`, far above the fraction of a second a linear plan takes, so that a
regression fails here instead of hanging CI. That is a hang detector, not a timing assertion.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from compaction.messages.model import Context
from compaction.strategies import Strategy, list_strategies
from compaction.summarizers import FactSummarizer
from compaction.tokens import get_tokenizer
from tests.support.hangs import hang_detector
from tests.support.messages import Counter, a, atc, ctx, sys, t, u

SIZE = 1_000_000
WATCHDOG_SECONDS = 60
WINDOW_PARAMS = ("context_window", "context_limit", "max_input_length")
#: Parameters whose minimum turns the strategy off: nanobot's budget 0 is "no limit" and its
#: first call of a user turn is never trimmed.
OVERRIDES = {"budget": 1_000, "iteration": 2}

#: Units of text that cost a backtracking regex time quadratic (or worse) in their length.
HOSTILE = {
    "keywords-no-full-stop": "error failed tool call result must decided chosen ",
    "one-sentence-then-none": "",  # "must. " then "a " to the end, built below
    "one-character": "a",
    "capitals": "A",
    "digits": "1",
    "identifier-then-spaces": "id" + " " * 999,
    "path-segments": "a/",
    "dotted-names": "a.",
    "nesting": "[",
    "escapes": "\\",
}


def _text(kind: str, size: int) -> str:
    if kind == "one-sentence-then-none":
        return "must. " + ("a " * size)[: size - 6]
    unit = HOSTILE[kind]
    return (unit * (size // len(unit) + 1))[:size]


def hostile_context(kind: str) -> Context:
    """About :data:`SIZE` characters of one hostile kind of text, in two user turns: the old one
    (which strategies cut, digest and summarize) holds nearly all of it."""
    text = _text(kind, SIZE * 2 // 5)
    return ctx(
        sys("You are a coding agent."),
        u(text),
        atc("c1", args='{"command": "' + text[:2_000].replace('"', "'") + '"}'),
        t("c1", text),
        a(text[: SIZE // 5]),
        u("go on"),
        atc("c2"),
        t("c2", "ok"),
    )


def forcing_params(strategy: Strategy) -> dict[str, Any]:
    """Parameters that make every step run: each number at its minimum, a tiny window."""
    params: dict[str, Any] = {}
    for param in strategy.params:
        if param.name in OVERRIDES:
            params[param.name] = OVERRIDES[param.name]
        elif param.name in WINDOW_PARAMS:
            params[param.name] = max(2_000, int(param.min or 0))
        elif param.type in ("int", "float") and param.min is not None:
            params[param.name] = int(param.min) if param.type == "int" else param.min
    return params


@pytest.fixture
def watchdog() -> Iterator[None]:
    with hang_detector(WATCHDOG_SECONDS, "planning over 1 MB"):
        yield


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(HOSTILE))
@pytest.mark.parametrize("strategy", list_strategies(), ids=lambda s: s.id)
def test_a_strategy_plans_over_a_megabyte_of_hostile_text(
    strategy: Strategy, kind: str, watchdog: None
) -> None:
    context = hostile_context(kind)
    assert sum(
        len(m.text) + sum(len(r.text) for r in m.tool_results) for m in context.messages
    ) >= (SIZE)
    params = strategy.validate(forcing_params(strategy))
    counter = Counter(get_tokenizer("cl100k_base"))  # a cold cache: every text is encoded
    plan = strategy.plan(context, params, counter=counter, summarizer=FactSummarizer())
    assert plan.edits, "the parameters must make the strategy act"
    assert plan.after.total < plan.before.total
