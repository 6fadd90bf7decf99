"""Regions add up, summaries and placeholders are recognised, and each seed's budget is exact."""

from __future__ import annotations

import pkgutil
from dataclasses import dataclass, replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

import compaction.regions
from compaction.messages.model import (
    Context,
    MediaPart,
    Message,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolDefinition,
    ToolResultPart,
)
from compaction.regions import (
    ANTHROPIC_CLEARED_MARKER,
    BASEAGENT_SUMMARY_PREFIX,
    CODEX_SUMMARY_PREFIX,
    CTXWEB_SUMMARY_MARKER,
    PICOCLAW_SUMMARY_PREFIX,
    PRUNE_MARKER,
    REGIONS,
    SUMMARY_MARKERS,
    USED_REGIONS,
    Counter,
    Placeholder,
    Policy,
    RegionMemo,
    _summary_markers,
    budget,
    context_regions,
    is_summary,
    message_regions,
    part_placeholder,
    placeholder_of,
    region_of_part,
    sum_regions,
)

# --- the public API -------------------------------------------------------------------------


def test_the_public_api_is_pinned() -> None:
    assert sorted(compaction.regions.__all__) == sorted(
        [
            "ANTHROPIC_CLEARED_MARKER",
            "BASEAGENT_SUMMARY_PREFIX",
            "CLAUDE_CODE_SUMMARY_PREFIX",
            "CODEX_SUMMARY_PREFIX",
            "CTXWEB_SUMMARY_MARKER",
            "PICOCLAW_SUMMARY_PREFIX",
            "PLACEHOLDER_PATTERNS",
            "PRUNE_MARKER",
            "RAW_REGIONS",
            "REGIONS",
            "SUMMARY_MARKERS",
            "USED_REGIONS",
            "Budget",
            "CountedMessage",
            "Counter",
            "Placeholder",
            "PlaceholderKind",
            "PlaceholderPattern",
            "Policy",
            "Region",
            "RegionMemo",
            "RegionTotals",
            "SummaryMarker",
            "TriggerKind",
            "budget",
            "context_regions",
            "find_artifact_pointers",
            "is_summary",
            "is_summary_text",
            "message_regions",
            "part_placeholder",
            "placeholder_of",
            "raw_region",
            "region_of_part",
            "sum_regions",
            "system_regions",
        ]
    )
    for name in compaction.regions.__all__:
        assert hasattr(compaction.regions, name)
    modules = pkgutil.iter_modules(compaction.regions.__path__)
    assert all(m.name.startswith("_") for m in modules)


# --- a counter with obvious numbers: a quarter of the characters ------------------------------


@dataclass(frozen=True)
class Count:
    parts: tuple[int, ...]
    overhead: int

    @property
    def total(self) -> int:
        return sum(self.parts) + self.overhead


class QuarterCounter:
    REQUEST_OVERHEAD = 3
    MEDIA = 85

    def count_text(self, text: str) -> int:
        return len(text) // 4

    def count_part(self, part: Part) -> int:
        if isinstance(part, TextPart | ReasoningPart):
            return self.count_text(part.text)
        if isinstance(part, ToolCallPart):
            return self.count_text(part.name + part.arguments)
        if isinstance(part, ToolResultPart):
            return 1 + sum(self.count_part(p) for p in part.content)
        return self.MEDIA

    def count_message(self, message: Message) -> Count:
        return Count(tuple(self.count_part(p) for p in message.parts), 4)

    def count_tools(self, tools: tuple[ToolDefinition, ...]) -> int:
        return 10 + sum(self.count_text(t.name + t.description) for t in tools)

    def count_system(self, parts: tuple[Part, ...]) -> int:
        return 2 + sum(self.count_part(p) for p in parts)


COUNTER: Counter = QuarterCounter()

X40 = "x" * 40  # 10 tokens
IMAGE = MediaPart("image", "image/png", data="AAAA")


def text(role: str, body: str = X40) -> Message:
    return Message(role, (TextPart(body),))  # type: ignore[arg-type]


