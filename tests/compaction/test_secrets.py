"""compaction.secrets: real-shaped fake credentials are found by kind and place, and masked."""

from __future__ import annotations

import itertools
import json

import pytest

from compaction.messages import Message, TextPart, ToolCallPart, ToolResultPart
from compaction.secrets import (
    findings_in,
    mask_message,
    mask_text,
    mask_value,
    scan_message,
    scan_value,
)
from tests.support.hangs import hang_detector
from tests.support.secrets import (
    AUTHORIZATION_HEADER,
    AWS_SECRET_KEY,
    BEARER_TOKEN,
    FAKES,
    JWT,
    OPENAI_LEGACY_KEY,
)


@pytest.mark.parametrize(("kind", "value"), sorted(FAKES.items()))
def test_each_fake_key_is_found_with_its_kind_and_exact_offsets(kind: str, value: str) -> None:
    text = f"env dump:\nSECRET={value}\nDONE=1"
    [finding] = findings_in(text)
    assert finding.kind == kind
    assert text[finding.start : finding.end] == value
    assert finding.message


def test_the_credential_of_an_authorization_header_is_found_not_the_header_name() -> None:
    text = f'curl -H "{AUTHORIZATION_HEADER}" https://api.example.com'
    [finding] = findings_in(text)
    assert finding.kind == "authorization-header"
    assert text[finding.start : finding.end] == BEARER_TOKEN


def test_a_jwt_in_an_authorization_header_is_reported_once_as_a_jwt() -> None:
    text = f"Authorization: Bearer {JWT}\n"
    assert [f.kind for f in findings_in(text)] == ["jwt"]


def test_an_aws_secret_key_is_found_after_its_name() -> None:
    text = f"aws_secret_access_key = {AWS_SECRET_KEY}\n"
    [finding] = findings_in(text)
    assert (finding.kind, text[finding.start : finding.end]) == (
        "aws-secret-access-key",
        AWS_SECRET_KEY,
    )


def test_a_legacy_openai_key_is_found() -> None:
    assert [f.kind for f in findings_in(f"key: {OPENAI_LEGACY_KEY}\n")] == ["openai-api-key"]


@pytest.mark.parametrize(
    "text",
    [
        "",
        "def authorize(user): return user.is_staff",
        "The AKIA prefix marks AWS keys; sk- marks OpenAI ones; ghp_ GitHub's.",
        "sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n"
        "-----END PUBLIC KEY-----",
    ],
)
def test_ordinary_text_is_not_flagged(text: str) -> None:
    assert findings_in(text) == []


def test_masking_says_the_kind_and_moves_offsets_onto_the_masks() -> None:
    text = f"a={FAKES['github-pat']} b={FAKES['aws-access-token']} end"
    found = findings_in(text)
    masked = mask_text(text, found)
    assert masked == "a=[SECRET:github-pat] b=[SECRET:aws-access-token] end"
    assert FAKES["github-pat"] not in masked


def test_a_message_is_scanned_in_text_tool_arguments_and_tool_results_and_masked_in_place() -> None:
    arguments = json.dumps({"headers": {"Authorization": f"Bearer {BEARER_TOKEN}"}})
    message = Message(
        "assistant",
        (
            TextPart(f"using {FAKES['openai-api-key']} now"),
            ToolCallPart("c1", "http", arguments),
        ),
    )
    result = Message(
        "tool",
        (ToolResultPart("c1", (TextPart("ok"), TextPart(FAKES["private-key"]))),),
    )
    found = scan_message(message) + scan_message(result)
    assert [(f.kind, f.field) for f in found] == [
        ("openai-api-key", "parts.0.text"),
        ("authorization-header", "parts.1.arguments"),
        ("private-key", "parts.0.content.1.text"),
    ]
    masked, moved = mask_message(message, scan_message(message))
    text = masked.parts[0].text  # type: ignore[union-attr]
    assert text == "using [SECRET:openai-api-key] now"
    assert [text[f.start : f.end] for f in moved[:1]] == ["[SECRET:openai-api-key]"]
    args = json.loads(masked.parts[1].arguments)  # type: ignore[union-attr]
    assert args == {"headers": {"Authorization": "Bearer [SECRET:authorization-header]"}}
    masked_result, _ = mask_message(result, scan_message(result))
    assert masked_result.parts[0].content[1].text == "[SECRET:private-key]"  # type: ignore[union-attr]


def test_a_message_without_secrets_is_returned_as_it_is() -> None:
    message = Message("user", (TextPart("hello"),))
    assert mask_message(message, scan_message(message)) == (message, [])


