"""A call the proxy refuses before anything leaves (no key, over the key's rate, over its calls in
flight) is answered in the provider's own error shape, with the header that tells the agent's SDK
whether or when to ask again: the Anthropic SDK and the OpenAI SDK each report it as their
provider's own error. Through Django's URLs (the test client): no upstream is ever asked."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from ctxweb.accounts.services import api_key_create, project_create

pytestmark = pytest.mark.django_db(transaction=True)

PATHS = {"openai": "/proxy/openai/v1/chat/completions", "anthropic": "/proxy/anthropic/v1/messages"}
BODY = {"model": "any", "messages": [{"role": "user", "content": "hi"}]}
NO_KEY = (
    "ctxweb: send your ctxweb API key in the X-Ctxweb-Key header (the provider's key stays in its"
    " usual header)."
)


def shaped(provider: str, kind: str, message: str) -> dict[str, Any]:
    """The provider's error body (Anthropic's, or OpenAI's with ``code`` set to its type)."""
    if provider == "anthropic":
        return {"type": "error", "error": {"type": kind, "message": message}}
    return {"error": {"message": message, "type": kind, "param": None, "code": kind}}


@pytest.fixture
def nowhere(settings: Any) -> None:
    """An upstream that cannot be reached: a refused call never gets that far."""
    settings.CTXWEB_UPSTREAM_OPENAI = "http://127.0.0.1:9/v1"
    settings.CTXWEB_UPSTREAM_ANTHROPIC = "http://127.0.0.1:9/v1"


@pytest.mark.parametrize(
    ("provider", "kind"),
    [("openai", "invalid_api_key"), ("anthropic", "authentication_error")],
)
def test_a_call_without_a_key_is_a_401_that_tells_the_sdk_not_to_retry(
    nowhere: None, provider: str, kind: str
) -> None:
    refused = Client().post(PATHS[provider], BODY, content_type="application/json")
    assert refused.status_code == 401
    assert refused["x-should-retry"] == "false"
    assert refused.json() == shaped(provider, kind, NO_KEY)


@pytest.mark.parametrize(
    ("provider", "kind"),
    [("openai", "rate_limit_exceeded"), ("anthropic", "rate_limit_error")],
)
@pytest.mark.usefixtures("clear_of_a_minutes_end")
def test_a_key_over_its_calls_in_flight_then_over_its_rate_is_a_429_with_retry_after(
    nowhere: None, settings: Any, provider: str, kind: str
) -> None:
    settings.CTXWEB_RATE_LIMIT = "1/min"
    settings.CTXWEB_PROXY_KEY_CONCURRENCY = 0  # within its rate, the first call finds no room
    _, raw = api_key_create(project=project_create(name=f"refused-{provider}"))
    client = Client(headers={"X-Ctxweb-Key": raw})
    crowded = client.post(PATHS[provider], BODY, content_type="application/json")
    assert crowded.status_code == 429
    assert crowded["retry-after"] == "1"
    message = (
        "ctxweb: this key has 0 calls in flight already (CTXWEB_PROXY_KEY_CONCURRENCY); retry"
        " when one ends."
    )
    assert crowded.json() == shaped(provider, kind, message)
    limited = client.post(PATHS[provider], BODY, content_type="application/json")
    assert limited.status_code == 429
    wait = limited["retry-after"]
    assert wait.isdigit()
    assert 1 <= int(wait) <= 61
    message = f"ctxweb: over this key's rate limit; retry in {wait}s."
    assert limited.json() == shaped(provider, kind, message)


@pytest.mark.parametrize(
    ("provider", "kind"),
    [("openai", "rate_limit_exceeded"), ("anthropic", "rate_limit_error")],
)
def test_a_key_over_its_bytes_a_minute_is_a_429_until_its_budget_refills(
    nowhere: None, settings: Any, provider: str, kind: str
) -> None:
    settings.CTXWEB_PROXY_KEY_MB_PER_MINUTE = 1
    _, raw = api_key_create(project=project_create(name=f"budget-{provider}"))
    _, other = api_key_create(project=project_create(name=f"budget-other-{provider}"))
    big = {**BODY, "messages": [{"role": "user", "content": "x" * (3 * 1024 * 1024 // 2)}]}
    client = Client(headers={"X-Ctxweb-Key": raw})
    # a key within its budget is never refused for the size of its call: it goes (to an
    # upstream that cannot be reached), and the budget is 30 s in debt
    sent = client.post(PATHS[provider], big, content_type="application/json")
    assert sent.status_code == 502, sent.content
    over = client.post(PATHS[provider], BODY, content_type="application/json")
    assert over.status_code == 429
    wait = over["retry-after"]
    assert 25 <= int(wait) <= 31  # 1.5 MB at 1 MB a minute, less the minute's worth it holds
    message = (
        "ctxweb: this key sent more than 1 MB of requests in a minute"
        f" (CTXWEB_PROXY_KEY_MB_PER_MINUTE); retry in {wait}s."
    )
    assert over.json() == shaped(provider, kind, message)
    # another key's budget is its own; 0 turns the limit off
    assert (
        Client(headers={"X-Ctxweb-Key": other})
        .post(PATHS[provider], BODY, content_type="application/json")
        .status_code
        == 502
    )
    settings.CTXWEB_PROXY_KEY_MB_PER_MINUTE = 0
    assert client.post(PATHS[provider], big, content_type="application/json").status_code == 502
