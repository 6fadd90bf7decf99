"""``llm4s-pipeline``: LLM4S's own tests (specs §3.8) with exact values under the ceil(len/4) mock,
then the strategy's plans, artifacts, deviations and warnings."""

from __future__ import annotations

import hashlib
import json
import math
import pkgutil
import re
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import compaction.strategies.llm4s
from compaction.errors import StrategyError
from compaction.messages.model import Message, TextPart, ToolResultPart
from compaction.strategies import get_strategy, list_strategies
from compaction.strategies.llm4s import (
    DIGEST_PROMPT,
    HISTORY_SUMMARY,
    _history_compressor,
    block_digest,
    compress_to_digest,
    compress_tool_output,
    conversation_tokens,
    detect_content_type,
    fits_in_budget,
    manage_context,
    semantic_blocks,
    trim_to_budget,
    usage_info,
)
from compaction.summarizers import SummarizerError
from compaction.tokens import REQUEST_OVERHEAD, TokenCounter
from compaction.turns import orphans
from tests.support.messages import a, atc, ctx, sys, t, u


def count(text: str) -> int:
    """LLM4S's test tokenizer: ceil(len/4) tokens per string."""
    return math.ceil(len(text) / 4)


class _Ceil4:
    name = "ceil-len-4"

    def count(self, text: str) -> int:
        return count(text)

    def encode(self, text: str) -> list[int]:
        return list(range(count(text)))


class Ceil4Counter(TokenCounter):
    REQUEST_OVERHEAD = REQUEST_OVERHEAD


CEIL4 = Ceil4Counter(_Ceil4())

SMALL = [u("Hello, how are you?"), a("I'm doing well, thank you for asking!")]
MEDIUM = [
    *SMALL,
    u("What is the weather like today?"),
    a("The weather is sunny and warm today."),
    u("Can you help me with a coding problem?"),
    a("Of course! I'd be happy to help with your coding problem."),
]
LARGE = [
    m
    for i in range(1, 21)
    for m in (
        u(f"Question {i}: What is the answer to topic {i}?"),
        a(f"Answer {i}: Here is the response about topic {i} with some details."),
    )
]
DIGEST = a(f"{HISTORY_SUMMARY}\nPrevious conversation discussed coding topics and weather.")
WITH_DIGEST = [DIGEST, *MEDIUM[:4]]
NO_INFO = f"{HISTORY_SUMMARY}\nUserAssistantPair (no key info extracted)"


def texts(messages: Sequence[Message]) -> list[str]:
    return [m.text if not m.tool_results else m.tool_results[0].text for m in messages]


# --- the public API -----------------------------------------------------------------------------


def test_the_public_api_is_pinned():
    package = compaction.strategies.llm4s
    assert package.__all__ == [
        "DIGEST_PROMPT",
        "HISTORY_SUMMARY",
        "Block",
        "Llm4sPipeline",
        "ManagedConversation",
        "PipelineStep",
        "block_digest",
        "compress_to_digest",
        "compress_tool_output",
        "content_summary",
        "conversation_tokens",
        "detect_content_type",
        "fits_in_budget",
        "manage_context",
        "semantic_blocks",
        "trim_to_budget",
        "usage_info",
    ]
    also = [
        "DEFAULT_HEADROOM",
        "DEFAULT_MAX_BLOCKS",
        "DEFAULT_SUMMARY_TARGET",
        "EXTERNALIZE_BYTES",
        "INLINE_BYTES",
        "STEP_NAMES",
        "Count",
        "_MessageTokens",
    ]
    for name in [*package.__all__, *also]:
        assert hasattr(package, name)
    assert all(m.name.startswith("_") for m in pkgutil.iter_modules(package.__path__))


# --- fixtures' counts (§3.1) --------------------------------------------------------------------


