"""LLM summarizers: the :class:`compaction.summarizers.Summarizer` protocol over a real provider.

They live outside ``compaction`` because they do network I/O. Each sends one request: the seed's
own prompt as the system instruction, and the messages to summarize rendered as ReMe's
``format_msgs_to_str`` renders them (a single plain user message, such as LLM4S's digest body,
is sent as its text), with the previous summary first when there is one. Any HTTP error, timeout
or empty reply raises :class:`~compaction.summarizers.SummarizerError`.

:func:`summarizer_from_settings` picks the configured one (``CTXWEB_LLM_PROVIDER`` "openai" or
"anthropic", ``CTXWEB_LLM_BASE_URL``, ``CTXWEB_LLM_MODEL``, ``CTXWEB_LLM_API_KEY``), or the
offline :class:`~compaction.summarizers.FactSummarizer` when no provider is set.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence

from django.conf import settings

from compaction.messages.model import Message, TextPart
from compaction.strategies.copaw import format_msgs_to_str
from compaction.summarizers import FactSummarizer, Summarizer, SummarizerError

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_TIMEOUT",
    "AnthropicSummarizer",
    "OpenAISummarizer",
    "render_for_summary",
    "summarizer_from_settings",
]

DEFAULT_TIMEOUT = 120.0
DEFAULT_MAX_TOKENS = 4096
DEFAULT_ANTHROPIC_MODEL = "claude-sonnet-4-5"
DEFAULT_OPENAI_MODEL = "gpt-4o-mini"


def render_for_summary(messages: Sequence[Message], previous: str | None = None) -> str:
    """The user content sent to the model: the previous summary (if any) then the messages.

    Example:
        >>> render_for_summary([Message("user", (TextPart("hi"),))])
        'hi'
        >>> render_for_summary([Message("assistant", (TextPart("done"),))], previous="old")
        '<previous-summary>\\nold\\n</previous-summary>\\n\\nassistant:\\n<text>done</text>'
    """
    only = messages[0] if len(messages) == 1 else None
    if (
        only is not None
        and only.role == "user"
        and all(isinstance(p, TextPart) for p in only.parts)
    ):
        body = only.text
    else:
        body = format_msgs_to_str(messages)
    if previous:
        return f"<previous-summary>\n{previous}\n</previous-summary>\n\n{body}"
    return body


class _SdkSummarizer:
    """What both SDK summarizers share: the client's settings, one request, the SDK's errors
    mapped to :class:`SummarizerError`, and an empty reply refused."""

    provider = ""

    def __init__(
        self,
        *,
        model: str,
        api_key: str,
        base_url: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        max_retries: int = 1,
        max_tokens: int = DEFAULT_MAX_TOKENS,
    ) -> None:
        self.model = model
        self.max_tokens = max_tokens
        # The SDKs take seconds to import: only a configured summarizer pays for one.
        self.sdk = importlib.import_module(self.provider)
        client_class = self.sdk.OpenAI if self.provider == "openai" else self.sdk.Anthropic
        self.client = client_class(
            api_key=api_key or "unused",
            base_url=base_url or None,
            timeout=timeout,
            max_retries=max_retries,
        )

    def summarize(self, messages: Sequence[Message], *, previous: str | None, prompt: str) -> str:
        """One request with ``prompt`` as the system prompt and the rendered messages as user."""
        try:
            text = self._request(prompt, render_for_summary(messages, previous))
        except self.sdk.APITimeoutError as error:
            raise SummarizerError(f"{self.provider}: the request timed out ({error})") from error
        except self.sdk.APIStatusError as error:
            raise SummarizerError(
                f"{self.provider}: HTTP {error.status_code}: {_short(error.message)}"
            ) from error
        except self.sdk.APIError as error:
            raise SummarizerError(f"{self.provider}: {_short(str(error))}") from error
        if not text.strip():
            raise SummarizerError(f"{self.provider}: the model returned an empty summary")
        return text.strip()

    def _request(self, prompt: str, content: str) -> str:
        raise NotImplementedError


class OpenAISummarizer(_SdkSummarizer):
    """Summarizes through an OpenAI-compatible ``chat.completions`` endpoint (``base_url`` lets
    local servers such as vLLM, llama.cpp or Ollama answer).

    Args:
        model: the model name sent.
        api_key: the key; local servers accept any non-empty string.
        base_url: e.g. ``http://127.0.0.1:8080/v1``; the SDK's default when None.
        timeout: seconds for the whole request.
        max_retries: the SDK's retries on connection errors, 429 and 5xx.
        max_tokens: the summary's output cap.

    Example:
        >>> OpenAISummarizer(model="m", api_key="k", base_url="http://127.0.0.1:9/v1").model
        'm'
    """

    provider = "openai"

    def _request(self, prompt: str, content: str) -> str:
        response = self.client.chat.completions.create(
            model=self.model,
            max_tokens=self.max_tokens,
            messages=[
                {"role": "system", "content": prompt},
                {"role": "user", "content": content},
            ],
        )
        choices = response.choices or []
        return str((choices[0].message.content or "") if choices else "")


class AnthropicSummarizer(_SdkSummarizer):
    """Summarizes through Anthropic's ``messages.create``.

    Args:
        model: the model name sent.
        api_key: the key.
        base_url: another endpoint speaking the Messages API; the SDK's default when None.
        timeout: seconds for the whole request.
        max_retries: the SDK's retries on connection errors, 429 and 5xx.
        max_tokens: the summary's output cap (required by the API).
    """

    provider = "anthropic"

    def _request(self, prompt: str, content: str) -> str:
        response = self.client.messages.create(
            model=self.model,
            max_tokens=self.max_tokens,
            system=prompt,
            messages=[{"role": "user", "content": content}],
        )
        return "".join(getattr(block, "text", "") for block in response.content or [])


def _short(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def summarizer_from_settings() -> Summarizer:
    """The summarizer the settings configure: :class:`FactSummarizer` when
    ``CTXWEB_LLM_PROVIDER`` is empty, else the OpenAI or Anthropic one.

    Raises :class:`~django.core.exceptions.ImproperlyConfigured` for an unknown provider.
    """
    from django.core.exceptions import ImproperlyConfigured

    provider = (getattr(settings, "CTXWEB_LLM_PROVIDER", "") or "").strip().lower()
    base_url = getattr(settings, "CTXWEB_LLM_BASE_URL", "") or None
    model = getattr(settings, "CTXWEB_LLM_MODEL", "") or ""
    api_key = getattr(settings, "CTXWEB_LLM_API_KEY", "") or ""
    if not provider:
        return FactSummarizer()
    if provider == "openai":
        return OpenAISummarizer(
            model=model or DEFAULT_OPENAI_MODEL, api_key=api_key, base_url=base_url
        )
    if provider == "anthropic":
        return AnthropicSummarizer(
            model=model or DEFAULT_ANTHROPIC_MODEL, api_key=api_key, base_url=base_url
        )
    raise ImproperlyConfigured(
        f"CTXWEB_LLM_PROVIDER must be 'openai', 'anthropic' or empty, not {provider!r}"
    )
