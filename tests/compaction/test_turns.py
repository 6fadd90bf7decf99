"""User turns, safe boundaries, tool pairs and the sanitizer: picoclaw's and nanobot's own cases
(``docs/seed-strategies.md`` §2.5, §4.3, §4.4), the Anthropic shape, and properties."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from compaction.messages.model import (
    Message,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from compaction.turns import (
    OrphanRef,
    Orphans,
    ToolPair,
    ToolScan,
    find_legal_start,
    find_safe_boundary,
    is_safe_boundary,
    is_tool_result_message,
    orphans,
    parse_turn_boundaries,
    sanitize_history_for_provider,
    tool_pairs,
    tool_scan,
    user_turns,
)

# --- picoclaw's test helpers ------------------------------------------------------------------


def msg_user(content: str = "q") -> Message:
    return Message("user", (TextPart(content),))


def msg_assistant(content: str = "r") -> Message:
    return Message("assistant", (TextPart(content),))


def msg_assistant_tc(*ids: str) -> Message:
    """picoclaw's ``msgAssistantTC``: empty content, one call per id named ``tool_<id>``."""
    calls = tuple(ToolCallPart(id=i, name=f"tool_{i}", arguments='{"key":"value"}') for i in ids)
    return Message("assistant", (TextPart(""), *calls))


def msg_tool(call_id: str, content: str = "result") -> Message:
    return Message("tool", (ToolResultPart(call_id, (TextPart(content),)),))


def msg_system(content: str = "sys") -> Message:
    return Message("system", (TextPart(content),))


def anthropic_results(*ids: str, text: str | None = None) -> Message:
    """A user message carrying Anthropic ``tool_result`` blocks (and optionally text)."""
    parts: tuple[TextPart | ToolResultPart, ...] = tuple(
        ToolResultPart(i, (TextPart("out"),)) for i in ids
    )
    if text is not None:
        parts = (*parts, TextPart(text))
    return Message("user", parts)


u, a = msg_user(), msg_assistant()


def tc(*ids: str) -> Message:
    return msg_assistant_tc(*(ids or ("c",)))


def t(call_id: str = "c") -> Message:
    return msg_tool(call_id)


def roles(messages: list[Message]) -> list[str]:
    return [m.role for m in messages]


# --- parseTurnBoundaries ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("history", "expected"),
    [
        ([], []),
        ([u, a, u, a], [0, 2]),
        ([u, tc(), t(), a, u, a], [0, 4]),
        ([u, tc("1"), t("1"), tc("2"), t("2"), a], [0]),
        ([a, a], []),
        ([tc(), t(), a, u, a], [3]),
    ],
)
def test_parse_turn_boundaries_matches_picoclaw(
    history: list[Message], expected: list[int]
) -> None:
    assert parse_turn_boundaries(history) == expected


def test_a_user_message_of_tool_results_does_not_start_a_turn() -> None:
    history = [u, tc("a"), anthropic_results("a"), a, u]
    assert parse_turn_boundaries(history) == [0, 4]


def test_a_user_message_with_results_and_text_is_still_tool_results() -> None:
    message = anthropic_results("a", text="<system-reminder>")
    assert is_tool_result_message(message)
    assert parse_turn_boundaries([u, tc("a"), message]) == [0]


def test_user_turns_are_ranges_from_each_user_message() -> None:
    assert user_turns([a, u, tc(), t(), a, u, a]) == [range(1, 5), range(5, 7)]
    assert user_turns([a, a]) == []
    assert user_turns([]) == []


# --- isSafeBoundary ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("history", "index", "expected"),
    [
        ([], 0, True),
        ([u], 0, True),
        ([u], 1, True),
        ([a, u, a], 1, True),
        ([u, a, u], 1, False),
        ([u, tc(), t(), a], 1, False),
        ([u, tc(), t(), a], 2, False),
        ([u], -1, True),
        ([u], 5, True),
    ],
)
def test_is_safe_boundary_matches_picoclaw(
    history: list[Message], index: int, expected: bool
) -> None:
    assert is_safe_boundary(history, index) is expected


def test_it_is_never_safe_to_cut_before_anthropic_tool_results() -> None:
    assert not is_safe_boundary([u, tc("a"), anthropic_results("a"), a], 2)


# --- findSafeBoundary -------------------------------------------------------------------------