EVERY_KIND = Context(
    format="anthropic-messages",
    system=(TextPart(X40),),  # 2 + 10
    tools=(ToolDefinition("read", "x" * 36),),  # 10 + 10
    messages=(
        text("system"),  # 10 + 4
        text("developer"),  # 10 + 4
        text("user", CTXWEB_SUMMARY_MARKER + "x" * 24),  # summary 10 + 4
        Message("user", (TextPart(X40), IMAGE)),  # user 10 + 4, media 85
        Message(
            "assistant",
            (ReasoningPart(X40), TextPart(X40), ToolCallPart("c1", "read", "x" * 36)),
        ),  # reasoning 10, assistant 10 + 4, tool_calls 10
        Message("tool", (ToolResultPart("c1", (TextPart(X40), IMAGE)),)),
        # tool_results 1 + 10 + 4, media 85
        Message("assistant", (ToolCallPart("c2", "read", "x" * 36),)),  # tool_calls 10, asst 4
        Message("user", (ToolResultPart("c2", (TextPart(X40),)),)),  # tool_results 11, user 4
    ),
)


def test_every_region_gets_its_own_tokens() -> None:
    totals = context_regions(EVERY_KIND, COUNTER)
    assert totals.regions == {
        "system": 3 + 12 + 14 + 14,
        "tools": 20,
        "summary": 14,
        "user": 14 + 4,
        "assistant": 14 + 4,
        "tool_calls": 20,
        "tool_results": 15 + 11,
        "reasoning": 10,
        "media": 170,
        "other": 0,
        "unattributed": 0,
    }
    assert list(totals.regions) == list(USED_REGIONS)
    assert totals.total == totals.counted == sum(totals.regions.values())
    assert totals.reported is None


def test_the_regions_add_up_to_the_messages_counts() -> None:
    totals = context_regions(EVERY_KIND, COUNTER)
    messages = sum(COUNTER.count_message(m).total for m in EVERY_KIND.messages)
    system = COUNTER.count_system(EVERY_KIND.system) + COUNTER.count_tools(EVERY_KIND.tools)
    assert totals.counted == messages + system + COUNTER.REQUEST_OVERHEAD


class CountingCounter(QuarterCounter):
    """The quarter counter, recording every message it counts."""

    def __init__(self) -> None:
        self.counted: list[Message] = []

    def count_message(self, message: Message) -> Count:
        self.counted.append(message)
        return super().count_message(message)


def test_a_memo_splits_each_message_object_once() -> None:
    counter, memo = CountingCounter(), RegionMemo()
    edited = replace(EVERY_KIND, messages=(*EVERY_KIND.messages[:-1], text("user", "new")))

    before = context_regions(EVERY_KIND, counter, memo=memo)
    after = context_regions(edited, counter, memo=memo)

    assert before == context_regions(EVERY_KIND, COUNTER)
    assert after == context_regions(edited, COUNTER)
    assert counter.counted == [*EVERY_KIND.messages, edited.messages[-1]]


def test_a_memo_tells_equal_messages_apart_by_identity() -> None:
    counter, memo = CountingCounter(), RegionMemo()
    first, second = text("user"), text("user")

    assert memo.regions(first, counter) == memo.regions(second, counter) == {"user": 14}
    assert memo.regions(first, counter) is memo.regions(first, counter)
    assert counter.counted == [first, second]


def test_reported_usage_beyond_the_count_is_unattributed() -> None:
    counted = context_regions(EVERY_KIND, COUNTER).counted
    totals = context_regions(EVERY_KIND, COUNTER, reported_input_tokens=counted + 50)
    assert totals.unattributed == totals.regions["unattributed"] == 50
    assert totals.counted == counted
    assert totals.total == counted + 50 == sum(totals.regions.values())
    assert totals.reported == counted + 50


def test_reported_usage_below_the_count_is_shown_but_not_subtracted() -> None:
    counted = context_regions(EVERY_KIND, COUNTER).counted
    totals = context_regions(EVERY_KIND, COUNTER, reported_input_tokens=counted - 50)
    assert totals.unattributed == 0
    assert totals.total == counted
    assert totals.reported == counted - 50


