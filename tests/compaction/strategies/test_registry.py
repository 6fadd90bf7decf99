"""The strategies' public API, registry and parameter validation."""

from __future__ import annotations

import pytest

import compaction.strategies as strategies
from compaction.errors import StrategyError
from compaction.strategies import get_strategy, list_strategies
from tests.support.messages import ctx, u


def test_public_api_is_pinned():
    assert set(strategies.__all__) == {
        "EDIT_KINDS",
        "STRATEGIES",
        "Artifact",
        "Draft",
        "Edit",
        "EditKind",
        "Param",
        "ParamType",
        "Plan",
        "Strategy",
        "get_strategy",
        "list_strategies",
        "make_artifact",
    }


def test_every_strategy_describes_itself():
    for strategy in list_strategies():
        described = strategy.describe()
        assert described["id"] == strategy.id
        assert described["description"]
        assert strategy.validate({}) == strategy.defaults()


def test_it_rejects_an_unknown_strategy():
    with pytest.raises(StrategyError) as error:
        get_strategy("nope")
    assert error.value.fields() == {"strategy": "unknown strategy 'nope'"}


@pytest.mark.parametrize(
    ("params", "path"),
    [
        ({"protect_tokens": -1}, "params.protect_tokens"),
        ({"protect_tokens": "10"}, "params.protect_tokens"),
        ({"protect_tokens": True}, "params.protect_tokens"),
        ({"bogus": 1}, "params.bogus"),
    ],
)
def test_it_names_the_bad_parameter(params, path, counter):
    with pytest.raises(StrategyError) as error:
        get_strategy("baseagent-prune").plan(ctx(u("q")), params, counter=counter)
    assert error.value.path == path


def test_choices_and_lists_are_checked():
    with pytest.raises(StrategyError, match=r"params\.estimator"):
        get_strategy("nanobot-trim").validate({"estimator": "qwen"})
    with pytest.raises(StrategyError, match=r"params\.exclude_tools"):
        get_strategy("anthropic-clear-tool-uses").validate({"exclude_tools": [1]})
    assert get_strategy("anthropic-clear-tool-uses").validate({"exclude_tools": ["a"]})[
        "exclude_tools"
    ] == ("a",)