TWO_CALLS = [u, a, u, tc("1", "2"), t("1"), t("2"), a, u]


@pytest.mark.parametrize(
    ("history", "target", "expected"),
    [
        ([], 0, 0),
        ([u], 0, 0),
        ([u], 5, 1),
        ([u, a, u, a], 2, 2),
        ([u, a, u, a, u], 3, 2),
        (TWO_CALLS, 4, 2),
        (TWO_CALLS, 5, 2),
        ([tc(), t(), a, u], 1, 3),
        ([u, a, u, tc("1"), t("1"), tc("2"), t("2"), a, u, a], 5, 2),
        ([a, a, a], 1, 1),
        ([u, tc(), t(), a], 2, 0),
        ([u, a, u, tc("1", "2", "3"), t("1"), t("2"), t("3"), tc("4"), t("4"), a, u], 6, 2),
        ([u, a, u, tc(), t(), a, u, a], 4, 2),
        ([u, tc("1"), t("1"), tc("2"), t("2"), a, u, a], 3, 6),
    ],
)
def test_find_safe_boundary_matches_picoclaw(
    history: list[Message], target: int, expected: int
) -> None:
    assert find_safe_boundary(history, target) == expected


def test_find_safe_boundary_skips_anthropic_tool_result_messages() -> None:
    history = [u, tc("a"), anthropic_results("a"), a, u, a]
    assert find_safe_boundary(history, 2) == 4


# --- sanitizeHistoryForProvider ---------------------------------------------------------------

ONE_RESULT = ["user", "assistant", "tool", "assistant"]
TWO_RESULTS = ["user", "assistant", "tool", "tool", "assistant"]


@pytest.mark.parametrize(
    ("history", "expected"),
    [
        pytest.param([], [], id="empty"),
        pytest.param([u, tc("A"), t("A"), a], ["user", "assistant", "tool", "assistant"], id="one"),
        pytest.param(
            [u, tc("A", "B"), t("A"), t("B"), a],
            ["user", "assistant", "tool", "tool", "assistant"],
            id="multi",
        ),
        pytest.param([u, a, tc("A"), t("A")], ["user", "assistant"], id="tc-after-plain"),
        pytest.param([t("A"), u], ["user"], id="leading-tool"),
        pytest.param([u, t("A")], ["user"], id="tool-after-user"),
        pytest.param([u, a, t("A")], ["user", "assistant"], id="tool-after-plain"),
        pytest.param([tc("A"), t("A"), u], ["user"], id="tc-at-start"),
        pytest.param(
            [u, tc("A", "B"), t("A"), t("B"), a, u, tc("C"), t("C"), a],
            [*TWO_RESULTS, *ONE_RESULT],
            id="two-rounds",
        ),
        pytest.param(
            [u, tc("A", "B"), t("A"), t("B"), tc("C", "D"), t("C"), t("D"), a],
            ["user", "assistant", "tool", "tool", "assistant", "tool", "tool", "assistant"],
            id="consecutive",
        ),
        pytest.param([u, a, u, a], ["user", "assistant", "user", "assistant"], id="plain"),
        pytest.param(
            [u, tc("A", "B"), t("A"), t("B"), t("A"), t("B"), a],
            ["user", "assistant", "tool", "tool", "assistant"],
            id="duplicates",
        ),
        pytest.param(
            [u, tc("call_0"), t("call_0"), a, u, tc("call_0"), t("call_0"), a],
            ["user", "assistant", "tool", "assistant"] * 2,
            id="reused-id",
        ),
        pytest.param([u, tc(""), t(""), a], ["user", "assistant"], id="empty-id"),
        pytest.param(
            [u, tc("A", "B"), t("A"), u, a], ["user", "user", "assistant"], id="incomplete"
        ),
        pytest.param([u, tc("A"), u, a], ["user", "user", "assistant"], id="missing-all"),
        pytest.param(
            [u, tc("A"), t("A"), a, u, tc("B", "C"), t("B"), u, tc("D"), t("D"), a],
            [*ONE_RESULT, "user", *ONE_RESULT],
            id="partial-in-the-middle",
        ),
    ],
)
def test_sanitize_history_for_provider_matches_picoclaw(
    history: list[Message], expected: list[str]
) -> None:
    assert roles(sanitize_history_for_provider(history)) == expected


