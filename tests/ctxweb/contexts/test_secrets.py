"""Secrets in contexts: every way in scans new messages, records what it found (kind, message,
offsets; never the value), shows it in the API and the sessions list, and masks it before storage
when the project says so."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from ctxweb.contexts.models import Message, Session, Turn
from tests.support.secrets import (
    ANTHROPIC_KEY,
    AUTHORIZATION_HEADER,
    AWS_ACCESS_KEY,
    FAKES,
    GITHUB_PAT,
    JWT,
    OPENAI_KEY,
    PRIVATE_KEY,
)
from tests.support.world import World

pytestmark = pytest.mark.django_db

ASK = {"role": "user", "content": "Show me the environment."}


def call(call_id: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": "sh", "arguments": "{}"}}
        ],
    }


def result(call_id: str, output: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": output}


ENV_DUMP = f"HOME=/root\nAWS_ACCESS_KEY_ID={AWS_ACCESS_KEY}\nGITHUB_TOKEN={GITHUB_PAT}\nTERM=xterm"


def post(client: Any, external_id: str, messages: list[dict[str, Any]]) -> Any:
    body = {"format": "openai-chat", "request": {"model": "gpt-4o", "messages": messages}}
    return client.post(
        f"/api/v1/sessions/{external_id}/turns",
        data=json.dumps(body),
        content_type="application/json",
    )


def stored_text(world: World) -> str:
    return json.dumps([m.data for m in Message.objects.filter(project=world.project)])


def test_a_planted_key_in_a_tool_output_is_flagged_in_the_turns_answer_and_kept_as_sent(
    world: World,
) -> None:
    client = world.api(world.ingest_key)
    response = post(client, "env", [ASK, call("c1"), result("c1", ENV_DUMP)])
    assert response.status_code == 201, response.content
    secrets = response.json()["secrets"]
    assert [(s["kind"], s["position"], s["field"]) for s in secrets] == [
        ("aws-access-token", 2, "parts.0.content.0.text"),
        ("github-pat", 2, "parts.0.content.0.text"),
    ]
    assert ENV_DUMP[secrets[0]["start"] : secrets[0]["end"]] == AWS_ACCESS_KEY
    assert AWS_ACCESS_KEY not in json.dumps(secrets), "a finding never carries the value"
    assert AWS_ACCESS_KEY in stored_text(world), "without the setting, stored as it came"

    detail = client.get("/api/v1/sessions/env/turns/0").json()
    assert [s["kind"] for s in detail["secrets"]] == ["aws-access-token", "github-pat"]
    assert detail["messages"][2]["secrets"][0]["kind"] == "aws-access-token"
    session = client.get("/api/v1/sessions/env").json()
    assert session["secret_count"] == 2


def test_the_next_turn_does_not_scan_or_count_the_stored_message_again(world: World) -> None:
    client = world.api(world.ingest_key)
    first = [ASK, call("c1"), result("c1", ENV_DUMP)]
    post(client, "env", first)
    second = post(client, "env", [*first, {"role": "assistant", "content": "Done."}])
    assert second.json()["secrets"] == []
    assert Session.objects.get(external_id="env").secret_count == 2
    detail = client.get("/api/v1/sessions/env/turns/1").json()
    assert len(detail["secrets"]) == 2, "the turn's answer still lists what its messages hold"


@pytest.mark.parametrize(("kind", "value"), sorted(FAKES.items()))
def test_with_masking_on_nothing_stored_holds_the_value_and_counts_are_of_what_is_stored(
    world: World, kind: str, value: str
) -> None:
    world.project.mask_secrets = True
    world.project.save()
    client = world.api(world.ingest_key)
    output = f"config:\n{value}\nend"
    response = post(client, "masked", [ASK, call("c1"), result("c1", output)])
    assert response.status_code == 201, response.content
    [finding] = response.json()["secrets"]
    assert finding["kind"] == kind
    assert value not in stored_text(world)
    [turn] = Turn.objects.filter(session__external_id="masked")
    assert value not in json.dumps(turn.request_extra)
    detail = client.get("/api/v1/sessions/masked/turns/0").json()
    text = detail["messages"][2]["message"]["parts"][0]["content"][0]["text"]
    assert text == f"config:\n[SECRET:{kind}]\nend"
    assert text[finding["start"] : finding["end"]] == f"[SECRET:{kind}]"
    # The same output sent unmasked in another project counts its full length.
    assert detail["messages"][2]["tokens"] < 30 + len(value) // 2


def test_masked_messages_are_found_again_by_the_next_turn(world: World) -> None:
    world.project.mask_secrets = True
    world.project.save()
    client = world.api(world.ingest_key)
    first = [ASK, call("c1"), result("c1", ENV_DUMP)]
    post(client, "env", first)
    count = Message.objects.count()
    post(client, "env", [*first, {"role": "assistant", "content": "Done."}])
    assert Message.objects.count() == count + 1


def test_secrets_in_the_system_prompt_tool_arguments_and_user_text_are_flagged(
    world: World,
) -> None:
    body = {
        "format": "anthropic-messages",
        "request": {
            "model": "claude-sonnet-4-5",
            "max_tokens": 1024,
            "system": f"Use key {ANTHROPIC_KEY} for calls.",
            "messages": [
                {"role": "user", "content": f"My token is {JWT} and {OPENAI_KEY}"},
                {
                    "role": "assistant",
                    "content": [
                        {
                            "type": "tool_use",
                            "id": "t1",
                            "name": "http",
                            "input": {"headers": AUTHORIZATION_HEADER, "key": PRIVATE_KEY},
                        }
                    ],
                },
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}],
                },
            ],
        },
    }
    response = world.api(world.ingest_key).post(
        "/api/v1/sessions/anth/turns", data=json.dumps(body), content_type="application/json"
    )
    assert response.status_code == 201, response.content
    kinds = [(s["kind"], s["position"]) for s in response.json()["secrets"]]
    assert kinds == [
        ("anthropic-api-key", None),
        ("jwt", 0),
        ("openai-api-key", 0),
        ("authorization-header", 1),
        ("private-key", 1),
    ]


def test_an_imported_transcript_is_scanned_and_masked(world: World) -> None:
    world.project.mask_secrets = True
    world.project.save()
    done = {"role": "assistant", "content": "Done."}
    data = json.dumps(
        {"model": "gpt-4o", "messages": [ASK, call("c1"), result("c1", ENV_DUMP), done]}
    )
    response = world.api(world.ingest_key).post(
        "/api/v1/import",
        {"file": _file(data.encode(), "env.jsonl"), "format": "auto"},
        format="multipart",
    )
    assert response.status_code in (201, 202), response.content
    session = Session.objects.get(project=world.project)
    assert session.secret_count == 2
    assert AWS_ACCESS_KEY not in stored_text(world)


def _file(data: bytes, name: str) -> Any:
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile(name, data, content_type="application/octet-stream")


def test_an_otlp_span_is_scanned(world: World) -> None:
    messages = [
        {"role": "user", "parts": [{"type": "text", "content": f"key={GITHUB_PAT}"}]},
    ]
    span = {
        "traceId": "5b8efff798038103d269b633813fc60c",
        "spanId": "00000000000000b1",
        "name": "chat gpt-4o",
        "startTimeUnixNano": "100",
        "attributes": [
            {"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
            {"key": "gen_ai.request.model", "value": {"stringValue": "gpt-4o"}},
            {"key": "gen_ai.input.messages", "value": {"stringValue": json.dumps(messages)}},
        ],
    }
    document = {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [{"key": "session.id", "value": {"stringValue": "otel"}}]
                },
                "scopeSpans": [{"scope": {"name": "t"}, "spans": [span]}],
            }
        ]
    }
    response = Client().post(
        "/v1/traces",
        json.dumps(document).encode(),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {world.ingest_key}",
    )
    assert response.status_code == 200, response.content
    [turn] = Turn.objects.filter(session__external_id="otel")
    assert [s["kind"] for s in turn.secrets] == ["github-pat"]


def test_the_sessions_list_and_inspector_show_the_findings(world: World) -> None:
    post(world.api(world.ingest_key), "env", [ASK, call("c1"), result("c1", ENV_DUMP)])
    client = world.login(world.owner)
    listing = client.get("/")
    assert listing.status_code == 200
    assert b"2 secrets" in listing.content
    inspector = client.get("/sessions/env/turns/0/")
    assert inspector.status_code == 200
    page = inspector.content.decode()
    assert "AWS access key id" in page
    assert "aws-access-token" in page


def test_ingesting_a_turn_without_secrets_adds_no_query(world: World) -> None:
    client = world.api(world.ingest_key)
    post(client, "q", [ASK])
    with CaptureQueriesContext(connection) as plain:
        post(client, "q", [ASK, {"role": "assistant", "content": "hello"}])
    post(client, "r", [ASK])
    with CaptureQueriesContext(connection) as flagged:
        post(client, "r", [ASK, {"role": "assistant", "content": f"the key is {GITHUB_PAT}"}])
    assert len(flagged) == len(plain)