def test_the_fixtures_count_as_llm4s_counts_them():
    assert conversation_tokens(SMALL, count) == 33
    assert conversation_tokens(MEDIUM, count) == 91
    assert conversation_tokens(LARGE, count) == 721
    assert conversation_tokens(WITH_DIGEST, count) == 81


def test_tool_calls_and_tool_messages_pay_their_overheads():
    call = atc("c1", name="get", args='{"a": 1}')
    assert conversation_tokens([call], count) == (0 + 4) + (1 + 2 + 10) + 10
    assert conversation_tokens([t("c1", "abcd")], count) == 1 + 4 + count("tool_call_id:c1") + 10


# --- TokenWindow (§3.7) -------------------------------------------------------------------------


def test_the_window_leaves_a_small_conversation_untouched():
    assert trim_to_budget(SMALL, count, 1000) == SMALL


def test_the_window_keeps_the_last_four_of_large_at_100():
    out = trim_to_budget(LARGE, count, 100)
    assert out == LARGE[-4:]
    assert conversation_tokens(out, count) == 82


def test_the_window_pins_the_digest_and_stops_at_the_first_misfit():
    out = trim_to_budget(WITH_DIGEST, count, 50)
    assert out == [DIGEST, MEDIUM[3]]
    assert conversation_tokens(out, count) == 46


def test_the_window_with_headroom_020_can_start_with_an_assistant():
    out = trim_to_budget(MEDIUM, count, 100, 0.20)
    assert out == MEDIUM[-5:]
    assert out[0].role == "assistant"
    assert conversation_tokens(out, count) == 82


def test_the_window_keeps_only_the_last_message_at_30():
    out = trim_to_budget(MEDIUM, count, 30)
    assert out == MEDIUM[-1:]
    assert conversation_tokens(out, count) == 29


@pytest.mark.parametrize(
    ("messages", "budget", "headroom", "path"),
    [
        (SMALL, -100, 0.08, "budget"),
        (SMALL, 0, 0.08, "budget"),
        (SMALL, 100, -0.1, "headroom"),
        (SMALL, 100, 1.0, "headroom"),
        ([], 100, 0.08, "conversation"),
    ],
)
def test_the_window_rejects_bad_input(messages, budget, headroom, path):
    with pytest.raises(StrategyError) as error:
        trim_to_budget(messages, count, budget, headroom)
    assert error.value.path == path


def test_the_empty_conversation_error_is_llm4s_wording():
    with pytest.raises(StrategyError, match="Cannot trim empty conversation"):
        trim_to_budget([], count, 100)


def test_fits_in_budget():
    assert fits_in_budget(SMALL, count, 1000)
    assert not fits_in_budget(LARGE, count, 50)
    assert fits_in_budget(MEDIUM, count, 91, 0.0)
    assert not fits_in_budget(MEDIUM, count, 91, 0.5)


def test_usage_info_at_twice_the_tokens_is_50_percent():
    assert usage_info(MEDIUM, count, 182) == (91, True, 50)


# --- ContextManager (§3.2) ----------------------------------------------------------------------

NAMES = ["ToolDeterministicCompaction", "HistoryCompression", "LLMHistorySqueeze", "FinalTokenTrim"]


def test_the_manager_applies_nothing_to_small():
    done = manage_context(SMALL, count, 1000)
    assert [s.name for s in done.steps] == NAMES
    assert not any(s.applied for s in done.steps)
    assert list(done.messages) == SMALL
    assert done.final_tokens == done.original_tokens == 33


def test_the_manager_digests_then_trims_large_at_100():
    done = manage_context(LARGE, count, 100)
    assert [s.name for s in done.steps] == NAMES
    step2 = done.steps[1]
    assert step2.applied
    assert step2.tokens_after == 475
    step2_messages = compress_to_digest(LARGE, count, 400, 5)
    assert len(step2_messages) == 25
    assert [m.text for m in step2_messages[:15]] == [NO_INFO] * 15
    assert all(m.role == "system" for m in step2_messages[:15])
    assert step2_messages[15:] == LARGE[-10:]
    assert list(done.messages) == [step2_messages[0], *LARGE[-4:]]
    assert done.final_tokens == 101  # over the budget of 100: the +10 is never reserved


