"""A proxied call ctxweb cannot read is never silently lost: the agent gets the provider's answer
unchanged, and the call is kept raw (request and answer as relayed, why it could not be read)
on its session, listed by the API and shown on the session page, downloadable, deleted with its
session, bounded per project, and invisible to another project.

End to end: the real ``anthropic`` SDK through a live uvicorn to a loopback stand-in; the rest
through the service the recorder calls and the HTTP interfaces on the test database."""

from __future__ import annotations

import gzip
import io
import json
import re
import time
import zipfile
import zlib
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import zstandard
from anthropic import Anthropic
from django.test import Client

from compaction.errors import FormatError
from ctxweb.contexts.models import Session, UnreadCall
from ctxweb.contexts.services import proxying
from ctxweb.contexts.services.deletion import session_delete
from ctxweb.contexts.services.unread import (
    unread_call_delete,
    unread_call_record,
    unread_calls_delete,
)
from tests.support.builders import body, history
from tests.support.providers import StandIn, provider_stand_in
from tests.support.servers import create_key, embedded_env, live_server
from tests.support.world import World

PROVIDER_KEY = "sk-provider-secret-0123456789"
OWNER, PASSWORD = "unread-owner", "pw-unread-owner-123"
#: A message whose content is neither text nor a list of blocks: the stand-in answers it (as a
#: lenient provider might), ctxweb cannot read it.
UNREADABLE = [{"role": "user", "content": 5}]


# --- end to end: the anthropic SDK through a live proxy -----------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, StandIn]]:
    with provider_stand_in() as stand_in:
        env = embedded_env(
            tmp_path_factory.mktemp("unread"),
            CTXWEB_UPSTREAM_ANTHROPIC=f"{stand_in.url}/v1",
            CTXWEB_RATE_LIMIT="",
        )
        key = create_key(env, role="operator", owner=OWNER, password=PASSWORD)
        with live_server(env) as running:
            yield running.url, key, stand_in


def anthropic(url: str, key: str, session: str) -> Anthropic:
    return Anthropic(
        base_url=f"{url}/proxy/anthropic",
        api_key=PROVIDER_KEY,
        default_headers={"X-Ctxweb-Key": key, "X-Ctxweb-Session": session},
    )


def get(url: str, key: str, path: str) -> httpx.Response:
    return httpx.get(f"{url}/api/v1/{path}", headers={"Authorization": f"Bearer {key}"})


