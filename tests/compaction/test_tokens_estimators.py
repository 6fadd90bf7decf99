"""compaction.tokens.estimators: each seed's estimator gives exactly the seed's numbers."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from compaction.messages.model import (
    MediaPart,
    Message,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolDefinition,
    ToolResultPart,
)
from compaction.tokens import TokenCounter, Tokenizer, get_tokenizer
from compaction.tokens.estimators import (
    ESTIMATORS,
    baseagent_message_tokens,
    baseagent_text_tokens,
    codex_approx_tokens,
    codex_message_tokens,
    copaw_message_tokens,
    copaw_text_tokens,
    llm4s_conversation_tokens,
    llm4s_message_tokens,
    nanobot_message_tokens,
    picoclaw_message_tokens,
    picoclaw_tooldefs_tokens,
)

IMAGE = MediaPart(media="image", media_type="image/png", data="QUJD")


def ceil4(text: str) -> int:
    """LLM4S's test tokenizer."""
    return math.ceil(len(text) / 4)


def msg_user(text: str) -> Message:
    return Message(role="user", parts=(TextPart(text),))


def msg_assistant(text: str) -> Message:
    return Message(role="assistant", parts=(TextPart(text),))


def msg_assistant_tc(*ids: str) -> Message:
    """picoclaw's ``msgAssistantTC``: empty content, one call per id named ``tool_<id>``."""
    calls = tuple(ToolCallPart(id=i, name=f"tool_{i}", arguments='{"key":"value"}') for i in ids)
    return Message(role="assistant", parts=calls)


def msg_tool(call_id: str, text: str) -> Message:
    return Message(role="tool", parts=(ToolResultPart(call_id, (TextPart(text),)),))


@pytest.fixture
def cl100k() -> Tokenizer:
    return get_tokenizer("cl100k_base")


# --- picoclaw (specs §2.5) ----------------------------------------------------------------------


def test_picoclaw_user_hello() -> None:
    assert picoclaw_message_tokens(msg_user("hello")) == 6


def test_picoclaw_empty_message() -> None:
    assert picoclaw_message_tokens(Message(role="user", parts=())) == 4
    assert picoclaw_message_tokens(msg_user("")) == 4


def test_picoclaw_assistant_tool_call() -> None:
    assert picoclaw_message_tokens(msg_assistant_tc("tc1")) == 18


def test_picoclaw_tool_message() -> None:
    assert picoclaw_message_tokens(msg_tool("tc1", "result")) == 8


def test_picoclaw_two_media_items_add_exactly_512() -> None:
    bare = Message(role="user", parts=(TextPart("see these"),))
    with_media = Message(role="user", parts=(TextPart("see these"), IMAGE, IMAGE))

    assert picoclaw_message_tokens(with_media) - picoclaw_message_tokens(bare) == 512


def test_picoclaw_large_arguments() -> None:
    call = ToolCallPart(
        id="call_large", name="tool_call_big", arguments='{"data":"' + "x" * 5000 + '"}'
    )

    # (10 + 8 + 13 + 5011 + 12) * 2 // 5
    assert picoclaw_message_tokens(Message(role="assistant", parts=(call,))) == 2021


def test_picoclaw_counts_reasoning_tool_calls_and_system_parts() -> None:
    plain = picoclaw_message_tokens(msg_assistant("answer"))
    reasoning = Message(role="assistant", parts=(ReasoningPart("thinking"), TextPart("answer")))
    call = Message(role="assistant", parts=(TextPart("answer"), *msg_assistant_tc("a").parts))
    one_block = Message(role="system", parts=(TextPart("rules. more rules."),))
    two_blocks = Message(role="system", parts=(TextPart("rules."), TextPart("more rules.")))

    assert picoclaw_message_tokens(reasoning) > plain
    assert picoclaw_message_tokens(call) > plain
    assert picoclaw_message_tokens(two_blocks) > picoclaw_message_tokens(one_block)
    # SystemParts: 6 + 11 runes + 20 per part + 12 overhead = 69 chars
    assert picoclaw_message_tokens(two_blocks) == 69 * 2 // 5


