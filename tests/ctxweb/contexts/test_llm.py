"""The LLM summarizers against a real HTTP server on loopback speaking each provider's API, so the
real ``openai`` and ``anthropic`` SDKs are exercised. No database."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from compaction.messages.model import Message, TextPart, ToolCallPart, ToolResultPart
from compaction.strategies import get_strategy
from compaction.strategies.copaw import COMPACT_PROMPT
from compaction.strategies.llm4s import DIGEST_PROMPT, HISTORY_SUMMARY
from compaction.summarizers import FactSummarizer, SummarizerError
from ctxweb.contexts.services.llm import (
    AnthropicSummarizer,
    OpenAISummarizer,
    render_for_summary,
    summarizer_from_settings,
)


@dataclass
class Provider:
    """What the fake provider answers and what it received."""

    status: int = 200
    reply: str = "## Goal\nFix the bug in src/app.py"
    delay: float = 0.0
    requests: list[tuple[str, dict[str, Any], dict[str, str]]] = field(default_factory=list)


def _openai_body(reply: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "local-model",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": reply},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def _anthropic_body(reply: str) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": [{"type": "text", "text": reply}] if reply else [],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }


def _handler(provider: Provider) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            provider.requests.append(
                (self.path, body, {k.lower(): v for k, v in self.headers.items()})
            )
            if provider.delay:
                time.sleep(provider.delay)
            if provider.status != 200:
                payload: dict[str, Any] = {"error": {"type": "server_error", "message": "boom"}}
            elif self.path == "/v1/chat/completions":
                payload = _openai_body(provider.reply)
            elif self.path == "/v1/messages":
                payload = _anthropic_body(provider.reply)
            else:
                self.send_error(404)
                return
            raw = json.dumps(payload).encode()
            try:
                self.send_response(provider.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client timed out and left

    return Handler


@pytest.fixture
def provider() -> Iterator[tuple[Provider, str]]:
    state = Provider()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


MESSAGES = [
    Message("user", (TextPart("Fix the failing test in tests/test_api.py"),)),
    Message("assistant", (ToolCallPart("c1", "bash", '{"command": "pytest -q"}'),)),
    Message("tool", (ToolResultPart("c1", (TextPart("FAILED tests/test_api.py::test_id"),)),)),
]


def _openai(base: str, **kwargs: Any) -> OpenAISummarizer:
    return OpenAISummarizer(
        model="local-model", api_key="sk-test", base_url=f"{base}/v1", max_retries=0, **kwargs
    )


def _anthropic(base: str, **kwargs: Any) -> AnthropicSummarizer:
    return AnthropicSummarizer(
        model="claude-test", api_key="ak-test", base_url=base, max_retries=0, **kwargs
    )


def test_openai_sends_the_seed_prompt_and_the_rendered_messages(provider):
    state, base = provider
    summary = _openai(base).summarize(MESSAGES, previous=None, prompt=COMPACT_PROMPT)
    assert summary == "## Goal\nFix the bug in src/app.py"
    ((path, body, headers),) = state.requests
    assert path == "/v1/chat/completions"
    assert body["model"] == "local-model"
    assert headers["authorization"] == "Bearer sk-test"
    assert body["messages"][0] == {"role": "system", "content": COMPACT_PROMPT}
    user = body["messages"][1]
    assert user["role"] == "user"
    assert user["content"] == render_for_summary(MESSAGES)
    assert "<tool_use>bash params=" in user["content"]
    assert (
        "<tool_result>bash output=FAILED tests/test_api.py::test_id</tool_result>"
        in user["content"]
    )


def test_anthropic_sends_the_seed_prompt_and_the_rendered_messages(provider):
    state, base = provider
    state.reply = "short digest"
    summary = _anthropic(base).summarize(MESSAGES, previous="old summary", prompt=COMPACT_PROMPT)
    assert summary == "short digest"
    ((path, body, headers),) = state.requests
    assert path == "/v1/messages"
    assert "ak-test" in (headers.get("x-api-key"), headers.get("authorization", "")[7:])
    assert body["model"] == "claude-test"
    assert body["system"] == COMPACT_PROMPT
    assert body["max_tokens"] == 4096
    (user,) = body["messages"]
    assert user["role"] == "user"
    assert user["content"].startswith("<previous-summary>\nold summary\n</previous-summary>")
    assert "user:\n<text>Fix the failing test in tests/test_api.py</text>" in user["content"]


def test_a_strategy_uses_the_llm_with_its_own_prompt(provider):
    state, base = provider
    state.reply = "IDs kept"
    wordy = [
        Message(role, (TextPart(f"{role} {i}: the id: R{i} must work."),))  # type: ignore[arg-type]
        for i in range(30)
        for role in ("user", "assistant")
    ]
    from compaction.messages.model import Context
    from compaction.tokens import TokenCounter, get_tokenizer

    plan = get_strategy("llm4s-pipeline").plan(
        Context("openai-chat", tuple(wordy)),
        {"budget": 150, "summary_token_target": 20},
        counter=TokenCounter(get_tokenizer("cl100k_base")),
        summarizer=_openai(base),
    )
    ((_, body, _),) = state.requests
    assert body["messages"][0]["content"] == DIGEST_PROMPT
    assert body["messages"][1]["content"].startswith("Block1: UserAssistantPair")
    assert plan.context.messages[-1].text == f"{HISTORY_SUMMARY}\nIDs kept"


@pytest.mark.parametrize("make", [_openai, _anthropic])
def test_http_500_raises_a_summarizer_error_without_retrying(provider, make):
    state, base = provider
    state.status = 500
    with pytest.raises(SummarizerError, match="HTTP 500"):
        make(base).summarize(MESSAGES, previous=None, prompt="p")
    assert len(state.requests) == 1


@pytest.mark.parametrize("make", [_openai, _anthropic])
def test_a_timeout_raises_a_summarizer_error(provider, make):
    state, base = provider
    state.delay = 1.0
    started = time.monotonic()
    with pytest.raises(SummarizerError, match="timed out"):
        make(base, timeout=0.2).summarize(MESSAGES, previous=None, prompt="p")
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("make", [_openai, _anthropic])
def test_an_empty_reply_raises_a_summarizer_error(provider, make):
    state, base = provider
    state.reply = "  "
    with pytest.raises(SummarizerError, match="empty"):
        make(base).summarize(MESSAGES, previous=None, prompt="p")


def test_an_unreachable_server_raises_a_summarizer_error():
    summarizer = OpenAISummarizer(
        model="m", api_key="k", base_url="http://127.0.0.1:9/v1", max_retries=0, timeout=2
    )
    with pytest.raises(SummarizerError, match="openai"):
        summarizer.summarize(MESSAGES, previous=None, prompt="p")


def test_a_single_user_message_is_sent_as_its_text():
    assert render_for_summary([Message("user", (TextPart("Block1: x"),))]) == "Block1: x"


def test_settings_choose_the_summarizer(settings, provider):
    _, base = provider
    settings.CTXWEB_LLM_PROVIDER = ""
    assert isinstance(summarizer_from_settings(), FactSummarizer)
    settings.CTXWEB_LLM_PROVIDER = "openai"
    settings.CTXWEB_LLM_BASE_URL = f"{base}/v1"
    settings.CTXWEB_LLM_MODEL = "local-model"
    settings.CTXWEB_LLM_API_KEY = "sk"
    chosen = summarizer_from_settings()
    assert isinstance(chosen, OpenAISummarizer)
    assert chosen.model == "local-model"
    assert str(chosen.client.base_url).rstrip("/") == f"{base}/v1"
    settings.CTXWEB_LLM_PROVIDER = "Anthropic"
    settings.CTXWEB_LLM_BASE_URL = base
    assert isinstance(summarizer_from_settings(), AnthropicSummarizer)
    settings.CTXWEB_LLM_PROVIDER = "gemini"
    from django.core.exceptions import ImproperlyConfigured

    with pytest.raises(ImproperlyConfigured):
        summarizer_from_settings()
