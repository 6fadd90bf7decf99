"""``opencode-prune`` and OpenCode's overflow arithmetic: OpenCode's own tests (specs §1a)."""

from __future__ import annotations

import pytest

from compaction.strategies import get_strategy
from compaction.strategies.opencode import (
    PRUNE_MARKER,
    is_overflow,
    opencode_estimate,
    prune_targets,
    usable,
)
from tests.support.messages import a, atc, ctx, t, u

STRATEGY = get_strategy("opencode-prune")


def _session(tool: str) -> list:
    return [
        u("first"),
        atc("c1", name=tool, args='{"command":"ls"}'),
        t("c1", "x" * 200_000),
        u("second"),
        u("third"),
    ]


def test_prune_compacts_a_big_old_bash_output(counter):
    plan = STRATEGY.plan(ctx(*_session("bash")), {}, counter=counter)
    assert plan.context.messages[2].tool_results[0].text == PRUNE_MARKER
    (edit,) = plan.edits
    assert edit.kind == "clear"
    assert (edit.message_index, edit.part_index) == (2, 0)
    (artifact,) = plan.artifacts
    assert artifact.content == "x" * 200_000
    assert edit.artifact_id == artifact.id


def test_prune_never_compacts_skill_outputs(counter):
    plan = STRATEGY.plan(ctx(*_session("skill")), {}, counter=counter)
    assert plan.context.messages == tuple(_session("skill"))
    assert plan.edits == ()


def test_prune_needs_strictly_more_than_the_minimum():
    # One output of 50,000 estimated tokens crosses the protected 40,000 and is marked whole.
    assert prune_targets(_session("bash"), minimum=50_000) == []
    assert prune_targets(_session("bash"), minimum=49_999) == [(2, 0)]
    assert prune_targets(_session("bash"), protect_tokens=50_000, minimum=0) == []


def test_prune_protects_the_last_two_user_turns():
    assert prune_targets(_session("bash")[:4]) == []


def test_prune_stops_at_a_previous_summary_and_at_a_cleared_output():
    summary = a("[HISTORY_SUMMARY]\nearlier work")
    older = [u("zero"), atc("c0", name="bash"), t("c0", "y" * 200_000)]
    assert prune_targets([*older, summary, *_session("bash")]) == [(6, 0)]
    cleared = [u("zero"), atc("c0", name="bash"), t("c0", PRUNE_MARKER)]
    assert prune_targets([*older, *cleared, *_session("bash")]) == [(8, 0)]
    assert prune_targets([*older, *_session("bash")]) == [(2, 0), (5, 0)]


def test_prune_skips_errored_outputs():
    from compaction.messages.model import Message, TextPart, ToolResultPart

    failed = Message("tool", (ToolResultPart("c1", (TextPart("x" * 200_000),), is_error=True),))
    session = _session("bash")
    session[2] = failed
    assert prune_targets(session) == []


def test_the_estimate_rounds_half_up():
    assert [opencode_estimate("x" * n) for n in (0, 1, 2, 5, 6)] == [0, 0, 1, 1, 2]


def test_usable_with_reserved():
    assert usable(100_000, 32_000, reserved=12_000) == 56_000
    assert usable(0, 32_000) == 0


@pytest.mark.parametrize(
    ("model", "tokens", "expected"),
    [
        ({"context": 100_000, "max_output": 32_000}, {"input": 75_000, "output": 5_000}, True),
        ({"context": 200_000, "max_output": 32_000}, {"input": 100_000, "output": 10_000}, False),
        (
            {"context": 100_000, "max_output": 32_000},
            {"input": 60_000, "output": 10_000, "cache_read": 10_000},
            True,
        ),
        (
            {"context": 400_000, "input_limit": 272_000, "max_output": 128_000},
            {"input": 271_000, "output": 1_000, "cache_read": 2_000},
            True,
        ),
        (
            {"context": 400_000, "input_limit": 272_000, "max_output": 128_000},
            {"input": 200_000, "output": 20_000, "cache_read": 10_000},
            False,
        ),
        (
            {"context": 200_000, "input_limit": 120_000, "max_output": 10_000},
            {"input": 50_000, "output": 9_999},
            False,
        ),
        ({"context": 0, "max_output": 32_000}, {"input": 1_000_000}, False),
        ({"context": 100_000, "max_output": 32_000, "auto": False}, {"input": 99_000}, False),
    ],
)
def test_is_overflow(model, tokens, expected):
    assert is_overflow(**model, **tokens) is expected


def test_a_reported_total_wins_over_the_parts():
    assert is_overflow(context=100_000, max_output=32_000, total=10, input=90_000) is False