def eventually(check: Any, what: str) -> Any:
    """``check()``'s first true value (recording follows the answer, in the recorder thread)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"{what}: not within 30 s")


def archive(content: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(content)) as opened:
        return {name: opened.read(name) for name in opened.namelist()}


def logged_in(url: str) -> httpx.Client:
    """A browser-like client logged in to the dashboard as the project's owner."""
    client = httpx.Client(base_url=url, follow_redirects=False)
    form = client.get("/accounts/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text)
    assert token is not None
    answer = client.post(
        "/accounts/login/",
        data={"username": OWNER, "password": PASSWORD, "csrfmiddlewaretoken": token.group(1)},
    )
    assert answer.status_code == 302, answer.text[:300]
    return client


@pytest.mark.embedded_server
def test_an_unreadable_call_is_answered_unchanged_and_kept_on_its_session(
    server: tuple[str, str, StandIn],
) -> None:
    url, key, stand_in = server
    client = anthropic(url, key, "unread-e2e")
    stand_in.then("Fine.", "Five, then.")
    first = client.messages.create(
        model="claude-sonnet-4-6",
        max_tokens=64,
        messages=[{"role": "user", "content": "Count to five."}],
    )
    assert first.content[0].text == "Fine."  # type: ignore[union-attr]
    eventually(lambda: get(url, key, "sessions/unread-e2e").status_code == 200, "first turn")

    raw = client.messages.with_raw_response.create(
        model="claude-sonnet-4-6",
        max_tokens=64,
        messages=UNREADABLE,  # type: ignore[arg-type]
    )
    # The agent got the provider's answer, and the provider got the call as sent.
    assert raw.http_response.status_code == 200
    assert raw.parse().content[0].text == "Five, then."  # type: ignore[union-attr]
    assert stand_in.requests[-1]["messages"] == UNREADABLE

    listed = eventually(
        lambda: get(url, key, "sessions/unread-e2e/unread-calls").json()["results"],
        "the unread call",
    )
    assert len(listed) == 1
    call = listed[0]
    assert call["session"] == call["external_id"] == "unread-e2e"
    assert (call["format"], call["source"], call["streamed"]) == (
        "anthropic-messages",
        "proxy",
        False,
    )
    assert call["error"] == "messages.0.content: expected an array, got integer"
    assert call["error_path"] == "messages.0.content"
    assert call["response_bytes"] == len(raw.http_response.content)
    assert [c["id"] for c in get(url, key, "unread-calls").json()["results"]] == [call["id"]]
    detail = get(url, key, "sessions/unread-e2e").json()
    assert (detail["unread_calls"], detail["turn_count"]) == (1, 1)

    download = httpx.get(call["raw_url"], headers={"Authorization": f"Bearer {key}"})
    assert download.status_code == 200
    assert download.headers["content-disposition"].startswith("attachment;")
    assert download.headers["x-content-type-options"] == "nosniff"
    files = archive(download.content)
    assert json.loads(files["request.json"])["messages"] == UNREADABLE
    assert files["response.json"] == raw.http_response.content  # byte for byte
    assert call["request_bytes"] == len(files["request.json"])
    assert PROVIDER_KEY.encode() not in b"".join(files.values())

    # The session page says so near its top, naming the field, with the download.
    page = logged_in(url).get("/sessions/unread-e2e/")
    assert page.status_code == 200
    assert "1 call could not be read" in page.text
    assert "messages.0.content: expected an array, got integer" in page.text
    link = f"/sessions/unread-e2e/unread-calls/{call['id']}/raw/"
    assert link in page.text
    assert page.text.index("could not be read") < page.text.index("Context by turn")
    served = logged_in(url).get(link)
    assert served.headers["content-disposition"].startswith("attachment;")
    assert archive(served.content)["response.json"] == raw.http_response.content

    # Deleting the session deletes what it kept.
    deleted = httpx.delete(
        f"{url}/api/v1/sessions/unread-e2e", headers={"Authorization": f"Bearer {key}"}
    )
    assert deleted.status_code == 204
    assert get(url, key, "unread-calls").json()["count"] == 0
    gone = httpx.get(call["raw_url"], headers={"Authorization": f"Bearer {key}"})
    assert gone.status_code == 404


@pytest.mark.embedded_server
def test_a_streamed_unreadable_call_keeps_the_stream_as_relayed(
    server: tuple[str, str, StandIn],
) -> None:
    url, key, stand_in = server
    stand_in.then("Streamed five.")
    sent = {"model": "claude-sonnet-4-6", "max_tokens": 64, "stream": True, "messages": UNREADABLE}
    with httpx.stream(
        "POST",
        f"{url}/proxy/anthropic/v1/messages",
        json=sent,
        headers={"X-Ctxweb-Key": key, "x-api-key": PROVIDER_KEY, "X-Ctxweb-Session": "nowhere"},
    ) as answer:
        relayed = answer.read()
    assert answer.status_code == 200
    assert b"Strea" in relayed
    assert b"message_stop" in relayed

    # No session "nowhere" exists: the call stays on the project, listed apart.
    listed = eventually(
        lambda: get(url, key, "unread-calls?unattached=1").json()["results"], "the stream"
    )
    assert (listed[0]["session"], listed[0]["external_id"]) == (None, "nowhere")
    assert listed[0]["streamed"] is True
    files = archive(
        httpx.get(listed[0]["raw_url"], headers={"Authorization": f"Bearer {key}"}).content
    )
    assert files["response.sse"] == relayed
    home = logged_in(url).get("/")
    assert "could not be read" in home.text
    assert f"/unread-calls/{listed[0]['id']}/raw/" in home.text


# --- through the recorder's service, on the test database ---------------------------------------


def keep(world: World, session: str | None = "s1", **changes: Any) -> UnreadCall:
    call: dict[str, Any] = {
        "project": world.project,
        "session_external_id": session,
        "format": "anthropic-messages",
        "request_body": json.dumps({"model": "m", "messages": UNREADABLE}).encode(),
        "response_body": b'{"type": "message"}',
        "streamed": False,
        "compressed": False,
        "error": "unreadable",
    }
    return unread_call_record(**{**call, **changes})


@pytest.fixture
def session(world: World) -> str:
    response = world.api(world.ingest_key).post(
        "/api/v1/sessions/s1/turns",
        data=json.dumps(body(history(1))),
        content_type="application/json",
    )
    assert response.status_code == 201
    return "s1"


def test_the_recorder_keeps_what_it_cannot_read_naming_the_field(
    world: World, session: str
) -> None:
    before = proxying.failures
    request = json.dumps({"model": "claude-sonnet-4-6", "max_tokens": 9, "messages": UNREADABLE})
    assert (
        proxying.proxy_record(
            project=world.project,
            key_id=1,
            format="anthropic-messages",
            request_body=request.encode(),
            response_body=b'{"type": "message", "content": []}',
            streamed=False,
            session=session,
        )
        is None
    )
    assert proxying.failures == before + 1
    call = UnreadCall.objects.get(project=world.project)
    assert (call.session.external_id if call.session else None) == "s1"
    assert (call.error_path, call.error) == (
        "messages.0.content",
        "messages.0.content: expected an array, got integer",
    )
    assert bytes(call.request_body) == request.encode()
    assert Session.objects.get(pk=call.session_id).unread_call_count == 1


def test_viewers_and_ingest_keys_read_them_and_another_project_finds_nothing(
    world: World, session: str
) -> None:
    call = keep(world)
    raw = f"/api/v1/unread-calls/{call.pk}/raw"
    for reader in (world.login(world.teammate), world.api(world.ingest_key)):
        listed = reader.get("/api/v1/sessions/s1/unread-calls").json()
        assert [c["id"] for c in listed["results"]] == [call.pk]
        assert reader.get(raw).status_code == 200
    for outsider in (world.login(world.outsider), world.api(world.outsider_key)):
        assert outsider.get(raw).status_code == 404
        assert outsider.get("/api/v1/sessions/s1/unread-calls").status_code == 404
        assert outsider.get("/api/v1/unread-calls").json()["count"] == 0
    page = Client()
    page.force_login(world.outsider)
    assert page.get(f"/unread-calls/{call.pk}/raw/").status_code == 404
    assert page.get(f"/sessions/s1/unread-calls/{call.pk}/raw/").status_code == 404
    page.force_login(world.teammate)
    served = page.get(f"/sessions/s1/unread-calls/{call.pk}/raw/")
    assert served.status_code == 200
    assert served["Content-Disposition"] == f'attachment; filename="unread-call-{call.pk}.zip"'
    assert served["X-Content-Type-Options"] == "nosniff"
    assert archive(served.content)["response.json"] == b'{"type": "message"}'


def test_a_call_is_only_downloaded_under_its_own_session(world: World, session: str) -> None:
    elsewhere = keep(world, session=None)
    page = Client()
    page.force_login(world.owner)
    assert page.get(f"/sessions/s1/unread-calls/{elsewhere.pk}/raw/").status_code == 404
    assert page.get(f"/unread-calls/{elsewhere.pk}/raw/").status_code == 200


def test_the_project_keeps_at_most_its_bound_the_oldest_dropped(
    world: World, session: str, settings: Any
) -> None:
    settings.CTXWEB_UNREAD_CALLS_PER_PROJECT = 3
    kept = [keep(world, error=f"call {n}").pk for n in range(5)]
    keep(world, session=None, error="call 5")  # a call on no session counts too
    remaining = list(
        UnreadCall.objects.filter(project=world.project).order_by("pk").values_list("error")
    )
    assert remaining == [("call 3",), ("call 4",), ("call 5",)]
    assert Session.objects.get(external_id="s1").unread_call_count == 2
    listed = world.api(world.ingest_key).get("/api/v1/unread-calls").json()
    assert [c["error"] for c in listed["results"]] == ["call 5", "call 4", "call 3"]
    assert world.api(world.ingest_key).get("/api/v1/sessions/s1").json()["unread_calls"] == 2
    assert not UnreadCall.objects.filter(pk__in=kept[:3]).exists()


def test_deleting_the_session_deletes_its_unread_calls_and_no_other(
    world: World, session: str
) -> None:
    keep(world)
    apart = keep(world, session=None)
    session_delete(session=Session.objects.get(external_id="s1"), actor=world.owner)
    assert list(UnreadCall.objects.values_list("pk", flat=True)) == [apart.pk]


def test_deleting_unread_calls_keeps_the_sessions_count(world: World, session: str) -> None:
    first = keep(world)
    keep(world)
    keep(world, session=None)
    unread_call_delete(unread_call=first)
    assert Session.objects.get(external_id="s1").unread_call_count == 1
    assert unread_calls_delete(project=world.project) == 2
    assert Session.objects.get(external_id="s1").unread_call_count == 0
    assert not UnreadCall.objects.exists()


@pytest.mark.parametrize(
    ("encoding", "compress", "marked"),
    [
        ("gzip", gzip.compress, True),
        ("deflate", zlib.compress, True),
        ("zstd", lambda data: zstandard.ZstdCompressor().compress(data), False),
    ],
)
def test_a_compressed_answer_is_kept_decompressed(
    world: World, session: str, encoding: str, compress: Any, marked: bool
) -> None:
    answer = json.dumps({"type": "message", "content": [{"type": "text", "text": "x" * 500}]})
    call = keep(world, response_body=compress(answer.encode()), compressed=marked)
    assert (bytes(call.response_body), call.content_encoding) == (answer.encode(), "")


def test_an_answer_that_does_not_decompress_is_kept_as_relayed_and_says_so(
    world: World, session: str
) -> None:
    broken = gzip.compress(b'{"type": "message"}')[:-12]
    call = keep(world, response_body=broken, compressed=True)
    assert (bytes(call.response_body), call.content_encoding) == (broken, "gzip")
    files = archive(world.api(world.ingest_key).get(f"/api/v1/unread-calls/{call.pk}/raw").content)
    assert files["response.gz"] == broken
    assert json.loads(files["call.json"])["content_encoding"] == "gzip"


def test_a_body_past_the_cap_is_cut_there_and_marked(
    world: World, session: str, settings: Any
) -> None:
    settings.CTXWEB_MAX_REQUEST_BYTES = 100
    call = keep(world, request_body=b"r" * 150, response_body=b"a" * 99)
    assert (call.request_size, call.response_size, call.truncated) == (100, 99, True)
    assert bytes(call.request_body) == b"r" * 100


def test_the_session_page_and_the_sessions_list_warn_of_them(world: World, session: str) -> None:
    page = Client()
    page.force_login(world.teammate)
    assert "could not be read" not in page.get("/sessions/s1/").content.decode()
    assert "could not be read" not in page.get("/").content.decode()
    keep(world, error="messages.0.content: expected an array, got integer")
    keep(world, error="second")
    keep(world, session="gone-session", error="third")
    detail = page.get("/sessions/s1/").content.decode()
    assert "2 calls could not be read" in detail
    assert "messages.0.content: expected an array, got integer" in detail
    assert "third" not in detail
    home = page.get("/").content.decode()
    assert "1 call could not be read" in home
    assert "gone-session" in home
    assert "third" in home
    assert "second" not in home


def test_a_reason_holding_a_nul_or_a_lone_surrogate_still_keeps_the_call(world: World) -> None:
    call = unread_call_record(
        project=world.project,
        session_external_id="s\x00\ud800",
        format="openai-chat",
        request_body=b"{}",
        response_body=b"{}",
        streamed=False,
        compressed=False,
        error=FormatError("messages.0.\x00\ud800", "bad \x00 key \ud800"),
    )
    call.refresh_from_db()
    assert "\x00" not in call.error
    assert "\\x00" in call.error
    assert "\\ud800" in call.error_path
