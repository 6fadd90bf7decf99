"""Incremental parsing gives exactly what a full parse gives, for any sequence of requests: the
same context (canonical form included), or the same error naming the same field."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction.errors import FormatError
from compaction.messages import Context, context_to_dict, incremental, parse
from compaction.messages.incremental import ParseMemo, parse_incremental
from tests.support.requests import REQUESTS, value

KEYS = {"openai-chat": "messages", "anthropic-messages": "messages", "openai-responses": "input"}


def canonical(context: Context) -> str:
    """The context's canonical JSON: tells 1, 1.0 and True apart, unlike ``==``."""
    return json.dumps(context_to_dict(context), sort_keys=True)


def outcome(fmt: str, request: Any, memo: ParseMemo | None) -> tuple[Any, ParseMemo | None]:
    """Parse incrementally and check against a full parse; returns the memo for the next step."""
    try:
        expected = parse(fmt, request)
    except FormatError as error:
        failure = error
    else:
        failure = None
    if failure is not None:
        with pytest.raises(FormatError) as raised:
            parse_incremental(fmt, request, memo)
        assert (raised.value.path, raised.value.reason) == (failure.path, failure.reason)
        return None, memo
    context, new = parse_incremental(fmt, request, memo)
    assert context == expected
    assert canonical(context) == canonical(expected)
    assert new.format == fmt
    assert len(new.messages) == len(new.raw)
    assert 0 <= new.reused <= len(new.raw)
    return context, new


def test_the_public_api_is_pinned() -> None:
    assert incremental.__all__ == ["ParseMemo", "identical_prefix", "parse_incremental"]


def test_identical_prefix_counts_the_very_objects_not_equal_ones() -> None:
    a, b = {"role": "user"}, {"role": "assistant"}
    assert incremental.identical_prefix([a, b, a], [a, b, b]) == 2
    assert incremental.identical_prefix([a, b], [a, b, a]) == 2  # the shorter one, whole
    assert incremental.identical_prefix([a, dict(b)], [a, b]) == 1  # equal, another object
    assert incremental.identical_prefix([], [a]) == 0


def test_it_parses_only_the_new_messages() -> None:
    first = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    context, memo = parse_incremental("openai-chat", first)
    assert memo.reused == 0
    second = json.loads(json.dumps(first))
    second["messages"] += [{"role": "assistant", "content": "yo"}, {"role": "user", "content": "?"}]
    later, memo = parse_incremental("openai-chat", second, memo)
    assert memo.reused == 1
    assert later.messages[0] is context.messages[0]
    assert later == parse("openai-chat", second)


def test_it_reuses_nothing_from_a_memo_of_another_format() -> None:
    chat = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    _, memo = parse_incremental("openai-chat", chat)
    anthropic = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
    context, memo = parse_incremental("anthropic-messages", anthropic, memo)
    assert memo.reused == 0
    assert context == parse("anthropic-messages", anthropic)


@pytest.mark.parametrize(
    ("old", "new"),
    [(1, True), (True, 1), (1, 1.0), (1.0, 1), (0.0, -0.0), (0, False), ([1], [1.0])],
)
def test_equal_values_of_other_types_are_parsed_again(old: Any, new: Any) -> None:
    def request(flag: Any) -> dict[str, Any]:
        block = {"type": "tool_result", "tool_use_id": "t", "content": "ok", "x": flag}
        return {"model": "m", "messages": [{"role": "user", "content": [block]}]}

    _, memo = parse_incremental("anthropic-messages", request(old))
    context, memo = parse_incremental("anthropic-messages", request(new), memo)
    assert memo.reused == 0
    assert canonical(context) == canonical(parse("anthropic-messages", request(new)))


def test_a_boolean_field_sent_as_a_number_is_refused_after_a_boolean() -> None:
    def request(is_error: Any) -> dict[str, Any]:
        block = {"type": "tool_result", "tool_use_id": "t", "is_error": is_error}
        return {"model": "m", "messages": [{"role": "user", "content": [block]}]}

    _, memo = parse_incremental("anthropic-messages", request(True))
    with pytest.raises(FormatError) as raised:
        parse_incremental("anthropic-messages", request(1), memo)
    assert raised.value.path == "messages.0.content.0.is_error"