def test_the_manager_achieves_the_budget_target_at_200():
    done = manage_context(LARGE, count, 200)
    assert list(done.messages) == [Message("system", (TextPart(NO_INFO),)), *LARGE[-9:]]
    assert len(done.messages) == 10
    assert done.final_tokens == 194


def test_the_manager_on_medium_at_50_only_trims():
    done = manage_context(MEDIUM, count, 50)
    assert not done.steps[1].applied
    assert list(done.messages) == MEDIUM[-3:]
    assert done.final_tokens == 56


def test_a_disabled_step_reports_not_applied():
    big = [u("q"), atc("c1"), t("c1", "x" * 10_000)]
    done = manage_context(big, count, 100_000, enable_deterministic_compression=False)
    assert not done.steps[0].applied
    assert list(done.messages) == big


def test_the_manager_fails_where_llm4s_returns_left():
    with pytest.raises(StrategyError):
        manage_context(SMALL, count, 100, headroom=1.5)
    with pytest.raises(StrategyError, match="Cannot trim empty conversation"):
        manage_context([], count, 100)


def test_the_manager_accepts_a_single_message_and_keeps_the_digest():
    assert list(manage_context([u("hi")], count, 100).messages) == [u("hi")]
    assert manage_context(WITH_DIGEST, count, 100).messages[0] == DIGEST


# --- HistoryCompressor (§3.5) -------------------------------------------------------------------


def _digest(messages: Sequence[Message], k: int = 0, cap: int = 1000) -> list[str]:
    return [m.text for m in compress_to_digest(messages, count, cap, k)]


def test_older_blocks_become_no_info_digests():
    qa = [m for i in (1, 2, 3) for m in (u(f"Question {i}"), a(f"Answer {i}"))]
    out = compress_to_digest(qa, count, 200, 1)
    assert [m.text for m in out] == [NO_INFO, NO_INFO, "Question 3", "Answer 3"]
    assert [m.role for m in out[:2]] == ["system", "system"]


def test_the_digest_lists_identifiers():
    out = _digest(
        [u("Get order with ID: ORD-12345"), a("Found order ID: ORD-12345, customer key: CUST-789")]
    )
    assert out == [f"{HISTORY_SUMMARY}\nUserAssistantPair: IDs[ID: ORD-12345,key: CUST-789]"]


def test_the_digest_counts_urls_and_api_triggers_tools():
    out = _digest(
        [
            u("Check this URL: https://example.com/api/v1"),
            a("I checked the endpoint at https://example.com/api/v1/resource"),
        ]
    )
    assert out == [f"{HISTORY_SUMMARY}\nUserAssistantPair: Tools[1 used] URLs[2]"]


def test_the_digest_keeps_the_first_error_cut_to_40():
    out = _digest([u("Why did it fail?"), a("The error occurred because: Authentication failed.")])
    assert out == [
        f"{HISTORY_SUMMARY}\nUserAssistantPair: Error[error occurred because: Authentication f...]"
    ]


def test_the_digest_keeps_rules_and_decisions_cut_to_50():
    out = _digest(
        [
            u("Which framework should we use?"),
            a("We decided to use Scala with Cats for the implementation."),
        ]
    )
    assert out == [
        f"{HISTORY_SUMMARY}\nUserAssistantPair: Rules[should we use?...]"
        " Decision[decided to use Scala with Cats for the implementat...]"
    ]