def test_picoclaw_counts_runes_for_content_and_bytes_for_tool_fields() -> None:
    assert picoclaw_message_tokens(msg_user("日本語です")) == (5 + 12) * 2 // 5
    call = ToolCallPart(id="c", name="n", arguments='{"q":"日本"}')
    # 1 + 8 + 1 + 14 bytes + 12
    assert picoclaw_message_tokens(Message(role="assistant", parts=(call,))) == 36 * 2 // 5


def test_picoclaw_counts_each_tool_result_as_its_own_message() -> None:
    both = Message(
        role="user",
        parts=(
            ToolResultPart("tc1", (TextPart("result"),)),
            ToolResultPart("tc2", (TextPart("result"),)),
        ),
    )

    assert picoclaw_message_tokens(both) == 16


def test_picoclaw_tooldefs() -> None:
    tool = ToolDefinition("test_tool", "A test tool", {"type": "object"})

    assert picoclaw_tooldefs_tokens([]) == 0
    assert picoclaw_tooldefs_tokens([tool]) == 22
    assert picoclaw_tooldefs_tokens([tool, tool, tool]) > picoclaw_tooldefs_tokens([tool])


def test_picoclaw_tooldefs_json_is_gos() -> None:
    tool = ToolDefinition("t", "", {"type": "object", "b": 1.0, "a": "<&>"})

    # {"a":"\u003c\u0026\u003e","b":1,"type":"object"} is 47 bytes; + 1 + 20
    assert picoclaw_tooldefs_tokens([tool]) == 68 * 2 // 5


def test_picoclaw_tooldefs_without_parameters() -> None:
    assert picoclaw_tooldefs_tokens([ToolDefinition("test_tool", "A test tool")]) == 40 * 2 // 5


# --- BaseAgent (specs §1.2) ---------------------------------------------------------------------


def test_baseagent_text() -> None:
    assert baseagent_text_tokens("abcdefgh") == 2
    assert baseagent_text_tokens("abcdefghijk") == 2
    assert baseagent_text_tokens("") == 0
    assert baseagent_text_tokens(None) == 0


def test_baseagent_user_message() -> None:
    assert baseagent_message_tokens(msg_user("abcdefgh")) == 6
    assert baseagent_message_tokens(Message(role="user", parts=())) == 4


def test_baseagent_image_part_adds_1000() -> None:
    message = Message(role="user", parts=(TextPart("abcdefgh"), IMAGE))

    assert baseagent_message_tokens(message) == 1006


def test_baseagent_floors_each_text_part() -> None:
    message = Message(role="user", parts=(TextPart("abcdefg"), TextPart("abcdefg")))

    assert baseagent_message_tokens(message) == 1 + 1 + 4


def test_baseagent_tool_calls_floor_name_and_arguments_separately() -> None:
    call = ToolCallPart(id="call_1", name="read_file", arguments='{"path":"a.py"}')

    # floor(9/4) + floor(15/4) + 4
    assert baseagent_message_tokens(Message(role="assistant", parts=(call,))) == 2 + 3 + 4


def test_baseagent_ignores_reasoning_and_tool_call_ids() -> None:
    message = Message(role="assistant", parts=(ReasoningPart("x" * 400), TextPart("abcdefgh")))

    assert baseagent_message_tokens(message) == 6
    assert baseagent_message_tokens(msg_tool("a-long-tool-call-id", "abcdefgh")) == 6


# --- Codex (specs §1b) --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "tokens"), [("", 0), ("abcd", 1), ("abcde", 2), ("héllo", 2), ("日本語", 3)]
)
def test_codex_rounds_bytes_up(text: str, tokens: int) -> None:
    assert codex_approx_tokens(text) == tokens


def test_codex_message_has_no_overhead_and_ignores_images() -> None:
    assert codex_message_tokens(Message(role="user", parts=(TextPart("abcde"), IMAGE))) == 2
    assert codex_message_tokens(Message(role="user", parts=())) == 0


# --- LLM4S (specs §3.1) -------------------------------------------------------------------------


