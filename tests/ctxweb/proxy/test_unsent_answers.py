"""An answer that never went back (the caller's connection broke before the answer's first byte,
or the server cancelled the request): the provider's answer is closed and the call recorded all
the same, its turn saying the answer was cut, as for a caller that left mid-answer. Through the
real ASGI application in process, against a loopback stand-in for the provider."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from asgiref.sync import async_to_sync

from ctxweb.accounts.services import api_key_create, project_create
from ctxweb.asgi import application
from ctxweb.contexts.models import PendingCall, Turn
from ctxweb.proxy.relay import clients_close, recording_idle
from tests.support.asgi import proxied_chat
from tests.support.providers import StandIn

BODY = {"model": "gpt-4o", "messages": [{"role": "user", "content": "Build it."}]}


class Broke(OSError):
    """The caller's connection broke as the answer's headers went back."""


def call_that_breaks(raw_key: str, session: str, *, stream: bool) -> list[dict[str, Any]]:
    """Relay a call whose server cannot send its answer's start; what was sent."""
    request = proxied_chat(raw_key, session)
    body = json.dumps({**BODY, "stream": stream}).encode()
    sent: list[dict[str, Any]] = []
    pending = [body]

    async def receive() -> dict[str, Any]:
        if pending:
            return {"type": "http.request", "body": pending.pop(), "more_body": False}
        await asyncio.sleep(3600)
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if message["type"] == "http.response.start":
            raise Broke("the caller's connection broke")

    async def served() -> None:
        try:
            with pytest.raises(Broke):
                await application(request, receive, send)
        finally:
            await clients_close()

    async_to_sync(served)()
    return sent


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_a_call_whose_answer_could_not_start_is_recorded_as_cut(
    stand_in: StandIn, settings: Any, stream: bool
) -> None:
    settings.CTXWEB_UPSTREAM_OPENAI = f"{stand_in.url}/v1"
    settings.CTXWEB_RATE_LIMIT = ""
    _, raw = api_key_create(project=project_create(name="unsent"))
    stand_in.then("Never read.")
    session = f"unsent-{'sse' if stream else 'json'}"
    sent = call_that_breaks(raw, session, stream=stream)
    assert [m["type"] for m in sent] == ["http.response.start"]
    recording_idle(close=True)
    [turn] = Turn.objects.filter(session__external_id=session)
    [event] = turn.events
    assert event["type"] == "interrupted"
    assert "after 0 bytes: its caller left before the answer's first byte" in event["message"]
    assert not PendingCall.objects.exists()