def test_a_mutated_request_never_changes_the_memo() -> None:
    request = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    _, memo = parse_incremental("openai-chat", request)
    request["messages"][0]["content"] = "changed"
    context, memo = parse_incremental("openai-chat", request, memo)
    assert memo.reused == 0
    assert context.messages[0].text == "changed"


def test_errors_name_the_field_by_its_index_in_the_whole_list() -> None:
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
    _, memo = parse_incremental("openai-chat", {"messages": messages})
    bad = {"messages": [*messages, {"role": 7, "content": "x"}]}
    with pytest.raises(FormatError) as raised:
        parse_incremental("openai-chat", bad, memo)
    assert raised.value.path == "messages.2.role"


def test_nesting_is_limited_as_in_a_full_parse() -> None:
    def nested(depth: int) -> dict[str, Any]:
        deep: Any = "x"
        for _ in range(depth):
            deep = [deep]
        return {"messages": [{"role": "user", "content": "hi", "meta": deep}]}

    for depth in (252, 253, 254, 255, 256):
        outcome("openai-chat", nested(depth), None)
    _, memo = parse_incremental("openai-chat", nested(1))
    outcome("openai-chat", nested(300), memo)
    outcome("openai-chat", {"messages": [], "tools": nested(300)}, memo)


def test_an_unknown_format_is_refused() -> None:
    with pytest.raises(FormatError) as raised:
        parse_incremental("nope", {})
    assert raised.value.path == "format"


def test_a_responses_string_input_is_parsed_whole() -> None:
    context, memo = parse_incremental("openai-responses", {"model": "m", "input": "hi"})
    assert context == parse("openai-responses", {"model": "m", "input": "hi"})
    assert memo.raw == ()


# -- properties: any sequence of edits --------------------------------------------------------


def leaves(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(node, dict):
        for key, child in node.items():
            found += leaves(child, (*prefix, key))
    elif isinstance(node, list):
        for index, child in enumerate(node):
            found += leaves(child, (*prefix, index))
    return found


def set_at(node: Any, path: tuple[Any, ...], new: Any) -> None:
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = new


TWINS = [1, 1.0, True, 0, 0.0, -0.0, False, "1", None]


def edited(data: st.DataObject, fmt: str, request: Any) -> Any:
    """An edit of ``request``: on a copy, or on the same objects, mutated in place."""
    key = KEYS[fmt]
    kind = data.draw(
        st.sampled_from(
            ["append", "truncate", "replace", "mutate", "twin", "rest", "same", "in_place"]
        )
    )
    current = request if kind == "in_place" else json.loads(json.dumps(request))
    items = current.get(key) if isinstance(current, dict) else None
    other = data.draw(REQUESTS[fmt])
    extra = other.get(key) if isinstance(other.get(key), list) else []
    if kind == "rest" or not isinstance(items, list):
        return {**other, key: items} if isinstance(current, dict) and key in current else other
    if kind == "append":
        items.extend(extra)
    elif kind == "truncate" and items:
        del items[data.draw(st.integers(0, len(items) - 1)) :]
    elif kind == "replace" and items and extra:
        items[data.draw(st.integers(0, len(items) - 1))] = extra[0]
    elif kind in ("mutate", "twin", "in_place") and items:
        index = data.draw(st.integers(0, len(items) - 1))
        where = data.draw(st.sampled_from(leaves(items[index])))
        new = data.draw(st.sampled_from(TWINS) if kind == "twin" else value)
        if where:
            set_at(items[index], where, new)
        else:
            items[index] = new
    return current


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(REQUESTS)), st.data())
def test_a_sequence_of_requests_parses_as_each_would_alone(fmt: str, data: st.DataObject) -> None:
    request = data.draw(REQUESTS[fmt])
    memo: ParseMemo | None = None
    for _ in range(data.draw(st.integers(1, 6))):
        _, memo = outcome(fmt, request, memo)
        request = edited(data, fmt, request)
    outcome(fmt, request, memo)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(REQUESTS)), st.sampled_from(sorted(REQUESTS)), st.data())