def test_the_digest_splits_a_tool_exchange_into_three_blocks():
    messages = [
        u("Use the tool to get the weather"),
        atc("c1", text="I will call the weather function now.", name="get_weather"),
        t("c1", '{"temp": 15, "condition": "cloudy"}'),
        a("The tool returned that it is 15°C and cloudy."),
    ]
    assert [b.type for b in semantic_blocks(messages)] == [
        "UserAssistantPair",
        "StandaloneTool",
        "StandaloneAssistant",
    ]
    assert _digest(messages) == [
        f"{HISTORY_SUMMARY}\nUserAssistantPair: Tools[1 used]",
        f"{HISTORY_SUMMARY}\nStandaloneTool (no key info extracted)",
        f"{HISTORY_SUMMARY}\nStandaloneAssistant: Tools[1 used]",
    ]


def test_digests_over_the_cap_are_consolidated_and_cut():
    pairs = [
        m
        for i in range(1, 11)
        for m in (
            u(f"Question {i} about topic {i}"),
            a(f"Detailed answer {i} with information about topic {i}"),
        )
    ]
    out = compress_to_digest(pairs, count, 50, 1)
    assert len(out) == 3
    assert out[1:] == pairs[-2:]
    joined = "; ".join(f"Block{i}: UserAssistantPair (no key info extracted)" for i in range(1, 10))
    assert out[0].role == "system"
    assert out[0].text == f"{HISTORY_SUMMARY}\n{joined[:200]}..."


def test_compression_is_idempotent_and_handles_edges():
    assert compress_to_digest(WITH_DIGEST, count, 400, 1) == WITH_DIGEST
    assert compress_to_digest([], count, 400, 1) == []
    assert compress_to_digest(MEDIUM, count, 400, 10) == MEDIUM
    assert all(
        m.text.startswith(HISTORY_SUMMARY) for m in compress_to_digest(MEDIUM, count, 400, 0)
    )


def test_block_digest_of_status_codes():
    assert block_digest("StandaloneTool", [t("c", "status: 404 and code 5000")]) == (
        "StandaloneTool: Status[status: 404,code 5000]"
    )


# --- SemanticBlocks (§3.4) ----------------------------------------------------------------------


def _shape(messages: Sequence[Message]) -> list[tuple[str, int]]:
    return [(b.type, len(b.indexes)) for b in semantic_blocks(messages)]


def test_semantic_blocks():
    assert _shape([u("q"), a("r"), u("q"), a("r")]) == [("UserAssistantPair", 2)] * 2
    assert _shape([a("r")]) == [("StandaloneAssistant", 1)]
    assert len(semantic_blocks([u("q"), atc("c"), t("c"), a("r")])) == 3
    assert len(semantic_blocks([sys("s"), u("q"), a("r")])) >= 2
    assert len(semantic_blocks([u("q"), u("q"), a("r")])) == 2
    assert len(semantic_blocks([u("q"), a("r"), a("r")])) == 2
    assert _shape([t("c")]) == [("StandaloneTool", 1)]


def test_semantic_blocks_preserve_order_and_count():
    messages = [sys("s"), u("q"), atc("c"), t("c"), a("r"), a("s"), u("z")]
    flat = [i for b in semantic_blocks(messages) for i in b.indexes]
    assert flat == list(range(len(messages)))


# --- ToolOutputCompressor (§3.3) ----------------------------------------------------------------


def test_small_json_stays():
    assert compress_tool_output('{"name": "test", "value": 42}') == (
        '{"name": "test", "value": 42}',
        None,
    )


def test_big_text_is_externalized_with_the_exact_pointer():
    out, action = compress_tool_output("x" * 10000)
    assert action == "externalize"
    assert out == (
        "[EXTERNALIZED: content_e4ee97ec252749d2096447e849628d0d7734f51700416eefbb33574bf0b3ee75"
        " | TEXT | Text content, 10000 bytes]"
    )


def test_big_json_is_externalized_with_its_field_count():
    content = json.dumps({"data": "x" * 10000})
    assert len(content.encode()) == 10012
    sha = hashlib.sha256(content.encode()).hexdigest()
    assert compress_tool_output(content)[0] == (
        f"[EXTERNALIZED: content_{sha} | JSON | JSON object with 1 fields, 10012 bytes]"
    )


