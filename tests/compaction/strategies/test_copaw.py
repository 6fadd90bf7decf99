"""CoPaw / ReMe conformance (specs §5.7).

ReMe's tests count with its bundled Qwen tokenizer, which ctxweb does not ship: these cases use
CoPaw's ``bytes/3.75`` estimate and check the stated invariants rather than exact splits.
"""

from __future__ import annotations

import pytest

from compaction.messages.model import Message, ReasoningPart, TextPart, ToolCallPart, ToolResultPart
from compaction.strategies import get_strategy
from compaction.strategies.copaw import (
    SUMMARY_SUFFIX,
    check_context,
    format_msgs_to_str,
    truncate_tool_text,
)
from compaction.tokens.estimators import copaw_message_tokens
from tests.support.messages import a, ctx, sys, u


def use(call_id, data="x"):
    return Message("assistant", (ToolCallPart(call_id, "read_file", f'{{"data": "{data}"}}'),))


def result(call_id, text="Result"):
    return Message("user", (ToolResultPart(call_id, (TextPart(text),)),), name="tool")


def _invariants(messages, threshold, reserve):
    compact, keep, _ = check_context(messages, threshold, reserve)
    total = sum(copaw_message_tokens(m) for m in messages)
    if total < threshold:
        assert compact == []
        assert keep == list(range(len(messages)))
    assert sum(copaw_message_tokens(messages[i]) for i in keep) <= reserve or not keep
    assert compact == sorted(compact)
    assert keep == sorted(keep)
    assert sorted(compact + keep) == list(range(len(messages)))
    return compact, keep


CASES = [
    ([], 1000, 500),
    ([u("Hello"), a("Hi there!"), u("How are you?")], 10000, 5000),
    (
        [
            u("First message " * 100),
            a("Second message " * 100),
            u("Third message " * 100),
            a("Fourth message " * 100),
        ],
        100,
        200,
    ),
    (
        [
            u("First " * 50),
            a("Second " * 40),
            u("Third " * 30),
            a("Fourth " * 20),
            u("Fifth " * 10),
        ],
        100,
        150,
    ),
    ([u("Very long message " * 1000)], 10, 5),
    ([u("one"), a("two")], 1, 0),
    ([u("A")], 0, 1000),
    ([u("Please run the tool " * 50), use("call_001"), result("call_001"), a("done")], 50, 1000),
    (
        [
            u("Start " * 100),
            use("call_dep", "x" * 200),
            u("Middle " * 100),
            result("call_dep"),
            a("End"),
        ],
        100,
        500,
    ),
    ([u(""), u("   "), u("ünïcödé ✓"), sys("system"), a("<>&\"'")], 5, 10),
]


@pytest.mark.parametrize(("messages", "threshold", "reserve"), CASES)
def test_check_context_invariants(messages, threshold, reserve):
    _invariants(messages, threshold, reserve)


def test_check_context_cases():
    assert check_context([], 1000, 500) == ([], [], True)
    assert check_context([u("Hello"), a("Hi there!"), u("How are you?")], 10000, 5000)[1] == [
        0,
        1,
        2,
    ]
    assert check_context([u("Very long message " * 1000)], 10, 5)[:2] == ([0], [])
    assert check_context([u("one"), a("two")], 1, 0)[:2] == ([0, 1], [])
    assert check_context([u("A")], 0, 1000)[:2] == ([], [0])
    msg = u("exact")
    n = copaw_message_tokens(msg)
    assert check_context([msg], n, n)[:2] == ([], [0])


def test_a_kept_result_pulls_in_its_use():
    messages = [
        u("Start " * 100),
        use("call_dep", "x" * 200),
        u("Middle " * 100),
        result("call_dep"),
        a("End"),
    ]
    _, keep, valid = check_context(messages, 100, 500)
    if 3 in keep:
        assert 1 in keep
    assert valid or 1 in keep


def test_format_msgs_to_str():
    assert format_msgs_to_str([]) == ""
    messages = [
        u("hello there"),
        Message(
            "assistant",
            (ReasoningPart("secret thoughts"), ToolCallPart("c1", "read_file", '{"path": "a.py"}')),
        ),
        result("c1", "file body"),
    ]
    text = format_msgs_to_str(messages)
    assert "user:" in text
    assert "hello there" in text
    assert text.index("hello there") < text.index("<tool_use>read_file")
    assert "<tool_result>read_file" in text
    assert "secret thoughts" not in text
    assert "secret thoughts" in format_msgs_to_str(messages, include_thinking=True)


def test_truncate_tool_text_marker():
    text = "a" * 500 + "m" * 100 + "z" * 500
    out = truncate_tool_text(text, "tool_result/f.txt")
    assert out == (
        "a" * 500 + "\n\n<<<TRUNCATED>>> (100 characters omitted) <<<END_TRUNCATED>>>"
        "\n\n" + "z" * 500 + "\n\n[Full content saved to: tool_result/f.txt]"
    )
    assert truncate_tool_text(out, "x") is None  # already truncated
    assert truncate_tool_text("a" * 1000, "x") is None


def test_compact_wraps_the_summary_in_previous_summary(counter):
    messages = [
        sys("system"),
        *[m for i in range(40) for m in (u(f"question {i} " * 50), a(f"answer {i} " * 50))],
    ]
    params = {"max_input_length": 1000, "compact_ratio": 0.3, "reserve_ratio": 0.3}
    plan = get_strategy("copaw-compact").plan(ctx(*messages), params, counter=counter)
    summary = plan.context.messages[1]
    assert summary.role == "user"
    assert summary.text.startswith("<previous-summary>\n## Goal")
    assert summary.text.endswith(SUMMARY_SUFFIX)
    again = get_strategy("copaw-compact").plan(plan.context, params, counter=counter)
    assert sum(m.text.startswith("<previous-summary>") for m in again.context.messages) == 1
