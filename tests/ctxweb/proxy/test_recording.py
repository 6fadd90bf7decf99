"""Recording a relayed call (``services.proxying.proxy_record``), as the relay's recorder thread
calls it: a compressed answer is read back, and one that cannot be is a counted failure."""

from __future__ import annotations

import gzip
import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

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


def record(
    world: World,
    body: bytes,
    session: str,
    *,
    compressed: bool = False,
    request: bytes = REQUEST,
    one_transaction: bool = False,
) -> str | None:
    return proxying.proxy_record(
        project=world.project,
        key_id=1,
        format="openai-chat",
        request_body=request,
        response_body=body,
        streamed=False,
        session=session,
        compressed=compressed,
        one_transaction=one_transaction,
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


@pytest.mark.django_db(transaction=True)  # the recorder's transaction is the outermost
def test_a_call_recorded_in_one_transaction_takes_no_savepoint_and_a_failure_keeps_nothing(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The recorder writes a small call (its turn, its conversation's memory, the queue row's
    deletion) in one transaction: the turn is no savepoint of it (two round trips fewer a call),
    and a failure after the turn's writes leaves none of them (the call is kept unread)."""
    messages = [{"role": "user", "content": "Why does it fail?"}]
    for n in range(2):  # the second: its session exists (creating one is a savepoint of its own)
        messages += [{"role": "user", "content": f"And now? {n}"}]
        request = json.dumps({"model": "gpt-4o", "messages": messages}).encode()
        with CaptureQueriesContext(connection) as queries:
            recorded = record(world, ANSWER, "whole", request=request, one_transaction=True)
        assert recorded == "whole"
    sql = [query["sql"].upper() for query in queries.captured_queries]
    assert not [statement for statement in sql if "SAVEPOINT" in statement], sql
    assert Session.objects.get(project=world.project, external_id="whole").turns.count() == 2

    def fail(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the memory's write failed")

    monkeypatch.setattr(proxying, "_remember_sql", fail)
    assert record(world, ANSWER, "failed", one_transaction=True) is None
    # the session and its turn went with the transaction; the call is kept unread, naming it
    assert not Session.objects.filter(project=world.project, external_id="failed").exists()
    assert list(world.project.unread_calls.values_list("external_id", flat=True)) == ["failed"]