def test_llm4s_user_message() -> None:
    assert llm4s_message_tokens(msg_user("hello"), ceil4) == 2 + 4


def test_llm4s_tool_call_renders_compact_arguments() -> None:
    call = ToolCallPart(id="c1", name="search", arguments='{"q": "x"}')

    # content 0 + 4; name 2 + '{"q":"x"}' 3 + 10
    assert llm4s_message_tokens(Message(role="assistant", parts=(call,)), ceil4) == 19


def test_llm4s_tool_message_counts_its_id() -> None:
    # "result" 2 + 4 + "tool_call_id:tc1" 4
    assert llm4s_message_tokens(msg_tool("tc1", "result"), ceil4) == 10


def test_llm4s_ignores_images() -> None:
    message = Message(role="user", parts=(TextPart("hello"), IMAGE))

    assert llm4s_message_tokens(message, ceil4) == 6


def test_llm4s_conversation_adds_10() -> None:
    conversation = [msg_user("hello"), msg_tool("tc1", "result")]

    assert llm4s_conversation_tokens(conversation, ceil4) == 6 + 10 + 10
    assert llm4s_conversation_tokens([], ceil4) == 10


# --- nanobot (specs §4.2) -----------------------------------------------------------------------


def test_nanobot_empty_message(cl100k: Tokenizer) -> None:
    assert nanobot_message_tokens(Message(role="user", parts=()), cl100k) == 4
    assert nanobot_message_tokens(msg_user(""), cl100k) == 4


def test_nanobot_text(cl100k: Tokenizer) -> None:
    assert nanobot_message_tokens(msg_user("hello world"), cl100k) == 6


def test_nanobot_tool_message_adds_its_id(cl100k: Tokenizer) -> None:
    expected = cl100k.count("result\ntc1") + 4

    assert nanobot_message_tokens(msg_tool("tc1", "result"), cl100k) == expected


def test_nanobot_dumps_tool_calls(cl100k: Tokenizer) -> None:
    dumped = json.dumps(
        [
            {
                "id": "tc1",
                "type": "function",
                "function": {"name": "tool_tc1", "arguments": '{"key":"value"}'},
            }
        ],
        ensure_ascii=False,
    )

    assert nanobot_message_tokens(msg_assistant_tc("tc1"), cl100k) == cl100k.count(dumped) + 4


def test_nanobot_counts_name_and_reasoning(cl100k: Tokenizer) -> None:
    message = Message(
        role="assistant", parts=(ReasoningPart("let me think"), TextPart("answer")), name="bot"
    )

    expected = cl100k.count("answer\nbot\nlet me think") + 4
    assert nanobot_message_tokens(message, cl100k) == expected


def test_nanobot_counts_base64_images_as_text(cl100k: Tokenizer) -> None:
    message = Message(role="user", parts=(TextPart("look"), IMAGE))
    dumped = json.dumps({"type": "image_url", "image_url": {"url": "data:image/png;base64,QUJD"}})

    assert nanobot_message_tokens(message, cl100k) == cl100k.count("look\n" + dumped) + 4


def test_nanobot_falls_back_to_a_quarter_of_the_characters() -> None:
    assert nanobot_message_tokens(msg_user("x" * 40), None) == 14
    assert nanobot_message_tokens(msg_user("ab"), None) == 4


# --- CoPaw (specs §5.2) -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "tokens"),
    [("", 0), ("a", 0), ("hello world", 3), ("x" * 375, 100), ("日本語", 2), ("abcdefg", 2)],
)
def test_copaw_rounds_bytes_over_3_75(text: str, tokens: int) -> None:
    assert copaw_text_tokens(text) == tokens


def test_copaw_divisor_is_configurable() -> None:
    assert copaw_text_tokens("x" * 100, divisor=4) == 25


def test_copaw_takes_the_larger_of_tokenizer_and_estimate(cl100k: Tokenizer) -> None:
    assert copaw_text_tokens("hello world", tokenizer=cl100k) == 3
    assert copaw_text_tokens("1 2 3 4 5 6 7 8", tokenizer=cl100k) == cl100k.count("1 2 3 4 5 6 7 8")