@pytest.mark.parametrize(
    "unit", ["x-api-key: ", "Authorization: Bearer ", "-----BEGIN PRIVATE KEY-----\n", "a."]
)
def test_two_megabytes_of_header_like_text_are_scanned_in_linear_time(unit: str) -> None:
    """Text with a candidate every few characters: each is checked against the places kept
    so far in one look (the overlap check was a pass over all of them: 20 s on 1 MB, 80 on 2)."""
    text = (unit * (2_000_000 // len(unit) + 1))[:2_000_000]
    with hang_detector(30, "scanning 2 MB for secrets"):
        found = findings_in(text)
        masked = mask_text(text, found)
    starts = [f.start for f in found]
    assert starts == sorted(starts)
    assert all(a.end <= b.start for a, b in itertools.pairwise(found))
    assert len(masked) <= len(text) + 40 * len(found)


@pytest.mark.parametrize(
    ("text", "password"),
    [
        ("DATABASE_URL=postgres://admin:pw@host/db", "pw"),
        ("broker: amqp://u:p@h", "p"),
        ("cache at redis://:pw@h:6379/0", "pw"),
        ("clone https://u:p@h/repo.git", "p"),
        ('{"url": "mysql:\\/\\/root:s3cr%40t@db"}', "s3cr%40t"),
    ],
)
def test_the_password_of_a_uri_is_found_and_masked_alone(text: str, password: str) -> None:
    [finding] = findings_in(text)
    assert (finding.kind, text[finding.start : finding.end]) == ("uri-password", password)
    masked = mask_text(text, [finding])
    assert "[SECRET:uri-password]@" in masked
    assert masked.split("[SECRET:")[0] == text[: finding.start], "scheme and user stay readable"


@pytest.mark.parametrize(
    "text",
    [
        "https://example.com/path?q=1",
        "ssh://git@github.com:22/org/repo.git",
        "https://user@host/x",
        "http://host:8080/a@b",
        "https://h/?next=a:b@c",
        "file:///etc/passwd",
        "postgres://app:${DB_PASSWORD}@db/app",
        "postgres://app:$PGPASSWORD@db/app",
        "postgres://app:[SECRET:uri-password]@db/app",
    ],
)
def test_a_uri_without_a_password_is_not_flagged(text: str) -> None:
    assert findings_in(text) == []


@pytest.mark.parametrize("unit", ["://a:", "://a:bbbbbbbbbbbbbbbbbbbb", ":\\/\\/:x", "://:"])
def test_two_megabytes_of_uri_like_text_are_scanned_in_linear_time(unit: str) -> None:
    text = (unit * (2_000_000 // len(unit) + 1))[:2_000_000]
    with hang_detector(30, "scanning 2 MB of URI-like text"):
        assert findings_in(text) == []


def test_every_string_of_a_json_value_is_scanned_with_its_path_and_masked() -> None:
    value = {
        "user": FAKES["github-pat"],
        "metadata": {"tags": ["ok", "redis://:pw@cache"]},
        "n": 3,
        "flag": True,
    }
    found = scan_value(value, "request")
    assert [(f.kind, f.field) for f in found] == [
        ("github-pat", "request.user"),
        ("uri-password", "request.metadata.tags.1"),
    ]
    masked, moved = mask_value(value, "request")
    assert masked == {
        "user": "[SECRET:github-pat]",
        "metadata": {"tags": ["ok", "redis://:[SECRET:uri-password]@cache"]},
        "n": 3,
        "flag": True,
    }
    assert [(f.field, f.start, f.end) for f in moved] == [
        ("request.user", 0, 19),
        ("request.metadata.tags.1", 9, 30),
    ]
    assert value["user"] == FAKES["github-pat"], "the value given is not changed"
    clean = {"a": ["b"]}
    assert mask_value(clean) == (clean, [])


def test_a_message_is_scanned_in_its_extra_its_media_urls_and_its_verbatim_items() -> None:
    from compaction.messages import MediaPart
    from compaction.messages._common import RAW, raw_part

    item = {"type": "mcp_list_tools", "server": "db", "url": "postgres://app:pw@db/app"}
    message = Message(
        "user",
        (
            TextPart("see", extra={"citations": [{"cited_text": FAKES["github-pat"]}]}),
            MediaPart("image", url="https://u:p@img.example/x.png"),
            raw_part(item, "input.0"),
        ),
        extra={"metadata": {"token": FAKES["aws-access-token"]}},
    )
    found = scan_message(message)
    assert [(f.kind, f.field) for f in found] == [
        ("github-pat", "parts.0.extra.citations.0.cited_text"),
        ("uri-password", "parts.1.url"),
        ("uri-password", "parts.2.text"),
        ("aws-access-token", "extra.metadata.token"),
    ]
    masked, moved = mask_message(message, found)
    assert len(moved) == 4
    text = json.dumps(masked.extra) + json.dumps([p.extra for p in masked.parts])
    assert FAKES["github-pat"] not in text
    assert FAKES["aws-access-token"] not in text
    assert "app:pw@" not in text, "the verbatim item is masked as its text is"
    assert masked.parts[1].url == "https://u:[SECRET:uri-password]@img.example/x.png"  # type: ignore[union-attr]
    assert masked.parts[2].extra[RAW] == {
        **item,
        "url": "postgres://app:[SECRET:uri-password]@db/app",
    }


def test_a_value_nested_past_the_recursion_limit_is_scanned_and_masked() -> None:
    value: object = "amqp://u:p@h"
    for depth in range(5000):
        value = {"k": [value]} if depth % 2 else [value]
    assert [f.kind for f in scan_value(value)] == ["uri-password"]
    masked, [finding] = mask_value(value)
    assert finding.field.endswith(".0")
    assert finding.field.count(".") == 7499
    assert _innermost(masked) == "amqp://u:[SECRET:uri-password]@h"
    assert _innermost(value) == "amqp://u:p@h", "the value given is not changed"


def _innermost(value: object) -> object:
    while not isinstance(value, str):
        value = value["k"][0] if isinstance(value, dict) else value[0]  # type: ignore[index]
    return value
