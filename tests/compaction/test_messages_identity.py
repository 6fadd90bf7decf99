"""A message's identity is what it says: moving a cache breakpoint, reordering keys or
re-serializing never changes it; a changed text always does. Its stored hash, by contrast,
keeps every byte (a turn renders back as sent)."""

from __future__ import annotations

import json
import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from compaction.messages import message_hash, message_identity, parse

ANTHROPIC = "anthropic-messages"
RESPONSES = "openai-responses"
BREAKPOINT = {"type": "ephemeral"}

texts = st.text(min_size=1, max_size=40)
blocks = st.lists(texts, min_size=1, max_size=6)


def _anthropic(texts: list[str], marked: int | None) -> dict[str, Any]:
    content = []
    for i, text in enumerate(texts):
        block: dict[str, Any] = {"type": "text", "text": text}
        if i == marked:
            block["cache_control"] = BREAKPOINT
        content.append(block)
    return {"role": "user", "content": content}


def _identity(fmt: str, item: dict[str, Any]) -> str:
    key = "input" if fmt == RESPONSES else "messages"
    return message_identity(parse(fmt, {key: [item]}).messages[0])


def _hash(fmt: str, item: dict[str, Any]) -> str:
    key = "input" if fmt == RESPONSES else "messages"
    return message_hash(parse(fmt, {key: [item]}).messages[0])


def _shuffled(value: Any, rng: random.Random) -> Any:
    if isinstance(value, dict):
        keys = list(value)
        rng.shuffle(keys)
        return {k: _shuffled(value[k], rng) for k in keys}
    if isinstance(value, list):
        return [_shuffled(v, rng) for v in value]
    return value


@given(blocks, st.data())
def test_moving_a_cache_breakpoint_never_changes_identity(texts: list[str], data: Any) -> None:
    first = data.draw(st.none() | st.integers(0, len(texts) - 1))
    second = data.draw(st.none() | st.integers(0, len(texts) - 1))
    assert _identity(ANTHROPIC, _anthropic(texts, first)) == _identity(
        ANTHROPIC, _anthropic(texts, second)
    )


def test_the_stored_hash_still_tells_a_breakpoint_apart() -> None:
    assert _hash(ANTHROPIC, _anthropic(["a"], 0)) != _hash(ANTHROPIC, _anthropic(["a"], None))


items = st.fixed_dictionaries(
    {
        "call_id": st.text(min_size=1, max_size=8),
        "name": st.sampled_from(["exec", "apply_patch", "shell"]),
        "input": texts,
    }
)


@settings(max_examples=60)
@given(items, st.integers(0, 2**32), st.booleans())
def test_reordering_keys_or_dropping_output_ids_never_changes_identity(
    item: dict[str, Any], seed: int, echoed: bool
) -> None:
    answer = {"id": "ctc_1", "type": "custom_tool_call", "status": "completed", **item}
    # what an agent sends back: its own key order, without the provider's id
    echo = _shuffled(
        {k: v for k, v in answer.items() if k != "id" or not echoed}, random.Random(seed)
    )
    assert _identity(RESPONSES, answer) == _identity(RESPONSES, echo)
    web = {
        "id": "ws",
        "type": "web_search_call",
        "action": {"type": "search", "query": item["input"]},
    }
    assert _identity(RESPONSES, web) == _identity(RESPONSES, _shuffled(web, random.Random(seed)))


@settings(max_examples=60)
@given(
    st.dictionaries(st.text(min_size=1, max_size=6), st.integers() | texts, max_size=5),
    st.integers(0, 2**32),
)
def test_tool_arguments_in_another_key_order_are_the_same_call(
    arguments: dict[str, Any], seed: int
) -> None:
    call = {"type": "tool_use", "id": "t1", "name": "Bash", "input": arguments}
    other = {**call, "input": _shuffled(arguments, random.Random(seed))}
    first = {"role": "assistant", "content": [call]}
    second = {"role": "assistant", "content": [other]}
    assert _identity(ANTHROPIC, first) == _identity(ANTHROPIC, second)


@given(blocks, st.integers(0, 5))
def test_re_serializing_never_changes_identity(texts: list[str], marked: int) -> None:
    item = _anthropic(texts, marked)
    again = json.loads(json.dumps(item, ensure_ascii=True, indent=1))
    assert _identity(ANTHROPIC, item) == _identity(ANTHROPIC, again)
    as_string = {"role": "user", "content": texts[0]}
    as_list = {"role": "user", "content": [{"type": "text", "text": texts[0]}]}
    assert _identity(ANTHROPIC, as_string) == _identity(ANTHROPIC, as_list)


@given(blocks, st.data())
def test_a_changed_text_always_changes_identity(texts: list[str], data: Any) -> None:
    at = data.draw(st.integers(0, len(texts) - 1))
    changed = data.draw(texts_other_than(texts[at]))
    other = [*texts[:at], changed, *texts[at + 1 :]]
    assert _identity(ANTHROPIC, _anthropic(texts, None)) != _identity(
        ANTHROPIC, _anthropic(other, None)
    )
    answer = {"type": "custom_tool_call", "call_id": "c", "name": "exec", "input": texts[at]}
    assert _identity(RESPONSES, answer) != _identity(RESPONSES, {**answer, "input": changed})


def texts_other_than(text: str) -> st.SearchStrategy[str]:
    return texts.filter(lambda t: t != text)


def test_a_changed_role_or_call_id_changes_identity() -> None:
    assert _identity(ANTHROPIC, {"role": "user", "content": "a"}) != _identity(
        ANTHROPIC, {"role": "assistant", "content": "a"}
    )
    call = {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}
    assert _identity(RESPONSES, call) != _identity(RESPONSES, {**call, "call_id": "c2"})


def test_an_empty_content_beside_tool_calls_is_the_same_as_none() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
    answered = {"role": "assistant", "content": None, "tool_calls": [call]}
    echoed = {"role": "assistant", "content": "", "tool_calls": [call]}
    spaced = {**echoed, "content": " "}

    def identity(message: dict[str, Any]) -> str:
        return message_identity(parse("openai-chat", {"messages": [message]}).messages[0])

    assert identity(answered) == identity(echoed)
    assert identity(answered) != identity(spaced)
