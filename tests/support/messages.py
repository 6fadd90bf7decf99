"""Message builders for the strategy tests (OpenAI Chat shapes in the normalized model), the
cl100k counter they count with, generated contexts and each strategy's parameters for them."""

from __future__ import annotations

from hypothesis import strategies as st

from compaction.messages.model import (
    Context,
    Message,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from compaction.tokens import REQUEST_OVERHEAD, TokenCounter, get_tokenizer


class Counter(TokenCounter):
    """The cl100k counter with the request overhead :mod:`compaction.regions` reads from it."""

    REQUEST_OVERHEAD = REQUEST_OVERHEAD


COUNTER = Counter(get_tokenizer("cl100k_base"))


def sys(text: str) -> Message:
    return Message("system", (TextPart(text),))


def u(text: str) -> Message:
    return Message("user", (TextPart(text),))


def a(text: str) -> Message:
    return Message("assistant", (TextPart(text),))


def atc(
    *ids: str, text: str = "", name: str | None = None, args: str = '{"key":"value"}'
) -> Message:
    parts: list[TextPart | ToolCallPart] = [TextPart(text)] if text else []
    parts += [ToolCallPart(i, name or f"tool_{i}", args) for i in ids]
    return Message("assistant", tuple(parts))


def t(call_id: str, text: str = "result") -> Message:
    return Message("tool", (ToolResultPart(call_id, (TextPart(text),)),))


def ctx(
    *messages: Message, fmt: str = "openai-chat", max_output_tokens: int | None = None
) -> Context:
    return Context(fmt, tuple(messages), max_output_tokens=max_output_tokens)  # type: ignore[arg-type]


# --- generated contexts, and parameters each strategy acts on them with -------------------------

_words = st.text(alphabet="abc xyz/._-\n0123456789É", min_size=0, max_size=400)


@st.composite
def contexts(draw: st.DrawFn) -> Context:
    messages: list[Message] = [sys(draw(_words))] if draw(st.booleans()) else []
    counter = 0
    for _ in range(draw(st.integers(0, 8))):
        messages.append(u(draw(_words)))
        for _ in range(draw(st.integers(0, 3))):
            ids = [f"c{counter + k}" for k in range(draw(st.integers(1, 2)))]
            counter += len(ids)
            messages.append(atc(*ids))
            size = draw(st.sampled_from([10, 3000, 12_000, 50_000]))
            messages.extend(t(i, draw(_words) + "x" * size) for i in ids)
        if draw(st.booleans()):
            messages.append(a(draw(_words)))
    return Context("openai-chat", tuple(messages))


PARAMS = {
    "baseagent-prune": {"protect_tokens": 2000, "minimum_savings": 100},
    "baseagent-compact": {"context_limit": 20_000, "output_reserve": 1000},
    "opencode-prune": {"protect_tokens": 2000, "minimum_savings": 100},
    "picoclaw-summarize": {"context_window": 20_000, "message_threshold": 4},
    "picoclaw-trim": {"context_window": 20_000, "max_tokens": 1000},
    "llm4s-pipeline": {"budget": 3000},
    "nanobot-trim": {"budget": 500, "estimator": "fallback"},
    "copaw-compact": {"max_input_length": 20_000},
    "anthropic-clear-tool-uses": {"trigger": 1000, "keep": 1},
    "ctxweb-auto": {"target_tokens": 3000},
}