def test_sanitize_keeps_the_first_of_duplicate_results() -> None:
    first, again = msg_tool("A", "first"), msg_tool("A", "again")
    out = sanitize_history_for_provider([u, tc("A"), first, again, a])
    assert out == [u, tc("A"), first, a]


def test_sanitize_drops_system_and_developer_messages() -> None:
    developer = Message("developer", (TextPart("dev"),))
    assert sanitize_history_for_provider([msg_system(), developer, u, a]) == [u, a]


def test_sanitize_does_not_modify_its_input() -> None:
    history = [t("A"), u, tc("A", "B"), t("A"), a]
    copy = list(history)
    sanitize_history_for_provider(history)
    assert history == copy


def test_sanitize_keeps_a_complete_anthropic_exchange() -> None:
    history = [u, tc("A", "B"), anthropic_results("A", "B"), a]
    assert sanitize_history_for_provider(history) == history


def test_sanitize_drops_an_incomplete_anthropic_exchange_but_keeps_the_users_text() -> None:
    results = anthropic_results("A", text="also, use tabs")
    out = sanitize_history_for_provider([u, tc("A", "B"), results, a])
    assert out == [u, Message("user", (TextPart("also, use tabs"),)), a]


def test_sanitize_drops_an_orphan_anthropic_result_message() -> None:
    assert sanitize_history_for_provider([anthropic_results("A"), u, a]) == [u, a]


def test_sanitize_removes_only_the_duplicate_part_of_an_anthropic_message() -> None:
    doubled = anthropic_results("A", "A")
    out = sanitize_history_for_provider([u, tc("A"), doubled, a])
    assert out == [u, tc("A"), anthropic_results("A"), a]


# --- tool pairs and orphans -------------------------------------------------------------------


def test_tool_pairs_match_calls_to_results() -> None:
    history = [u, tc("A", "B"), t("B"), t("A"), a]
    assert tool_pairs(history) == [ToolPair("B", 1, 2), ToolPair("A", 1, 3)]
    assert orphans(history).ok


def test_a_reused_id_pairs_turn_by_turn() -> None:
    history = [u, tc("x"), t("x"), u, tc("x"), t("x")]
    assert tool_pairs(history) == [ToolPair("x", 1, 2), ToolPair("x", 4, 5)]


def test_orphans_name_both_sides_with_their_indexes() -> None:
    history = [t("gone"), u, tc("A", "B"), t("A"), anthropic_results("C")]
    assert orphans(history) == Orphans(
        calls=(OrphanRef("B", 2),), results=(OrphanRef("gone", 0), OrphanRef("C", 4))
    )
    assert not orphans(history).ok


def test_a_result_before_its_call_is_an_orphan() -> None:
    assert orphans([t("A"), tc("A")]) == Orphans((OrphanRef("A", 1),), (OrphanRef("A", 0),))


# --- nanobot's _find_legal_start --------------------------------------------------------------


@pytest.mark.parametrize(
    ("history", "expected"),
    [
        pytest.param([], 0, id="empty"),
        pytest.param([u, a, u, a], 0, id="no-tools"),
        pytest.param([u, tc("A"), t("A"), a], 0, id="paired"),
        pytest.param([t("A"), u, a], 1, id="leading-orphan"),
        pytest.param([t("A"), u, t("B"), u, a], 3, id="up-to-the-last-orphan"),
        pytest.param([tc("A"), t("A"), t("B"), t("A")], 4, id="reset-forgets-earlier-calls"),
        pytest.param([u, tc("A")], 0, id="dangling-call-not-handled"),
        pytest.param([t(""), u], 0, id="empty-id-ignored"),
        pytest.param([anthropic_results("A"), u], 1, id="anthropic-orphan"),
        pytest.param([tc("A"), anthropic_results("A", "B"), u], 2, id="anthropic-partial"),
    ],
)
def test_find_legal_start_matches_nanobot(history: list[Message], expected: int) -> None:
    assert find_legal_start(history) == expected


