"""compaction.tokens: the offline encodings, the model map, the cached counter and its overheads."""

from __future__ import annotations

import doctest
import hashlib
import importlib
import pkgutil

import pytest
import tiktoken_ext.openai_public
from hypothesis import given
from hypothesis import strategies as st

import compaction.messages.model
import compaction.tokens
from compaction.messages.model import (
    Context,
    MediaPart,
    Message,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolDefinition,
    ToolResultPart,
)
from compaction.tokens import (
    MESSAGE_OVERHEAD,
    REQUEST_OVERHEAD,
    TOOLS_OVERHEAD,
    EncodingChoice,
    MessageCount,
    TokenCache,
    TokenCounter,
    Tokenizer,
    _counter,
    _encodings,
    _media,
    _models,
    available_encodings,
    encoding_for_model,
    estimators,
    get_tokenizer,
)


def user(text: str) -> Message:
    return Message(role="user", parts=(TextPart(text),))


@pytest.fixture
def cl100k() -> Tokenizer:
    return get_tokenizer("cl100k_base")


@pytest.fixture
def counter(cl100k: Tokenizer) -> TokenCounter:
    return TokenCounter(cl100k)


@pytest.fixture
def without_o200k(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process whose o200k data is missing: fresh tokenizer cache, loader finds nothing."""
    monkeypatch.setattr(_encodings, "_tokenizers", {})
    monkeypatch.setattr(_encodings, "_o200k_missing", False)
    monkeypatch.setattr(_encodings, "_load_o200k", lambda: None)


def test_the_public_api_is_pinned() -> None:
    assert compaction.tokens.__all__ == [
        "AUDIO_DEFAULT_TOKENS",
        "FILE_DEFAULT_TOKENS",
        "IMAGE_DEFAULT_TOKENS",
        "MESSAGE_OVERHEAD",
        "NAME_OVERHEAD",
        "REQUEST_OVERHEAD",
        "TOOLS_OVERHEAD",
        "EncodingChoice",
        "MessageCount",
        "TokenCache",
        "TokenCounter",
        "Tokenizer",
        "anthropic_image_tokens",
        "available_encodings",
        "encoding_for_model",
        "get_tokenizer",
        "image_size",
        "media_tokens",
        "openai_image_tokens",
    ]
    for name in compaction.tokens.__all__:
        assert hasattr(compaction.tokens, name)


def test_the_estimators_api_is_pinned() -> None:
    assert sorted(estimators.__all__) == sorted(
        [
            "BASEAGENT_IMAGE_TOKENS",
            "BASEAGENT_MESSAGE_OVERHEAD",
            "COPAW_DIVISOR",
            "ESTIMATORS",
            "LLM4S_CONVERSATION_OVERHEAD",
            "LLM4S_MESSAGE_OVERHEAD",
            "LLM4S_TOOL_CALL_OVERHEAD",
            "NANOBOT_MIN_TOKENS",
            "PICOCLAW_MEDIA_TOKENS",
            "PICOCLAW_MESSAGE_OVERHEAD_CHARS",
            "EstimatorFactory",
            "MessageEstimator",
            "baseagent_message_tokens",
            "baseagent_text_tokens",
            "codex_approx_tokens",
            "codex_message_tokens",
            "copaw_message_tokens",
            "copaw_text_tokens",
            "llm4s_conversation_tokens",
            "llm4s_message_tokens",
            "nanobot_message_tokens",
            "nanobot_payload_tokens",
            "nanobot_payloads",
            "picoclaw_message_tokens",
            "picoclaw_tooldefs_tokens",
        ]
    )
    for name in estimators.__all__:
        assert hasattr(estimators, name)
    assert all(m.name.startswith("_") for m in pkgutil.iter_modules(estimators.__path__))


ESTIMATOR_MODULES = [
    importlib.import_module(f"{estimators.__name__}.{m.name}")
    for m in pkgutil.iter_modules(estimators.__path__)
]


@pytest.mark.parametrize(
    "module",
    [compaction.tokens, _counter, _encodings, _media, _models, estimators, *ESTIMATOR_MODULES],
)
def test_the_docstring_examples_hold(module: object) -> None:
    globs = {**vars(compaction.tokens), **vars(estimators), **vars(compaction.messages.model)}
    result = doctest.testmod(module, extraglobs=globs, optionflags=doctest.ELLIPSIS)  # type: ignore[arg-type]
    assert result.failed == 0


# --- encodings ----------------------------------------------------------------------------------


def test_cl100k_counts_known_strings(cl100k: Tokenizer) -> None:
    assert cl100k.name == "cl100k_base"
    assert cl100k.encode("hello world") == [15339, 1917]
    assert cl100k.count("hello world") == 2
    assert cl100k.count("") == 0
    assert cl100k.encode("") == []


def test_o200k_loads_from_the_bpe_openai_wheel_with_the_official_hash() -> None:
    data = _encodings._o200k_data()

    assert data is not None
    assert hashlib.sha256(data).hexdigest() == _encodings.O200K_SHA256
    assert _encodings.O200K_SHA256 == (
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
    )


def test_o200k_encodes_as_tiktoken_does() -> None:
    o200k = get_tokenizer("o200k_base")

    assert o200k.name == "o200k_base"
    assert o200k.encode("hello world") == [24912, 2375]
    assert o200k.count("hello world") == 2


def test_o200k_uses_tiktokens_own_pattern_and_special_tokens(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # tiktoken's definition, without the download: the ranks are not what is compared.
    monkeypatch.setattr(tiktoken_ext.openai_public, "load_tiktoken_bpe", lambda *a, **k: {})
    official = tiktoken_ext.openai_public.o200k_base()

    assert official["pat_str"] == _encodings.O200K_PAT_STR
    assert official["special_tokens"] == _encodings.O200K_SPECIAL_TOKENS


def test_o200k_data_with_the_wrong_hash_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_encodings, "O200K_SHA256", "0" * 64)

    assert _encodings._o200k_data() is None


def test_tokenizers_are_built_once_per_process() -> None:
    assert get_tokenizer("o200k_base") is get_tokenizer("o200k_base")
    assert get_tokenizer("cl100k_base") is get_tokenizer("cl100k_base")


def test_special_tokens_in_text_count_as_plain_text(cl100k: Tokenizer) -> None:
    tokens = cl100k.encode("<|endoftext|>")

    assert 100257 not in tokens
    assert len(tokens) > 1


def test_an_unknown_encoding_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown encoding"):
        get_tokenizer("p50k_base")


def test_both_encodings_are_available_here() -> None:
    assert available_encodings() == ("cl100k_base", "o200k_base")


@pytest.mark.usefixtures("without_o200k")
def test_without_o200k_data_it_falls_back_to_cl100k_and_says_so() -> None:
    assert get_tokenizer("o200k_base").name == "cl100k_base"
    assert available_encodings() == ("cl100k_base",)
    assert encoding_for_model("gpt-4o") == EncodingChoice("cl100k_base", approximate=True)


# --- the model map ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "model",
    [
        "gpt-4o",
        "gpt-4o-mini",
        "gpt-4o-2024-08-06",
        "openai/gpt-4o",
        "chatgpt-4o-latest",
        "gpt-4.1",
        "gpt-4.1-nano-2025-04-14",
        "gpt-5",
        "gpt-5-codex",
        "GPT-5.1",
        "o1",
        "o1-preview",
        "o3-mini",
        "o4-mini-2025-04-16",
        "openrouter/openai/o3",
        "ft:gpt-4o-mini-2024-07-18:acme::abc123",
    ],
)
def test_current_openai_models_count_exactly_with_o200k(model: str) -> None:
    assert encoding_for_model(model) == EncodingChoice("o200k_base", approximate=False)


@pytest.mark.parametrize(
    "model", ["gpt-4", "gpt-4-turbo", "gpt-4-0613", "gpt-3.5-turbo", "text-embedding-3-small"]
)
def test_older_openai_models_count_exactly_with_cl100k(model: str) -> None:
    assert encoding_for_model(model) == EncodingChoice("cl100k_base", approximate=False)


@pytest.mark.parametrize(
    "model",
    [
        None,
        "",
        "claude-sonnet-4-5-20250929",
        "anthropic/claude-3-5-haiku",
        "gemini-2.5-pro",
        "qwen3-coder",
        "deepseek-chat",
        "meta-llama/llama-3.1-70b",
        "mistral-large",
        "o1x",
        "something-new",
    ],
)
def test_other_models_count_approximately_with_cl100k(model: str | None) -> None:
    assert encoding_for_model(model) == EncodingChoice("cl100k_base", approximate=True)


# --- the cache ----------------------------------------------------------------------------------


def test_the_same_text_is_encoded_once(counter: TokenCounter) -> None:
    first = counter.count_text("the same text, twice")
    encoded = counter.encoded_tokens

    second = counter.count_text("the same text, twice")

    assert first == second == encoded
    assert counter.encoded_tokens == encoded
    assert (counter.cache.hits, counter.cache.misses) == (1, 1)


def test_a_shared_cache_spares_a_second_counter(cl100k: Tokenizer) -> None:
    cache = TokenCache()
    TokenCounter(cl100k, cache=cache).count_text("shared content")
    other = TokenCounter(cl100k, cache=cache)

    other.count_text("shared content")

    assert other.encoded_tokens == 0
    assert cache.hits == 1


def test_the_cache_keys_by_encoding() -> None:
    cache = TokenCache()
    TokenCounter(get_tokenizer("cl100k_base"), cache=cache).count_text("hello world")
    o200k = TokenCounter(get_tokenizer("o200k_base"), cache=cache)

    o200k.count_text("hello world")

    assert o200k.encoded_tokens == 2
    assert len(cache) == 2


def test_the_cache_drops_the_least_recently_used() -> None:
    cache = TokenCache(maxsize=2)
    cache.put((b"a", "e"), 1)
    cache.put((b"b", "e"), 2)
    cache.get((b"a", "e"))

    cache.put((b"c", "e"), 3)

    assert (b"a", "e") in cache
    assert (b"b", "e") not in cache
    assert len(cache) == 2


def test_a_cache_needs_room() -> None:
    with pytest.raises(ValueError, match="maxsize"):
        TokenCache(maxsize=0)


def test_clearing_the_cache_resets_its_counters() -> None:
    cache = TokenCache()
    cache.put((b"a", "e"), 1)
    cache.get((b"a", "e"))
    cache.get((b"b", "e"))

    cache.clear()

    assert (len(cache), cache.hits, cache.misses) == (0, 0, 0)


# --- priming: a cold context counted on every core -------------------------------------------


def _context(n: int) -> Context:
    """A context whose texts are all distinct: every kind of part the counter encodes."""
    messages = []
    for k in range(n):
        messages.append(user(f"request {k}: " + "read the file and explain it " * (k % 7 + 1)))
        call = ToolCallPart(f"c{k}", "read_file", f'{{"path": "src/m{k}.py"}}')
        messages.append(
            Message(
                role="assistant",
                parts=(ReasoningPart(f"thinking {k}"), TextPart(f"reading {k}"), call),
            )
        )
        out = ToolResultPart(f"c{k}", (TextPart(f"def f{k}():\n    return {k}\n" * (k % 30)),))
        messages.append(Message(role="tool", parts=(out,)))
    tools = (ToolDefinition("read_file", "Read a file.", {"type": "object"}),)
    return Context(
        format="anthropic-messages",
        messages=tuple(messages),
        system=(TextPart("You are a coding agent."),),
        tools=tools,
    )


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_priming_counts_what_counting_one_by_one_counts(
    cl100k: Tokenizer, monkeypatch: pytest.MonkeyPatch, threads: int
) -> None:
    monkeypatch.setattr(_counter, "PRIME_PARALLEL_CHARS", 0)  # threads even on a small context
    context = _context(60)
    alone = TokenCounter(cl100k).scoped()
    expected = [alone.count_message(m) for m in context.messages]
    primed = TokenCounter(cl100k).scoped()

    encoded = primed.prime([t for m in context.messages for t in _texts(m)], threads=threads)

    assert encoded == len({t for m in context.messages for t in _texts(m) if t})
    assert primed.encoded_tokens == alone.encoded_tokens
    spent = primed.encoded_tokens
    assert [primed.count_message(m) for m in context.messages] == expected
    assert primed.encoded_tokens == spent  # nothing encoded twice


def _texts(message: Message) -> list[str]:
    out: list[str] = []
    for part in message.parts:
        _counter._texts_of(part, out)
    return out


def test_priming_a_context_leaves_nothing_to_encode(
    cl100k: Tokenizer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_counter, "PRIME_PARALLEL_CHARS", 0)
    context = _context(40)
    scope = TokenCounter(cl100k).scoped()

    scope.prime_context(context)
    spent = scope.encoded_tokens
    scope.count_system(context.system)
    scope.count_tools(context.tools)
    for message in context.messages:
        scope.count_message(message)

    assert spent > 0
    assert scope.encoded_tokens == spent
    assert scope.prime_context(context) == 0  # a second priming finds it all counted


def test_priming_fills_the_shared_cache_for_the_next_counter(cl100k: Tokenizer) -> None:
    cache = TokenCache()
    TokenCounter(cl100k, cache=cache).prime(["one text", "another text"], threads=2)
    later = TokenCounter(cl100k, cache=cache)

    later.count_text("one text")

    assert later.encoded_tokens == 0


def test_a_failure_in_a_priming_thread_reaches_the_caller(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_counter, "PRIME_PARALLEL_CHARS", 0)

    class Failing:
        name = "failing"

        def count(self, text: str) -> int:
            if text == "bad":
                raise RuntimeError("cannot encode")
            return 1

        def encode(self, text: str) -> list[int]:
            return [1]

    counter = TokenCounter(Failing())  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="cannot encode"):
        counter.prime(["good", "bad", "fine", "ok"], threads=4)


def test_a_scoped_counter_counts_a_repeated_text_once(counter: TokenCounter) -> None:
    scope = counter.scoped()
    first = scope.count_text("the same text, " * 50)
    queries = counter.cache.hits + counter.cache.misses

    again = scope.count_text("".join(["the same text, "] * 50))  # equal, another object

    assert again == first == counter.tokenizer.count("the same text, " * 50)
    assert counter.cache.hits + counter.cache.misses == queries  # no second hash or query
    assert scope.encoded_tokens == first


def test_a_scoped_counter_counts_a_message_object_once(counter: TokenCounter) -> None:
    def message() -> Message:
        call = ToolCallPart("c1", "read", '{"path": "src/app.py"}')
        return Message("assistant", (TextPart("reading"), call), name="bot")

    scope = counter.scoped()
    first = message()
    count = scope.count_message(first)

    assert scope.count_message(first) is count
    assert scope.count_message(message()) == count  # an equal object, counted again
    assert count == counter.count_message(message())


def test_a_scope_keeps_the_class_and_shares_the_cache(cl100k: Tokenizer) -> None:
    class WithOverhead(TokenCounter):
        REQUEST_OVERHEAD = REQUEST_OVERHEAD

    cache = TokenCache()
    parent = WithOverhead(cl100k, cache=cache)
    scope = parent.scoped()

    scope.count_text("shared content")
    parent.count_text("shared content")

    assert type(scope) is WithOverhead
    assert scope.tokenizer is parent.tokenizer
    assert scope.cache is cache
    assert (scope.encoded_tokens, parent.encoded_tokens) == (2, 0)
    assert (cache.hits, cache.misses) == (1, 1)


@given(st.lists(st.text(max_size=40), max_size=12))
def test_scoped_counts_equal_unscoped_ones(texts: list[str]) -> None:
    tokenizer = get_tokenizer("cl100k_base")
    scope = TokenCounter(tokenizer).scoped()
    plain = TokenCounter(tokenizer)

    for text in [*texts, *texts]:
        assert scope.count_text(text) == plain.count_text(text) == tokenizer.count(text)
    for text in texts:
        assert scope.count_message(user(text)) == plain.count_message(user(text))


@given(st.text())
def test_cached_counts_equal_the_tokenizers(text: str) -> None:
    tokenizer = get_tokenizer("cl100k_base")
    counter = TokenCounter(tokenizer)

    assert counter.count_text(text) == tokenizer.count(text)
    encoded = counter.encoded_tokens
    assert counter.count_text(text) == tokenizer.count(text)
    assert counter.encoded_tokens == encoded


@given(st.lists(st.integers(min_value=0, max_value=50)), st.integers(min_value=1, max_value=8))
def test_the_cache_never_outgrows_its_size(keys: list[int], maxsize: int) -> None:
    cache = TokenCache(maxsize=maxsize)
    for key in keys:
        cache.put((bytes([key]), "e"), key)

    assert len(cache) <= maxsize


# --- counting messages --------------------------------------------------------------------------


def test_the_documented_overheads() -> None:
    assert (MESSAGE_OVERHEAD, REQUEST_OVERHEAD, TOOLS_OVERHEAD) == (3, 3, 9)


def test_a_message_counts_each_part_and_its_overhead(counter: TokenCounter) -> None:
    message = Message(role="user", parts=(TextPart("hello world"), TextPart("hello world")))

    count = counter.count_message(message)

    assert count == MessageCount(parts=(2, 2), overhead=3)
    assert count.total == 7


def test_a_named_message_costs_one_more(counter: TokenCounter) -> None:
    message = Message(role="user", parts=(TextPart("hello world"),), name="alice")

    assert counter.count_message(message).overhead == 4


def test_an_empty_message_costs_its_overhead(counter: TokenCounter) -> None:
    assert counter.count_message(Message(role="assistant", parts=())).total == 3


def test_a_tool_call_counts_its_name_and_arguments(counter: TokenCounter) -> None:
    part = ToolCallPart(id="call_1", name="read_file", arguments='{"path": "a.py"}')

    expected = counter.count_text("read_file") + counter.count_text('{"path": "a.py"}')
    assert counter.count_part(part) == expected


def test_a_tool_result_counts_its_parts(counter: TokenCounter) -> None:
    result = ToolResultPart(
        tool_call_id="call_1",
        content=(TextPart("hello world"), MediaPart(media="image", width=512, height=512)),
    )

    assert counter.count_part(result) == 2 + 255


def test_reasoning_counts_its_text(counter: TokenCounter) -> None:
    assert counter.count_part(ReasoningPart(text="hello world", signature="sig")) == 2


def test_redacted_reasoning_counts_a_quarter_of_its_data(counter: TokenCounter) -> None:
    part = ReasoningPart(text="", redacted=True, data="x" * 401)

    assert counter.count_part(part) == 100
    assert counter.encoded_tokens == 0


def test_media_is_estimated_never_encoded(counter: TokenCounter) -> None:
    part = MediaPart(media="image", media_type="image/png", data="QUJD" * 10_000)

    assert counter.count_part(part) == 1_000
    assert counter.encoded_tokens == 0


def test_a_system_prompt_counts_as_one_system_message(counter: TokenCounter) -> None:
    assert counter.count_system([TextPart("hello world"), TextPart("hello world")]) == 7
    assert counter.count_system([]) == 0


def test_tools_count_their_json_and_one_wrapper(counter: TokenCounter) -> None:
    tool = ToolDefinition(
        name="read_file",
        description="Read a file",
        parameters={"type": "object", "properties": {"path": {"type": "string"}}},
    )
    text = (
        '{"name": "read_file", "description": "Read a file", "parameters": '
        '{"type": "object", "properties": {"path": {"type": "string"}}}}'
    )

    assert counter.count_tools([tool]) == counter.count_text(text) + TOOLS_OVERHEAD
    assert counter.count_tools([tool, tool]) == 2 * counter.count_text(text) + TOOLS_OVERHEAD
    assert counter.count_tools([]) == 0


def test_counting_an_unknown_part_fails(counter: TokenCounter) -> None:
    with pytest.raises(TypeError, match="not a message part"):
        counter.count_part("text")  # type: ignore[arg-type]


@given(st.lists(st.text(max_size=40), max_size=5))
def test_a_message_total_is_its_parts_plus_overhead(texts: list[str]) -> None:
    counter = TokenCounter(get_tokenizer("cl100k_base"))
    message = Message(role="user", parts=tuple(TextPart(t) for t in texts))

    count = counter.count_message(message)

    assert count.total == sum(get_tokenizer("cl100k_base").count(t) for t in texts) + 3
    assert len(count.parts) == len(texts)
