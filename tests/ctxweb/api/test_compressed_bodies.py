"""Compressed request bodies on every way in that takes one: ``Content-Encoding: gzip``,
``deflate`` or ``zstd`` is stored exactly as the same body sent plain; a body that inflates past
the cap is a 413 and nothing is stored (never a decompression bomb); another encoding is a 415,
a corrupt body a 400."""

from __future__ import annotations

import base64
import gzip
import json
import zlib
from typing import Any

import pytest
import zstandard
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client, TestCase
from django.test.client import encode_multipart

from ctxweb.contexts import selectors
from ctxweb.contexts.models import Message, Session, Turn
from tests.support.world import World

pytestmark = pytest.mark.django_db

ENCODERS = {
    "gzip": gzip.compress,
    "deflate": zlib.compress,
    "zstd": lambda data: zstandard.ZstdCompressor().compress(data),
}
SYSTEM = {"role": "system", "content": "You are a careful coding agent."}
USER = {"role": "user", "content": "Why does the build fail? " + "See the log. " * 200}


def turn(content: str = "It fails at step 3.") -> bytes:
    body = {
        "format": "openai-chat",
        "request": {
            "model": "gpt-4o",
            "messages": [SYSTEM, USER, {"role": "assistant", "content": content}, USER],
        },
        "turn_id": "t-1",
    }
    return json.dumps(body).encode()


def post_turn(world: World, session: str, data: bytes, encoding: str | None) -> Any:
    extra = {"HTTP_CONTENT_ENCODING": encoding} if encoding else {}
    return world.api(world.ingest_key).generic(
        "POST",
        f"/api/v1/sessions/{session}/turns",
        data,
        content_type="application/json",
        **extra,
    )


def stored(session: str) -> list[dict[str, Any]]:
    found = Session.objects.get(external_id=session)
    row = Turn.objects.get(session=found, index=0)
    ids = selectors.turn_message_ids(session=found, index=0)
    rows = Message.objects.in_bulk(ids)
    return [rows[i].data for i in ids] + [{"total": row.total_tokens, "regions": row.regions}]


@pytest.mark.parametrize("encoding", sorted(ENCODERS))
def test_a_compressed_turn_is_stored_as_the_same_turn_sent_plain(
    world: World, encoding: str
) -> None:
    plain = post_turn(world, "plain", turn(), None)
    assert plain.status_code == 201, plain.content
    packed = ENCODERS[encoding](turn())
    assert len(packed) < len(turn()) / 5
    answer = post_turn(world, f"packed-{encoding}", packed, encoding)
    assert answer.status_code == 201, answer.content
    assert answer.json()["total_tokens"] == plain.json()["total_tokens"]
    assert stored(f"packed-{encoding}") == stored("plain")
    # A retry of the same turn, compressed again, is recognized as the same body.
    again = post_turn(world, f"packed-{encoding}", packed, encoding)
    assert again.status_code == 200


@pytest.mark.parametrize("encoding", sorted(ENCODERS))
def test_a_body_that_inflates_past_the_cap_is_a_413_and_nothing_is_stored(
    world: World, settings: Any, encoding: str
) -> None:
    settings.CTXWEB_MAX_REQUEST_BYTES = 200_000
    huge = turn("x" * 5_000_000)
    bomb = ENCODERS[encoding](huge)
    assert len(bomb) < 200_000  # under the cap as sent
    answer = post_turn(world, "bomb", bomb, encoding)
    assert answer.status_code == 413
    error = answer.json()["error"]
    assert error["code"] == "too_large"
    assert "inflates past 200000 bytes" in error["message"]
    assert not Session.objects.exists()


def test_another_encoding_is_a_415_and_a_corrupt_body_a_400(world: World) -> None:
    answer = post_turn(world, "s", turn(), "br")
    assert answer.status_code == 415
    assert answer.json()["error"]["code"] == "unsupported_encoding"
    assert "Content-Encoding" in answer.json()["error"]["fields"]
    for encoding in ("gzip", "deflate"):
        answer = post_turn(world, "s", b"not compressed at all", encoding)
        assert answer.status_code == 400, encoding
        assert f"not valid {encoding}" in answer.json()["error"]["message"]
    assert not Session.objects.exists()


def test_identity_is_the_body_as_sent(world: World) -> None:
    assert post_turn(world, "s", turn(), "identity").status_code == 201


def test_a_compressed_upload_is_imported(world: World, settings: Any) -> None:
    settings.CTXWEB_TASKS_INLINE = True
    transcript = json.dumps(
        [{"id": "gz-session", "messages": [SYSTEM, USER, {"role": "assistant", "content": "ok"}]}]
    ).encode()
    client = Client(HTTP_AUTHORIZATION=f"Bearer {world.ingest_key}")
    # A multipart body, compressed whole as a client would.
    multipart = encode_multipart(
        "BoUnDaRy", {"file": SimpleUploadedFile("chat.json", transcript), "format": "openai-chat"}
    )
    with TestCase.captureOnCommitCallbacks(execute=True):
        answer = client.generic(
            "POST",
            "/api/v1/import",
            gzip.compress(multipart),
            content_type="multipart/form-data; boundary=BoUnDaRy",
            HTTP_CONTENT_ENCODING="gzip",
        )
    assert answer.status_code in (201, 202), answer.content
    assert Session.objects.filter(external_id__endswith="gz-session").exists()


def test_a_compressed_langfuse_batch_is_ingested(world: World) -> None:
    batch = {
        "batch": [
            {
                "id": "e1",
                "timestamp": "2026-01-01T00:00:00.000Z",
                "type": "generation-create",
                "body": {
                    "id": "g1",
                    "traceId": "lf-gz",
                    "model": "gpt-4o",
                    "startTime": "2026-01-01T00:00:00.100Z",
                    "input": [SYSTEM, USER],
                },
            }
        ]
    }
    secret = base64.b64encode(f"pk-lf-1:{world.ingest_key}".encode()).decode()
    answer = Client().generic(
        "POST",
        "/api/public/ingestion",
        zstandard.ZstdCompressor().compress(json.dumps(batch).encode()),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Basic {secret}",
        HTTP_CONTENT_ENCODING="zstd",
    )
    assert answer.status_code in (200, 207), answer.content
    assert Turn.objects.filter(session__external_id="lf-gz").count() == 1


def test_an_otlp_export_may_come_zstd_compressed(world: World) -> None:
    export = {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [{"key": "session.id", "value": {"stringValue": "otlp-zstd"}}]
                },
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": "0af7651916cd43dd8448eb211c80319c",
                                "spanId": "00000000000000d1",
                                "name": "chat",
                                "startTimeUnixNano": "5",
                                "attributes": [
                                    {
                                        "key": "gen_ai.input.messages",
                                        "value": {"stringValue": json.dumps([USER])},
                                    },
                                    {
                                        "key": "gen_ai.request.model",
                                        "value": {"stringValue": "gpt-4o"},
                                    },
                                ],
                            }
                        ]
                    }
                ],
            }
        ]
    }
    answer = Client().generic(
        "POST",
        "/v1/traces",
        zstandard.ZstdCompressor().compress(json.dumps(export).encode()),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {world.ingest_key}",
        HTTP_CONTENT_ENCODING="zstd",
    )
    assert answer.status_code == 200, answer.content
    assert Turn.objects.filter(session__external_id="otlp-zstd").count() == 1