def test_an_empty_context_costs_the_request_overhead() -> None:
    totals = context_regions(Context("openai-chat", ()), COUNTER)
    assert totals.total == 3
    assert totals.regions["system"] == 3


def test_a_picoclaw_summary_block_in_the_system_prompt_is_summary() -> None:
    summary = TextPart(PICOCLAW_SUMMARY_PREFIX + "x" * 40)
    context = Context("anthropic-messages", (), system=(TextPart(X40), summary))
    totals = context_regions(context, COUNTER)
    assert totals.regions["summary"] == COUNTER.count_part(summary)
    assert totals.regions["system"] == 3 + 2 + 10


def test_a_picoclaw_summary_joined_into_a_system_message_is_split_off() -> None:
    tail = PICOCLAW_SUMMARY_PREFIX + "x" * 40
    message = text("system", X40 + "\n\n---\n\n" + tail)
    regions = message_regions(message, COUNTER)
    assert regions["summary"] == len(tail) // 4
    assert sum(regions.values()) == COUNTER.count_message(message).total


def test_a_summary_messages_overhead_is_summary() -> None:
    message = text("assistant", "[HISTORY_SUMMARY]\n" + X40)
    assert message_regions(message, COUNTER) == {"summary": 14 + 4}


@pytest.mark.parametrize(
    ("message", "part", "region"),
    [
        (text("system"), TextPart(X40), "system"),
        (text("developer"), TextPart(X40), "system"),
        (text("user"), TextPart(X40), "user"),
        (text("assistant"), TextPart(X40), "assistant"),
        (text("user", "<previous-summary>\nx"), TextPart("<previous-summary>\nx"), "summary"),
        (text("assistant"), ToolCallPart("c", "f", "{}"), "tool_calls"),
        (text("tool"), ToolResultPart("c", ()), "tool_results"),
        (text("user"), ToolResultPart("c", ()), "tool_results"),
        (text("assistant"), ReasoningPart("hm"), "reasoning"),
        (text("user"), IMAGE, "media"),
    ],
)
def test_region_of_each_part(message: Message, part: Part, region: str) -> None:
    assert region_of_part(message, part) == region


def test_sum_regions_adds_stored_dicts_in_region_order() -> None:
    total = sum_regions([{"user": 3, "media": 1}, {"user": 2}, {"tools": 7, "system": 1}])
    assert total == dict.fromkeys(USED_REGIONS, 0) | {
        "system": 1,
        "tools": 7,
        "user": 5,
        "media": 1,
    }
    assert list(total) == list(USED_REGIONS)


def test_sum_regions_rejects_an_unknown_region() -> None:
    with pytest.raises(ValueError, match="unknown region 'users'"):
        sum_regions([{"users": 1}])


def test_the_stacked_chart_adds_reserve_and_free() -> None:
    totals = context_regions(EVERY_KIND, COUNTER)
    stacked = totals.stacked(budget(1000, 200, Policy.ctxweb()))
    assert list(stacked) == list(REGIONS)
    assert stacked["reserve"] == 200
    assert stacked["free"] == 800 - totals.total
    assert sum(stacked.values()) == 1000


def test_regions_order_is_designs() -> None:
    design = "system tools summary user assistant tool_calls tool_results reasoning media other"
    assert tuple(f"{design} unattributed reserve free".split()) == REGIONS


# --- summary markers --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        "[HISTORY_SUMMARY]\nBlock1: UserAssistantPair (no key info extracted)",
        BASEAGENT_SUMMARY_PREFIX + "We fixed the parser.",
        CODEX_SUMMARY_PREFIX + "\nWe fixed the parser.",
        "<previous-summary>\nGoal\n</previous-summary>\nThe above is a summary",
        PICOCLAW_SUMMARY_PREFIX + "we talked",
        "This session is being continued from a previous conversation that ran out of context.",
        CTXWEB_SUMMARY_MARKER + "\n## Goal",
        "  \n[HISTORY_SUMMARY]\nleading whitespace is ignored",
    ],
)
def test_each_summary_prefix_is_recognised(body: str) -> None:
    assert is_summary(text("user", body))