def test_copaw_message_has_no_overhead() -> None:
    assert copaw_message_tokens(msg_user("hello world")) == 3
    assert copaw_message_tokens(Message(role="user", parts=())) == 0


def test_copaw_media() -> None:
    inline = MediaPart(media="image", data="A" * 400)
    by_url = MediaPart(media="image", url="https://example.com/a.png")
    empty = MediaPart(media="image")

    assert copaw_message_tokens(Message(role="user", parts=(inline,))) == 100
    assert copaw_message_tokens(Message(role="user", parts=(by_url,))) == copaw_text_tokens(
        "https://example.com/a.png"
    )
    assert copaw_message_tokens(Message(role="user", parts=(empty,))) == 10


def test_copaw_tool_use_and_result() -> None:
    call = ToolCallPart(id="call_001", name="read_file", arguments='{"path":"a.py"}')
    result = ToolResultPart("call_001", (TextPart("print(1)"), MediaPart(media="image")))

    assert copaw_message_tokens(Message(role="assistant", parts=(call,))) == copaw_text_tokens(
        'read_file{"path": "a.py"}'
    )
    assert (
        copaw_message_tokens(Message(role="user", parts=(result,)))
        == copaw_text_tokens("print(1)") + 10
    )


def test_copaw_counts_thinking() -> None:
    message = Message(role="assistant", parts=(ReasoningPart("x" * 375),))

    assert copaw_message_tokens(message) == 100


# --- the registry -------------------------------------------------------------------------------


def test_every_seed_is_registered() -> None:
    assert set(ESTIMATORS) == {
        "tiktoken",
        "baseagent",
        "codex",
        "picoclaw",
        "llm4s",
        "nanobot",
        "copaw",
    }


def test_the_registry_compares_estimators_on_one_message(cl100k: Tokenizer) -> None:
    message = msg_user("abcdefgh")

    estimates = {name: factory(cl100k)(message) for name, factory in ESTIMATORS.items()}

    assert estimates["tiktoken"] == TokenCounter(cl100k).count_message(message).total
    assert estimates["baseagent"] == 6
    assert estimates["codex"] == 2
    assert estimates["picoclaw"] == (8 + 12) * 2 // 5
    assert estimates["llm4s"] == cl100k.count("abcdefgh") + 4
    assert estimates["nanobot"] == cl100k.count("abcdefgh") + 4
    assert estimates["copaw"] == 2


def test_nanobot_in_the_registry_always_uses_cl100k() -> None:
    estimate = ESTIMATORS["nanobot"](get_tokenizer("o200k_base"))

    assert estimate(msg_user("hello world")) == 6


# --- properties ---------------------------------------------------------------------------------


@given(st.text(), st.text())
def test_char_based_text_estimators_grow_with_appended_text(text: str, more: str) -> None:
    for estimate in (baseagent_text_tokens, codex_approx_tokens, copaw_text_tokens):
        assert 0 <= estimate(text) <= estimate(text + more)


@given(st.text(), st.text())
def test_char_based_message_estimators_grow_with_appended_text(text: str, more: str) -> None:
    for estimate in (
        baseagent_message_tokens,
        codex_message_tokens,
        picoclaw_message_tokens,
        copaw_message_tokens,
    ):
        assert 0 <= estimate(msg_user(text)) <= estimate(msg_user(text + more))
    assert (
        0
        <= llm4s_message_tokens(msg_user(text), ceil4)
        <= llm4s_message_tokens(msg_user(text + more), ceil4)
    )


@given(st.text(max_size=200))
def test_nanobot_never_goes_below_4(text: str) -> None:
    assert nanobot_message_tokens(msg_user(text), get_tokenizer("cl100k_base")) >= 4
    assert nanobot_message_tokens(msg_user(text), None) >= 4


@given(st.integers(min_value=0, max_value=5))
def test_picoclaw_media_cost_is_linear(count: int) -> None:
    message = Message(role="user", parts=(TextPart("hi"),) + (IMAGE,) * count)

    assert picoclaw_message_tokens(message) == picoclaw_message_tokens(msg_user("hi")) + 256 * count