def test_a_memo_of_another_format_is_safe_to_pass(
    fmt: str, other: str, data: st.DataObject
) -> None:
    _, memo = outcome(other, data.draw(REQUESTS[other]), None)
    request = data.draw(REQUESTS[fmt])
    for _ in range(data.draw(st.integers(1, 3))):
        _, memo = outcome(fmt, request, memo)
        request = edited(data, fmt, request)


def _deep(levels: int) -> dict[str, Any]:
    node: dict[str, Any] = {}
    root = node
    for _ in range(levels):
        node["x"] = {}
        node = node["x"]
    return root


def test_tools_equal_to_the_previous_requests_are_not_depth_checked_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tools = [
        {"type": "function", "function": {"name": f"t{k}", "parameters": _deep(5)}}
        for k in range(10)
    ]
    first = {"model": "m", "tools": tools, "messages": [{"role": "user", "content": "a"}]}
    _, memo = parse_incremental("openai-chat", first)
    walked: list[str] = []
    original = incremental.check_depth

    def spy(value: Any, path: str, limit: int) -> None:
        walked.append(path)
        original(value, path, limit)

    monkeypatch.setattr(incremental, "check_depth", spy)
    again = json.loads(
        json.dumps({**first, "messages": [*first["messages"], first["messages"][0]]})
    )

    context, _ = parse_incremental("openai-chat", again, memo)

    assert walked == ["model"]  # the tools, equal, were not walked
    assert context == parse("openai-chat", again)


def test_tools_changed_after_the_call_are_checked_again() -> None:
    """The memo keeps what the tools were (their JSON), not the caller's objects: tools made too
    deep in place after the call are refused as parse refuses them."""
    tools = [{"type": "function", "function": {"name": "t", "parameters": {"type": "object"}}}]
    request = {"model": "m", "tools": tools, "messages": [{"role": "user", "content": "a"}]}
    _, memo = parse_incremental("openai-chat", request)
    tools[0]["function"]["parameters"] = _deep(400)

    with pytest.raises(FormatError) as raised:
        parse_incremental("openai-chat", request, memo)
    with pytest.raises(FormatError) as expected:
        parse("openai-chat", request)
    assert str(raised.value) == str(expected.value)


@pytest.mark.parametrize(
    ("fmt", "tool"),
    [
        ("openai-chat", {"type": "function", "function": {"name": "t", "parameters": {"n": 1}}}),
        ("anthropic-messages", {"name": "t", "input_schema": {"type": "object", "n": 1}}),
        ("openai-responses", {"type": "function", "name": "t", "parameters": {"n": 1}}),
    ],
)
def test_tools_equal_to_the_previous_requests_are_not_parsed_again(
    fmt: str, tool: dict[str, Any]
) -> None:
    key = KEYS[fmt]
    message = {"role": "user", "content": "a"}
    first = {"model": "m", "tools": [tool, tool], key: [message]}
    before, memo = parse_incremental(fmt, first)
    # the same tools, decoded afresh, with another message: the very same definitions
    again = json.loads(json.dumps({**first, key: [message, message]}))
    context, memo = parse_incremental(fmt, again, memo)
    assert context.tools is before.tools
    assert context == parse(fmt, again)
    # a number of another type (1.0 for 1) is another value: parsed again, as parse does
    twin = json.loads(json.dumps(again).replace('"n": 1', '"n": 1.0'))
    changed, memo = parse_incremental(fmt, twin, memo)
    assert changed.tools is not before.tools
    assert changed == parse(fmt, twin)
    # no tools, then an empty list: each as parse gives it
    for tools in (None, []):
        request = {**twin, "tools": tools}
        context, memo = parse_incremental(fmt, request, memo)
        assert context == parse(fmt, request)
        assert context.tools == ()


def test_legacy_functions_count_in_what_the_tools_are() -> None:
    tool = {"type": "function", "function": {"name": "t", "parameters": {}}}
    function = {"name": "f", "parameters": {}}
    message = {"role": "user", "content": "a"}
    first = {"tools": [tool], "messages": [message]}
    _, memo = parse_incremental("openai-chat", first)
    both = {**first, "functions": [function]}
    context, _ = parse_incremental("openai-chat", both, memo)
    assert context == parse("openai-chat", both)
    assert [t.name for t in context.tools] == ["t", "f"]
