"""Recording a relayed call (``services.proxying.proxy_record``), as the relay's recorder thread
calls it: a compressed answer is read back, and one that cannot be is a counted failure."""

from __future__ import annotations

import gzip
import json

from ctxweb.contexts.models import Session
from ctxweb.contexts.services import proxying
from tests.support.world import World

REQUEST = json.dumps(
    {"model": "gpt-4o", "messages": [{"role": "user", "content": "Why does it fail?"}]}
).encode()
ANSWER = json.dumps(
    {
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "A typo."}}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 3},
    }
).encode()


def record(world: World, body: bytes, session: str, *, compressed: bool) -> str | None:
    return proxying.proxy_record(
        project=world.project,
        key_id=1,
        format="openai-chat",
        request_body=REQUEST,
        response_body=body,
        streamed=False,
        session=session,
        compressed=compressed,
    )


def test_a_compressed_answer_is_recorded_as_the_provider_sent_it(world: World) -> None:
    assert record(world, gzip.compress(ANSWER), "gzipped", compressed=True) == "gzipped"
    turn = Session.objects.get(project=world.project, external_id="gzipped").turns.get()
    assert turn.reported_input_tokens == 12
    assert "A typo." in json.dumps(turn.response)


def test_an_answer_that_does_not_decompress_is_a_counted_failure(world: World) -> None:
    before = proxying.failures
    assert record(world, b"not gzip at all", "broken", compressed=True) is None
    assert proxying.failures == before + 1
    assert not Session.objects.filter(project=world.project, external_id="broken").exists()