def test_json_nulls_are_removed_inline():
    body = {f"field{i}": None for i in range(1, 201)} | {"keep": "value", "padding": "x" * 2000}
    content = json.dumps(body)
    assert len(content.encode()) == 5524
    out, action = compress_tool_output(content)
    assert action == "inline"
    assert out == json.dumps({"keep": "value", "padding": "x" * 2000}, separators=(",", ":"))
    assert len(out) < len(content)


def test_json_under_2kb_stays_even_with_empty_strings():
    content = json.dumps({f"field{i}": "" for i in range(1, 101)} | {"keep": "value"})
    assert len(content.encode()) == 1509
    assert compress_tool_output(content) == (content, None)


def test_large_json_arrays_keep_ten_and_ten():
    content = json.dumps({"items": list(range(1, 51)), "padding": "x" * 2000})
    assert len(content.encode()) == 2217
    out = json.loads(compress_tool_output(content)[0])
    assert out["items"] == [*range(1, 11), "...[+30 items]...", *range(41, 51)]


def test_long_logs_keep_80_and_40_lines():
    content = "\n".join(f"INFO  L{i}" for i in range(1, 151)) + "\n" + "x" * 2500
    assert len(content.encode()) == 4042
    assert detect_content_type(content) == "log"
    out = compress_tool_output(content)[0].split("\n")
    assert out[:80] == [f"INFO  L{i}" for i in range(1, 81)]
    assert out[80] == "... [collapsed 31 repeated/verbose log lines] ..."
    assert out[81:] == [f"INFO  L{i}" for i in range(112, 151)] + ["x" * 2500]


def test_short_logs_stay():
    content = "\n".join(f"INFO  line {i} " + "y" * 30 for i in range(60))
    assert compress_tool_output(content) == (content, "inline")


def test_repeated_log_lines_collapse():
    content = "\n".join(["INFO same"] * 130 + ["DEBUG end " + "z" * 1000])
    out = compress_tool_output(content)[0].split("\n")
    assert out[0] == "INFO same ×80"
    assert out[2] == "INFO same ×39"


def test_error_stacks_keep_ten_frames():
    frames = [f"    at com.x.C.m{i}(C.java:{i})" for i in range(40)]
    content = "\n".join(["java.lang.IllegalStateException: boom", "h2", "h3", *frames])
    content += "\n" + "pad " * 300
    out = compress_tool_output(content)[0]
    assert (
        out
        == "\n".join(["java.lang.IllegalStateException: boom", "h2", "h3", *frames[:10]])
        + "\n... [+30 additional stack frames] ..."
    )


def test_binary_is_replaced_and_text_quirk_grows():
    assert compress_tool_output("data:" + "A" * 3000, "call_9")[0] == (
        "[BINARY CONTENT - 3005 bytes - externalized: call_9]"
    )
    assert compress_tool_output("x" * 3000)[0] == "x" * 3000 + " ... [+-49 words] ... " + "x" * 3000


def test_invalid_json_falls_back_to_text():
    content = "{" + "word " * 600 + "}"
    out, action = compress_tool_output(content)
    assert action == "inline"
    assert "... [+551 words] ..." in out


# --- the strategy -------------------------------------------------------------------------------

STRATEGY = get_strategy("llm4s-pipeline")


def test_it_is_registered_in_design_order():
    ids = [s.id for s in list_strategies()]
    assert ids.index("picoclaw-trim") < ids.index("llm4s-pipeline") < ids.index("nanobot-trim")


def test_the_plan_reproduces_large_at_100():
    plan = STRATEGY.plan(ctx(*LARGE), {"budget": 100}, counter=CEIL4)
    assert list(plan.context.messages) == [Message("system", (TextPart(NO_INFO),)), *LARGE[-4:]]
    kinds = [e.kind for e in plan.edits]
    assert kinds.count("summarize-range") == 30
    assert kinds.count("drop") == 6
    assert kinds.count("insert-summary") == 1
    assert any("above the budget of 100" in w for w in plan.warnings)