def test_find_legal_start_after_trimming_nanobots_case_6() -> None:
    # Case 6: old = [U(padding), A(tc old_tc1), T(old_tc1), U recent, A recent]; trimming from the
    # front under budget 500 drops the padded user message, then the call; the legal start must
    # then drop the result it left behind.
    padded = msg_user("padding " * 200)
    call = Message("assistant", (ToolCallPart("old_tc1", "exec", "{}"),))
    old = [padded, call, msg_tool("old_tc1", "short result"), msg_user("recent msg")]
    old.append(msg_assistant("recent reply"))
    assert find_legal_start(old) == 0
    assert find_legal_start(old[1:]) == 0
    kept = old[2:]
    start = find_legal_start(kept)
    assert start == 1
    assert orphans(kept[start:]).ok


# --- properties -------------------------------------------------------------------------------

IDS = st.sampled_from(["A", "B", "C", ""])


@st.composite
def messages(draw: st.DrawFn) -> Message:
    kind = draw(
        st.sampled_from(["user", "assistant", "tc", "tool", "anthropic", "system", "reasoning"])
    )
    if kind == "user":
        return msg_user()
    if kind == "assistant":
        return msg_assistant()
    if kind == "reasoning":
        return Message("assistant", (ReasoningPart("hm"),))
    if kind == "system":
        return msg_system()
    if kind == "tc":
        # Providers reject repeated call ids in one message; ids may repeat across messages.
        return msg_assistant_tc(*draw(st.lists(IDS, min_size=1, max_size=3, unique=True)))
    if kind == "tool":
        return msg_tool(draw(IDS))
    ids = draw(st.lists(IDS, min_size=1, max_size=3))
    text = draw(st.none() | st.just("note"))
    return anthropic_results(*ids, text=text)


histories = st.lists(messages(), max_size=14)


@given(histories)
def test_sanitized_history_never_has_orphans(history: list[Message]) -> None:
    assert orphans(sanitize_history_for_provider(history)).ok


def test_text_beside_results_ends_the_block_of_the_calls_they_answer() -> None:
    # found by the property below: the unexpected result A went, its message's text stayed
    # between the call B and its result, and a second pass then dropped the call
    history = [
        msg_user(),
        msg_assistant_tc("B"),
        anthropic_results("A", text="note"),
        msg_tool("B"),
    ]
    once = sanitize_history_for_provider(history)
    assert [m.role for m in once] == ["user", "user"]
    assert once[1].text == "note"
    assert sanitize_history_for_provider(once) == once
    assert orphans(once).ok


@given(histories)
def test_sanitizing_twice_changes_nothing(history: list[Message]) -> None:
    once = sanitize_history_for_provider(history)
    assert sanitize_history_for_provider(once) == once


@given(histories)
def test_boundaries_are_indexes_of_human_user_messages(history: list[Message]) -> None:
    for i in parse_turn_boundaries(history):
        assert history[i].role == "user"
        assert not history[i].tool_results
        assert is_safe_boundary(history, i)


@given(histories, st.integers(min_value=-3, max_value=20))
def test_find_safe_boundary_is_safe_or_an_end(history: list[Message], target: int) -> None:
    cut = find_safe_boundary(history, target)
    assert 0 <= cut <= len(history)
    if parse_turn_boundaries(history):
        assert cut in (0, len(history)) or cut in parse_turn_boundaries(history)
        assert is_safe_boundary(history, cut)
    else:
        assert cut == min(max(target, 0), len(history))


@given(histories)
def test_after_the_legal_start_every_result_was_declared(history: list[Message]) -> None:
    kept = history[find_legal_start(history) :]
    declared: set[str] = set()
    for message in kept:
        if message.role == "assistant":
            declared.update(call.id for call in message.tool_calls)
        if is_tool_result_message(message):
            assert all(r.tool_call_id in declared for r in message.tool_results if r.tool_call_id)


@given(histories, st.integers(min_value=0, max_value=14))
def test_a_scan_continued_from_any_prefix_finds_the_orphans_of_the_whole(
    history: list[Message], split: int
) -> None:
    whole = tool_scan(history)
    assert whole.orphans == orphans(history)
    first = tool_scan(history[:split])
    assert tool_scan(history, first) == whole
    assert tool_scan(history, ToolScan()) == whole


def test_a_continued_scan_does_not_look_at_what_it_already_scanned() -> None:
    # The first two messages are said to hold nothing pending: the result of "A" then has no call.
    assert tool_scan([tc("A"), t("A")], ToolScan(count=1)).orphans.results == (OrphanRef("A", 1),)