@pytest.mark.parametrize(
    "extra",
    [{"isCompactSummary": True}, {"type": "compacted"}, {"compacted": True}, {"summary": True}],
)
def test_each_summary_record_is_recognised(extra: dict[str, object]) -> None:
    assert is_summary(Message("user", (TextPart("recap"),), extra=extra))


def test_the_codex_prefix_keeps_its_double_space() -> None:
    assert "summary to  assist with your own analysis:" in CODEX_SUMMARY_PREFIX
    assert not is_summary(text("user", CODEX_SUMMARY_PREFIX.replace("to  assist", "to assist")))


@pytest.mark.parametrize(
    ("body", "extra"),
    [
        ("Please write a summary of [HISTORY_SUMMARY] handling", {}),
        ("plain question", {}),
        ("recap", {"isCompactSummary": False}),
        ("recap", {"type": "message"}),
    ],
)
def test_ordinary_messages_are_not_summaries(body: str, extra: dict[str, object]) -> None:
    assert not is_summary(Message("user", (TextPart(body),), extra=extra))


def test_every_marker_names_its_source() -> None:
    sources = {m.source for m in SUMMARY_MARKERS}
    assert {"llm4s", "baseagent", "codex", "copaw", "picoclaw", "claude-code", "ctxweb"} <= sources


# --- placeholders -----------------------------------------------------------------------------

SHA = "e4ee97ec252749d2096447e849628d0d7734f51700416eefbb33574bf0b3ee75"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (PRUNE_MARKER, Placeholder("cleared", "baseagent")),
        (ANTHROPIC_CLEARED_MARKER, Placeholder("cleared", "anthropic")),
        ("head\n\n...1234 tokens truncated...\n\ntail", Placeholder("truncated", "baseagent")),
        ("head\n...12 tokens truncated...\ntail", Placeholder("truncated", "baseagent")),
        ("head…1234 tokens truncated…\ntail", Placeholder("truncated", "codex")),
        (
            "Total output lines: 900\n\nx\n[... omitted 10 of 900 lines ...]\n\n",
            Placeholder("truncated", "codex"),
        ),
        (
            "x" * 500 + "\n\n<<<TRUNCATED>>> (9000 characters omitted) <<<END_TRUNCATED>>>\n\n",
            Placeholder("truncated", "reme"),
        ),
        ("[EXTERNALIZED:art_7f3a]", Placeholder("externalized", "ctxweb", "art_7f3a")),
        (
            "preview...\n[EXTERNALIZED:0b7c4d2e-1]\n",
            Placeholder("externalized", "ctxweb", "0b7c4d2e-1"),
        ),
        (
            f"[EXTERNALIZED: content_{SHA} | TEXT | Text content, 10000 bytes]",
            Placeholder("externalized", "llm4s", SHA),
        ),
        (
            "a\n\n<<<TRUNCATED>>> (5 characters omitted) <<<END_TRUNCATED>>>\n\nb\n\n"
            "[Full content saved to: tool_result/ab12.txt]",
            Placeholder("externalized", "copaw", "tool_result/ab12.txt"),
        ),
        ("[BINARY CONTENT - 4096 bytes - externalized: call_1]", Placeholder("truncated", "llm4s")),
        ('{"a":[1,"...[+30 items]...",2]}', Placeholder("truncated", "llm4s")),
        ("w1 w2 ... [+-49 words] ... w3", Placeholder("truncated", "llm4s")),
    ],
)
def test_each_placeholder_is_flagged(body: str, expected: Placeholder) -> None:
    assert placeholder_of(body) == expected


@pytest.mark.parametrize(
    "body",
    [
        "plain output",
        "the docs mention [Old tool result content cleared] in passing",
        "EXTERNALIZED without brackets",
        "",
    ],
)
def test_ordinary_text_is_no_placeholder(body: str) -> None:
    assert placeholder_of(body) is None