def test_externalized_outputs_are_artifacts_under_the_same_hash():
    big = "y" * 9000
    plan = STRATEGY.plan(ctx(u("go"), atc("c1"), t("c1", big), a("ok")), {}, counter=CEIL4)
    sha = hashlib.sha256(big.encode()).hexdigest()
    result = plan.context.messages[2].tool_results[0]
    assert result.tool_call_id == "c1"
    assert result.text == f"[EXTERNALIZED: content_{sha} | TEXT | Text content, 9000 bytes]"
    (edit,) = plan.edits
    assert edit.kind == "externalize"
    assert edit.artifact_id == sha
    (artifact,) = plan.artifacts
    assert artifact.id == sha
    assert artifact.content == big


def test_the_system_prompt_is_outside_the_conversation():
    plan = STRATEGY.plan(ctx(sys("be brief"), *LARGE), {"budget": 100}, counter=CEIL4)
    assert plan.context.messages[0] == sys("be brief")
    assert plan.context.messages[1].text == NO_INFO


def test_an_empty_conversation_is_reported_not_raised():
    plan = STRATEGY.plan(ctx(sys("only a prompt")), {}, counter=CEIL4)
    assert plan.context.messages == (sys("only a prompt"),)
    assert any("Cannot trim empty conversation" in w for w in plan.warnings)


def test_headroom_of_one_is_rejected():
    with pytest.raises(StrategyError, match=r"params\.headroom"):
        STRATEGY.validate({"headroom": 1.0})


def _chain() -> list[Message]:
    body = "z" * 400
    return [
        *LARGE[:12],
        u("run the tool"),
        atc("c1", text="calling"),
        t("c1", body),
        a("done"),
        *LARGE[12:20],
    ]


def test_the_block_split_orphans_a_result_and_warns():
    plan = STRATEGY.plan(ctx(*_chain()), {"budget": 300, "max_semantic_blocks": 6}, counter=CEIL4)
    assert not orphans(plan.context.messages).ok
    assert any("orphaned tool result" in w for w in plan.warnings)


def test_keep_tool_pairs_avoids_orphans():
    params = {"budget": 300, "max_semantic_blocks": 6, "keep_tool_pairs": True}
    plan = STRATEGY.plan(ctx(*_chain()), params, counter=CEIL4)
    assert orphans(plan.context.messages).ok
    assert not any("orphaned" in w for w in plan.warnings)


def test_the_trim_orphan_is_avoided_on_request():
    messages = [u("q"), atc("c1"), t("c1", "r" * 100), a("done " * 10)]
    plan = STRATEGY.plan(ctx(*messages), {"budget": 60}, counter=CEIL4)
    assert plan.context.messages[0].role == "tool"
    assert any("FinalTokenTrim kept a tool result" in w for w in plan.warnings)
    fixed = STRATEGY.plan(ctx(*messages), {"budget": 60, "keep_tool_pairs": True}, counter=CEIL4)
    assert orphans(fixed.context.messages).ok


def test_no_growth_skips_the_growing_text_quirk():
    messages = [u("q"), atc("c1"), t("c1", "x" * 3000)]
    grown = STRATEGY.plan(ctx(*messages), {}, counter=CEIL4)
    assert len(grown.context.messages[2].tool_results[0].text) == 6022
    assert any("longer" in w for w in grown.warnings)
    kept = STRATEGY.plan(ctx(*messages), {"no_growth": True}, counter=CEIL4)
    assert kept.context.messages == tuple(messages)


class Recorder:
    """A summarizer that answers a fixed text and records what it was asked."""

    def __init__(self, reply: str = "short digest", fail: bool = False) -> None:
        self.reply = reply
        self.fail = fail
        self.calls: list[tuple[list[Message], str]] = []

    def summarize(self, messages: Sequence[Message], *, previous: str | None, prompt: str) -> str:
        self.calls.append((list(messages), prompt))
        if self.fail:
            raise SummarizerError("HTTP 500")
        return self.reply


