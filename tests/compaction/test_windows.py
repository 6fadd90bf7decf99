"""The window a model call selects, and whether it was guessed (compaction.windows)."""

from __future__ import annotations

import pytest

from compaction.windows import (
    DEFAULT_CONTEXT_WINDOW,
    WindowGuess,
    context_window_for_call,
    context_window_for_model,
)

BETA_1M = "context-1m-2025-08-07"


@pytest.mark.parametrize(
    "model",
    [
        "claude-sonnet-4-20250514",
        "claude-sonnet-4-5-20250929",
        "claude-sonnet-4-6",
        "claude-opus-4-6",
        "anthropic/claude-sonnet-4-5",
    ],
)
def test_it_takes_the_1m_window_from_the_anthropic_beta_header(model: str) -> None:
    assert context_window_for_call(model, {"anthropic-beta": BETA_1M}) == WindowGuess(
        1_000_000, "request"
    )


def test_it_finds_the_beta_among_several_values_and_repeated_headers() -> None:
    headers = [
        ("Anthropic-Beta", "interleaved-thinking-2025-05-14"),
        ("ANTHROPIC-BETA", "fine-grained-tool-streaming-2025-05-14, context-1m-2025-08-07"),
    ]
    assert context_window_for_call("claude-sonnet-4-5-20250929", headers).tokens == 1_000_000


def test_it_ignores_the_beta_on_a_model_without_a_1m_window() -> None:
    headers = {"anthropic-beta": BETA_1M}
    assert context_window_for_call("claude-haiku-4-5-20251001", headers) == WindowGuess(
        200_000, "model"
    )
    assert context_window_for_call("claude-opus-4-1-20250805", headers) == WindowGuess(
        200_000, "model"
    )


def test_it_ignores_other_betas_and_other_headers() -> None:
    assert context_window_for_call(
        "claude-sonnet-4-5-20250929",
        {"anthropic-beta": "prompt-caching-2024-07-31", "x-context": BETA_1M},
    ) == WindowGuess(200_000, "model")


@pytest.mark.parametrize("model", ["claude-sonnet-4-5[1m]", "Claude-Opus-4-6 [1M]", "sonnet[1m]"])
def test_it_takes_the_1m_window_from_the_model_names_suffix(model: str) -> None:
    assert context_window_for_call(model, {}) == WindowGuess(1_000_000, "request")
    assert context_window_for_model(model) == 1_000_000


def test_a_stated_window_wins_over_header_and_table() -> None:
    assert context_window_for_call(
        "claude-sonnet-4-5", {"anthropic-beta": BETA_1M}, stated=150_000
    ) == WindowGuess(150_000, "request")


@pytest.mark.parametrize(
    ("model", "tokens"),
    [
        ("gpt-4.1", 1_047_576),
        ("gpt-4.1-mini-2025-04-14", 1_047_576),
        ("gpt-5", 400_000),
        ("gpt-5-codex", 400_000),
        ("gpt-5.1-codex", 400_000),
        ("gpt-5.1-codex-max", 400_000),
        ("gpt-5-chat-latest", 128_000),
        ("gpt-5.5", 1_050_000),
        ("gemini-2.5-pro", 1_048_576),
        ("claude-sonnet-4-5-20250929", 200_000),
        ("claude-sonnet-5", 1_000_000),
        ("openai/gpt-4o-mini", 128_000),
    ],
)
def test_a_known_model_without_a_statement_is_guessed_from_the_table(
    model: str, tokens: int
) -> None:
    guess = context_window_for_call(model, {"authorization": "Bearer x"})
    assert guess == WindowGuess(tokens, "model")
    assert guess.guessed


@pytest.mark.parametrize("model", [None, "", "brand-new-model"])
def test_an_unknown_model_gets_the_default_window(model: str | None) -> None:
    guess = context_window_for_call(model)
    assert guess == WindowGuess(DEFAULT_CONTEXT_WINDOW, "default")
    assert guess.guessed


def test_a_window_the_call_states_is_not_guessed() -> None:
    assert not context_window_for_call("claude-opus-4-6", {"anthropic-beta": BETA_1M}).guessed