def test_a_placeholder_in_a_tool_result_is_found_and_stays_in_its_region() -> None:
    part = ToolResultPart("c1", (TextPart(PRUNE_MARKER),))
    message = Message("tool", (part,))
    assert part_placeholder(part) == Placeholder("cleared", "baseagent")
    assert region_of_part(message, part) == "tool_results"
    assert part_placeholder(IMAGE) is None


# --- budgets ----------------------------------------------------------------------------------


def test_baseagents_budget() -> None:
    b = budget(200_000, 32_000, Policy.baseagent())
    assert (b.usable, b.trigger) == (168_000, 142_800)
    assert not b.over_trigger(142_800)
    assert b.over_trigger(142_801)


def test_copaws_budget() -> None:
    b = budget(131_072, 13_107, Policy.copaw())
    assert b.trigger == 98_304
    assert b.over_trigger(98_304)
    assert not b.over_trigger(98_303)


def test_picoclaws_compress_budget() -> None:
    b = budget(131_072, 32_768, Policy.picoclaw_compress())
    assert (b.usable, b.trigger) == (98_304, 98_304)
    assert not b.over_trigger(98_304)
    assert b.over_trigger(98_305)


def test_picoclaws_summarize_budget_counts_history_and_messages() -> None:
    policy = Policy.picoclaw_summarize()
    assert policy.scope == "history"
    b = budget(131_072, 32_768, policy)
    assert b.trigger == 131_072 * 75 // 100
    assert not b.over_trigger(98_304, messages=20)
    assert b.over_trigger(98_305, messages=20)
    assert b.over_trigger(10, messages=21)


def test_picoclaws_summarize_trigger_rounds_down_like_integer_division() -> None:
    assert budget(1001, 0, Policy.picoclaw_summarize()).trigger == 1001 * 75 // 100


def test_opencode_usable_with_a_configured_reserve() -> None:
    assert budget(100_000, 32_000, Policy.opencode(reserved=12_000)).usable == 56_000


@pytest.mark.parametrize(
    ("window", "max_output", "reserved", "count", "overflow"),
    [
        (100_000, 32_000, None, 75_000 + 5_000, True),
        (200_000, 32_000, None, 100_000 + 10_000, False),
        (100_000, 32_000, None, 60_000 + 10_000 + 10_000, True),
        # with an input limit OpenCode uses ``input − reserved``: the window is the input limit
        (272_000, 0, min(20_000, 128_000), 271_000 + 1_000 + 2_000, True),
        (272_000, 0, min(20_000, 128_000), 200_000 + 20_000 + 10_000, False),
        (120_000, 0, min(20_000, 10_000), 50_000 + 9_999, False),
        (0, 32_000, None, 1_000_000, False),
    ],
)
def test_opencodes_overflow_cases(
    window: int, max_output: int, reserved: int | None, count: int, overflow: bool
) -> None:
    b = budget(window, max_output, Policy.opencode(reserved=reserved))
    assert b.over_trigger(count) is overflow


def test_opencodes_default_reserve_is_capped_by_the_output() -> None:
    assert budget(100_000, 32_000, Policy.opencode()).usable == 48_000
    assert budget(100_000, 8_000, Policy.opencode()).usable == 84_000


def test_llm4s_and_nanobot_budgets_are_token_counts() -> None:
    assert budget(128_000, 4_096, Policy.llm4s(1_000)).trigger == 1_000
    nanobot = budget(65_536, 8_192, Policy.nanobot(500))
    assert nanobot.trigger == 500
    assert not nanobot.over_trigger(500)
    assert nanobot.over_trigger(501)


def test_ctxwebs_default_is_80_percent_of_usable() -> None:
    b = budget(200_000, 32_000, Policy.ctxweb())
    assert b.trigger == 134_400
    assert b.over_trigger(134_401)
    assert not b.over_trigger(134_400)


def test_usable_is_never_negative_and_fill_is_a_share_of_it() -> None:
    assert budget(1_000, 2_000, Policy.ctxweb()).usable == 0
    b = budget(200_000, 32_000, Policy.baseagent())
    assert b.fill(84_000) == 0.5
    assert budget(1_000, 2_000, Policy.ctxweb()).fill(1) == float("inf")
    assert budget(1_000, 2_000, Policy.ctxweb()).fill(0) == 0.0