def _wordy() -> list[Message]:
    return [
        m
        for i in range(30)
        for m in (u(f"Request {i}: the id: R{i} must work."), a(f"The call to api {i} failed."))
    ]


def test_the_squeeze_runs_only_with_a_summarizer_and_moves_the_digest():
    recorder = Recorder()
    params = {"budget": 150, "summary_token_target": 20}
    plan = STRATEGY.plan(ctx(*_wordy()), params, counter=CEIL4, summarizer=recorder)
    (call,) = recorder.calls
    assert call[1] == DIGEST_PROMPT
    assert call[0][0].role == "user"
    assert call[0][0].text.startswith("Block1: UserAssistantPair")
    assert plan.context.messages[-1].text == f"{HISTORY_SUMMARY}\nshort digest"
    assert any("moved to the end" in w for w in plan.warnings)
    in_place = STRATEGY.plan(
        ctx(*_wordy()), {**params, "digest_in_place": True}, counter=CEIL4, summarizer=Recorder()
    )
    assert in_place.context.messages[0].text == f"{HISTORY_SUMMARY}\nshort digest"
    without = STRATEGY.plan(ctx(*_wordy()), params, counter=CEIL4)
    assert without.context.messages[0].text.startswith(f"{HISTORY_SUMMARY}\nBlock1:")


def test_a_failed_squeeze_leaves_the_context_unchanged():
    params = {"budget": 150, "summary_token_target": 20}
    plan = STRATEGY.plan(ctx(*_wordy()), params, counter=CEIL4, summarizer=Recorder(fail=True))
    assert plan.context.messages == tuple(_wordy())
    assert plan.edits == ()
    assert any("squeeze failed" in w for w in plan.warnings)


def test_anthropic_tool_results_are_tool_messages():
    result = Message("user", (ToolResultPart("c1", (TextPart("x" * 9000),)),))
    plan = STRATEGY.plan(
        ctx(u("q"), atc("c1"), result, fmt="anthropic-messages"), {}, counter=CEIL4
    )
    assert plan.context.messages[2].tool_results[0].text.startswith("[EXTERNALIZED: content_")


# --- the digest's sentence patterns, in linear time ---------------------------------------------

#: LLM4S's own patterns, as ``re`` would run them (quadratic on keywords with no full stop).
_LLM4S_SENTENCES = {
    "_CONSTRAINTS": r"(?:must|should|cannot|required?|forbidden|allowed)[^.!?]*[.!?]",
    "_ERRORS": r"(?:error|exception|failed?|denied)[^.!?]*[.!?]",
    "_DECISIONS": r"(?:decided|chosen|selected|determined)[^.!?]*[.!?]",
    "_TOOLS": r"(?:tool|function|api|call)(?:ed|ing)?[^.!?]*[.!?]",
    "_OUTCOMES": r"(?:result|outcome|conclusion|success|completed?)[^.!?]*[.!?]",
}
_DIGEST_WORDS = (
    "must Should CANNOT require required error fail failed faile denied decided tool tooled"
    " calling api function result complete completed x mustt erro é"
)
_DIGEST_PIECES = st.sampled_from([*_DIGEST_WORDS.split(), " ", "\n", ".", "!", "?", "a.b", "..."])


@settings(max_examples=500, deadline=None)
@given(st.lists(_DIGEST_PIECES, max_size=40).map("".join))
def test_digest_sentences_match_what_llm4s_patterns_match(text: str) -> None:
    for name, pattern in _LLM4S_SENTENCES.items():
        expected = [m.group(0) for m in re.finditer(pattern, text, re.IGNORECASE | re.ASCII)]
        assert list(getattr(_history_compressor, name).finditer(text)) == expected, name