# --- properties -------------------------------------------------------------------------------

texts = st.text(max_size=60)
leaf_parts = st.one_of(
    texts.map(TextPart),
    texts.map(ReasoningPart),
    st.just(IMAGE),
    st.builds(ToolCallPart, id=st.just("c"), name=texts, arguments=texts),
)
parts = st.one_of(
    leaf_parts,
    st.builds(
        ToolResultPart,
        tool_call_id=st.just("c"),
        content=st.lists(st.one_of(texts.map(TextPart), st.just(IMAGE)), max_size=3).map(tuple),
    ),
)
messages = st.builds(
    Message,
    role=st.sampled_from(["system", "developer", "user", "assistant", "tool"]),
    parts=st.lists(parts, max_size=4).map(tuple),
)
contexts = st.builds(
    Context,
    format=st.just("openai-chat"),
    messages=st.lists(messages, max_size=6).map(tuple),
    system=st.lists(
        st.one_of(texts.map(TextPart), texts.map(lambda s: TextPart("CONTEXT_SUMMARY: " + s))),
        max_size=2,
    ).map(tuple),
    tools=st.lists(st.builds(ToolDefinition, name=texts), max_size=2).map(tuple),
)


@given(contexts, st.none() | st.integers(min_value=0, max_value=5_000))
def test_regions_always_sum_to_the_total_and_are_non_negative(
    context: Context, reported: int | None
) -> None:
    totals = context_regions(context, COUNTER, reported_input_tokens=reported)
    assert list(totals.regions) == list(USED_REGIONS)
    assert all(v >= 0 for v in totals.regions.values())
    assert sum(totals.regions.values()) == totals.total == totals.counted + totals.unattributed
    if reported is not None:
        assert totals.total == max(reported, totals.counted)


@given(messages)
def test_a_messages_regions_sum_to_its_count(message: Message) -> None:
    regions = message_regions(message, COUNTER)
    assert sum(regions.values()) == COUNTER.count_message(message).total
    assert all(v > 0 for v in regions.values())


# --- summary prefixes: found without joining or stripping a message's whole text ---------------

#: Prefixes, and prefixes cut at a newline: the message's parts are joined with newlines, so a
#: prefix can run on from one part into the next.
_HALVES = [h for p in _summary_markers._PREFIXES if "\n" in p for h in p.split("\n", 1)]
_PIECES = st.sampled_from(
    [*_summary_markers._PREFIXES, *_HALVES, " ", "\n", "\t", "\u00a0", "\x1c", "x", "\n\n"]
)
_TEXTS = st.lists(_PIECES, max_size=6).map("".join)


@given(st.lists(st.one_of(_TEXTS, st.text(max_size=20)), max_size=4))
def test_a_summary_is_found_as_on_the_whole_stripped_text(texts: list[str]) -> None:
    """``is_summary`` reads only the start of a message's text; it finds what
    ``message.text.lstrip().startswith(prefix)`` finds, prefixes running on over parts and parts
    of whitespace only included."""
    message = Message("user", tuple(TextPart(t) for t in texts))
    expected = message.text.lstrip().startswith(_summary_markers._PREFIXES)
    assert _summary_markers.is_summary(message) is expected
    for text in texts:
        assert _summary_markers.is_summary_text(text) is text.lstrip().startswith(
            _summary_markers._PREFIXES
        )


def test_a_summary_prefix_cut_over_two_parts_is_found() -> None:
    """A prefix holding newlines, cut at one of them into two text parts (joined with that
    newline), is still the start of the message's text."""
    cuts = 0
    for prefix in _summary_markers._PREFIXES:
        for at, character in enumerate(prefix):
            if character == "\n":
                head, tail = prefix[:at], prefix[at + 1 :]
                message = Message("assistant", (TextPart("  " + head), TextPart(tail + "...")))
                assert _summary_markers.is_summary(message), (prefix[:30], at)
                cuts += 1
    assert cuts  # the markers do hold such prefixes
