"""The recording proxy end to end: the real ``openai`` and ``anthropic`` SDKs, their base URL
pointed at a live uvicorn, which relays to loopback stand-ins for both providers' APIs. Every
call is answered exactly as the upstream answered it, streamed or not, and recorded once with
its regions and reported usage; the provider's key reaches the stand-in and nowhere else."""

from __future__ import annotations

import http.client
import json
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from anthropic import Anthropic
from openai import OpenAI

from ctxweb.proxy.relay import SPOOL_BIG_BYTES
from tests.support.providers import StandIn
from tests.support.servers import LiveServer, create_key, embedded_env, live_server, manage

PROVIDER_KEY = "sk-provider-secret-0123456789"
TOOL = {"tool": "read_file", "arguments": {"path": "src/app.py"}}
#: The running servers by URL, so a failure can show what the server wrote.
RUNNING: dict[str, LiveServer] = {}


@pytest.fixture(scope="module")
def server(
    stand_in: StandIn, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, str, Path]]:
    data = tmp_path_factory.mktemp("proxy")
    env = embedded_env(
        data,
        CTXWEB_UPSTREAM_OPENAI=f"{stand_in.url}/v1",
        CTXWEB_UPSTREAM_ANTHROPIC=f"{stand_in.url}/v1",
        CTXWEB_RATE_LIMIT="",
    )
    key = create_key(env, role="ingest")
    with live_server(env) as running:
        RUNNING[running.url] = running
        yield running.url, key, data


def api(url: str, key: str, path: str) -> Any:
    request = urllib.request.Request(
        f"{url}/api/v1/{path}", headers={"Authorization": f"Bearer {key}"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def settle(url: str, key: str, session: str, turns: int) -> dict[str, Any]:
    """The session once its ``turns`` are recorded (recording follows the answer)."""
    import time

    deadline = time.monotonic() + 30
    seen: Any = None
    while True:
        try:
            detail: dict[str, Any] = api(url, key, f"sessions/{session}")
            if detail["turn_count"] >= turns:
                return detail
            seen = detail["turn_count"]
        except urllib.error.HTTPError as failure:
            seen = failure
        running = RUNNING.get(url)
        assert time.monotonic() < deadline, (
            f"{session} has not {turns} turns (last seen: {seen}); the server's last lines:\n"
            + (running.output if running is not None else "(not known)")
        )
        time.sleep(0.1)


def openai_client(url: str, key: str, session: str | None = None) -> OpenAI:
    headers = {"X-Ctxweb-Key": key}
    if session:
        headers["X-Ctxweb-Session"] = session
    return OpenAI(base_url=f"{url}/proxy/openai/v1", api_key=PROVIDER_KEY, default_headers=headers)


@pytest.mark.embedded_server
@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_an_openai_agent_is_answered_as_upstream_and_recorded_turn_by_turn(
    server: tuple[str, str, Path], stand_in: StandIn, stream: bool
) -> None:
    url, key, _ = server
    session = f"openai-{stream}"
    client = openai_client(url, key, session)
    stand_in.then(TOOL, "The divisor is zero.")
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful coding agent."},
        {"role": "user", "content": "Why does the test fail?"},
    ]
    options: dict[str, Any] = (
        {"stream": True, "stream_options": {"include_usage": True}} if stream else {}
    )
    first = client.chat.completions.create(model="gpt-4o", messages=messages, **options)
    if stream:
        chunks = list(first)
        call_id = next(
            c.choices[0].delta.tool_calls[0].id
            for c in chunks
            if c.choices and c.choices[0].delta.tool_calls
        )
        assert chunks[-1].usage is not None
    else:
        call_id = first.choices[0].message.tool_calls[0].id
        assert first.usage.prompt_tokens > 0
    messages += [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": "read_file", "arguments": json.dumps(TOOL["arguments"])},
                }
            ],
        },
        {
            "role": "tool",
            "tool_call_id": call_id,
            "content": "def ratio(a, b):\n    return a / b\n",
        },
    ]
    second = client.chat.completions.create(model="gpt-4o", messages=messages, **options)
    text = (
        "".join(c.choices[0].delta.content or "" for c in second if c.choices)
        if stream
        else second.choices[0].message.content
    )
    assert text == "The divisor is zero."
    detail = settle(url, key, session, 2)
    assert detail["source"] == "proxy"
    turns = api(url, key, f"sessions/{session}/turns")
    assert turns[1]["regions"]["tool_calls"] > 0
    assert turns[1]["regions"]["tool_results"] > 0
    sent = stand_in.requests[-2:]
    for turn, request in zip(turns, sent, strict=True):
        assert turn["reported_input_tokens"] == max(1, len(json.dumps(request["messages"])) // 4)
    assert stand_in.headers[-1]["authorization"] == f"Bearer {PROVIDER_KEY}"
    assert "x-ctxweb-key" not in stand_in.headers[-1]


@pytest.mark.embedded_server
@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_an_anthropic_agent_without_a_session_header_stays_one_session(
    server: tuple[str, str, Path], stand_in: StandIn, stream: bool
) -> None:
    url, key, _ = server
    client = Anthropic(
        base_url=f"{url}/proxy/anthropic",
        api_key=PROVIDER_KEY,
        default_headers={"X-Ctxweb-Key": key},
    )
    stand_in.then(TOOL, "Fixed.")
    ask = f"Fix the build ({'streaming' if stream else 'plain'})."
    messages: list[dict[str, Any]] = [{"role": "user", "content": ask}]

    def call() -> Any:
        if stream:
            with client.messages.stream(
                model="claude-test-model", max_tokens=256, system="Be terse.", messages=messages
            ) as events:
                return events.get_final_message()
        return client.messages.create(
            model="claude-test-model", max_tokens=256, system="Be terse.", messages=messages
        )

    first = call()
    use = next(b for b in first.content if b.type == "tool_use")
    assert use.input == TOOL["arguments"]
    messages += [
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": use.id, "name": use.name, "input": use.input}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "x = 1/0"}],
        },
    ]
    assert call().content[0].text == "Fixed."
    sessions = api(url, key, "sessions?limit=500")["results"]
    import time

    deadline = time.monotonic() + 30
    while True:
        mine = [
            s
            for s in api(url, key, "sessions?limit=500")["results"]
            if s["format"] == "anthropic-messages" and s["turn_count"] == 2
        ]
        found = []
        for s in mine:
            turn = api(url, key, f"sessions/{s['external_id']}/turns/0")
            if ask in json.dumps(turn["messages"]):
                found.append(s)
        if found or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert len(found) == 1, sessions
    turns = api(url, key, f"sessions/{found[0]['external_id']}/turns")
    assert turns[1]["regions"]["system"] > 0
    assert turns[1]["regions"]["tool_results"] > 0
    assert turns[1]["reported_input_tokens"] > 0


@pytest.mark.embedded_server
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_stream_the_sdk_stops_reading_at_its_last_event_is_recorded(
    server: tuple[str, str, Path], stand_in: StandIn, provider: str
) -> None:
    """The openai SDK closes the connection once it reads ``[DONE]``: when the upstream ends
    its stream a moment later, the relay sees the caller leave first. The answer was whole, so
    the call is recorded all the same (it was lost, depending on which came first)."""
    url, key, _ = server
    session = f"lingering-{provider}"
    stand_in.then(f"Answered in full ({provider}).")
    stand_in.linger = 1.0
    try:
        if provider == "openai":
            answer = openai_client(url, key, session).chat.completions.create(
                model="gpt-4o",
                messages=[{"role": "user", "content": "Explain the failure."}],
                stream=True,
                stream_options={"include_usage": True},
            )
            text = "".join(c.choices[0].delta.content or "" for c in answer if c.choices)
        else:
            client = Anthropic(
                base_url=f"{url}/proxy/anthropic",
                api_key=PROVIDER_KEY,
                default_headers={"X-Ctxweb-Key": key, "X-Ctxweb-Session": session},
            )
            with client.messages.stream(
                model="claude-test-model",
                max_tokens=64,
                messages=[{"role": "user", "content": "Explain the failure."}],
            ) as events:
                text = events.get_final_message().content[0].text
    finally:
        stand_in.linger = 0.0
    assert text == f"Answered in full ({provider})."
    settle(url, key, session, 1)
    [turn] = api(url, key, f"sessions/{session}/turns")
    assert turn["reported_input_tokens"] > 0
    recorded = api(url, key, f"sessions/{session}/turns/0")
    assert f"Answered in full ({provider})." in json.dumps(recorded)


@pytest.mark.embedded_server
@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_a_call_whose_request_is_spooled_on_the_big_threads_is_recorded_whole(
    server: tuple[str, str, Path], stand_in: StandIn, stream: bool
) -> None:
    """A request body from ``SPOOL_BIG_BYTES`` up is written for the recorder on the threads
    of big ones: the call is answered and recorded from the whole of it all the same."""
    url, key, _ = server
    session = f"big-request-{stream}"
    words = 2 * SPOOL_BIG_BYTES // 5
    log = " word" * words  # one token a word
    stand_in.then("Read it all.")
    answer = openai_client(url, key, session).chat.completions.create(
        model="gpt-4o",
        messages=[{"role": "user", "content": f"The build log:{log} What failed?"}],
        stream=stream,
    )
    if stream:
        text = "".join(c.choices[0].delta.content or "" for c in answer if c.choices)
    else:
        text = answer.choices[0].message.content
    assert text == "Read it all."
    settle(url, key, session, 1)
    [turn] = api(url, key, f"sessions/{session}/turns")
    assert words < turn["counted_tokens"] < words + 100
    assert "What failed?" in json.dumps(api(url, key, f"sessions/{session}/turns/0"))


@pytest.mark.embedded_server
def test_no_ctxweb_key_is_refused_in_the_providers_shape_and_nothing_leaves(
    server: tuple[str, str, Path], stand_in: StandIn
) -> None:
    url, _, _ = server
    before = len(stand_in.requests)
    import openai

    client = OpenAI(base_url=f"{url}/proxy/openai/v1", api_key=PROVIDER_KEY, max_retries=0)
    with pytest.raises(openai.AuthenticationError) as raised:
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    assert "X-Ctxweb-Key" in str(raised.value)
    import anthropic

    claude = Anthropic(
        base_url=f"{url}/proxy/anthropic",
        api_key=PROVIDER_KEY,
        max_retries=0,
        default_headers={"X-Ctxweb-Key": "ctx_revoked-or-wrong"},
    )
    with pytest.raises(anthropic.AuthenticationError):
        claude.messages.create(
            model="c", max_tokens=5, messages=[{"role": "user", "content": "hi"}]
        )
    assert len(stand_in.requests) == before


@pytest.mark.embedded_server
def test_upstream_errors_pass_through_as_they_are_and_are_not_recorded(
    server: tuple[str, str, Path], stand_in: StandIn
) -> None:
    url, key, _ = server
    import openai

    stand_in.status = 529
    try:
        client = OpenAI(
            base_url=f"{url}/proxy/openai/v1",
            api_key=PROVIDER_KEY,
            max_retries=0,
            default_headers={"X-Ctxweb-Key": key, "X-Ctxweb-Session": "failing"},
        )
        with pytest.raises(openai.APIStatusError) as raised:
            client.chat.completions.create(
                model="gpt-4o", messages=[{"role": "user", "content": "hi"}]
            )
    finally:
        stand_in.status = 200
    assert raised.value.status_code == 529
    assert "upstream says no" in str(raised.value)
    with pytest.raises(urllib.error.HTTPError) as missing:
        api(url, key, "sessions/failing")
    assert missing.value.code == 404


@pytest.mark.embedded_server
def test_other_paths_pass_through_unrecorded(
    server: tuple[str, str, Path], stand_in: StandIn
) -> None:
    url, key, _ = server
    request = urllib.request.Request(
        f"{url}/proxy/openai/v1/models",
        headers={"X-Ctxweb-Key": key, "Authorization": f"Bearer {PROVIDER_KEY}"},
    )
    before = api(url, key, "sessions")["count"]
    with urllib.request.urlopen(request, timeout=30) as answer:
        assert json.loads(answer.read())["data"][0]["id"] == "gpt-4o"
    assert stand_in.headers[-1]["authorization"] == f"Bearer {PROVIDER_KEY}"
    assert api(url, key, "sessions")["count"] == before
    missing = urllib.request.Request(
        f"{url}/proxy/openai/v1/files/nope", headers={"X-Ctxweb-Key": key}
    )
    with pytest.raises(urllib.error.HTTPError) as error:
        urllib.request.urlopen(missing, timeout=30)
    assert error.value.code == 404  # the upstream's own answer


@pytest.mark.embedded_server
def test_the_providers_key_is_stored_nowhere(server: tuple[str, str, Path]) -> None:
    url, key, data = server
    openai_client(url, key, "keyless").chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "hello"}]
    )
    settle(url, key, "keyless", 1)
    # Everything the database holds: its files, and its dump (retried while the server writes).
    content = b"".join(path.read_bytes() for path in data.glob("db.sqlite3*"))
    for _ in range(5 if shutil.which("sqlite3") else 0):
        dump = subprocess.run(
            ["sqlite3", str(data / "db.sqlite3"), ".dump"], capture_output=True, timeout=60
        )
        if dump.returncode == 0:
            content += dump.stdout
            break
    assert PROVIDER_KEY.encode() not in content
    assert b"hello" in content  # the recording itself is there


@pytest.mark.embedded_server
@pytest.mark.usefixtures("clear_of_a_minutes_end")
def test_each_key_has_its_rate_limit_in_the_providers_shape(
    stand_in: StandIn, tmp_path_factory: pytest.TempPathFactory
) -> None:
    import openai

    env = embedded_env(
        tmp_path_factory.mktemp("proxy-limited"),
        CTXWEB_UPSTREAM_OPENAI=f"{stand_in.url}/v1",
        CTXWEB_RATE_LIMIT="3/min",
    )
    key = create_key(env, role="ingest")
    with live_server(env) as running:
        client = OpenAI(
            base_url=f"{running.url}/proxy/openai/v1",
            api_key=PROVIDER_KEY,
            max_retries=0,
            default_headers={"X-Ctxweb-Key": key, "X-Ctxweb-Session": "limited"},
        )
        # The limit's windows are aligned on the clock's minutes: the four calls go in one (a
        # call past the minute's end starts a new window, and is allowed).
        left = 60 - time.time() % 60
        if left < 20:
            time.sleep(left + 0.5)
        before = len(stand_in.requests)
        for _ in range(3):
            client.chat.completions.create(
                model="gpt-4o", messages=[{"role": "user", "content": "hi"}]
            )
        with pytest.raises(openai.RateLimitError) as raised:
            client.chat.completions.create(
                model="gpt-4o", messages=[{"role": "user", "content": "hi"}]
            )
        assert int(raised.value.response.headers["Retry-After"]) >= 1
        assert len(stand_in.requests) == before + 3


@pytest.mark.embedded_server
def test_a_key_over_its_bytes_a_minute_is_told_by_its_sdk_when_to_call_again(
    stand_in: StandIn, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """``CTXWEB_PROXY_KEY_MB_PER_MINUTE`` as the agents' SDKs meet it: a call within the budget
    goes whatever its size; the next is the SDK's own rate-limit error, with the seconds to
    wait, and never reaches the provider. Each key has its budget."""
    env = embedded_env(
        tmp_path_factory.mktemp("proxy-budget"),
        CTXWEB_UPSTREAM_OPENAI=f"{stand_in.url}/v1",
        CTXWEB_UPSTREAM_ANTHROPIC=f"{stand_in.url}/v1",
        CTXWEB_RATE_LIMIT="",
        CTXWEB_PROXY_KEY_MB_PER_MINUTE="1",
    )
    keys = [create_key(env, role="ingest")]  # migrates, and makes the project "p"
    another = manage(env, "create_api_key", "--project", "p", "--role", "ingest")
    keys.append(another.strip().splitlines()[-1].strip())
    big = [{"role": "user", "content": "x" * (3 * 1024 * 1024 // 2)}]  # 1.5 MB: 30 s in debt
    small = [{"role": "user", "content": "hi"}]
    with live_server(env) as running:
        gpt = OpenAI(
            base_url=f"{running.url}/proxy/openai/v1",
            api_key=PROVIDER_KEY,
            max_retries=0,
            default_headers={"X-Ctxweb-Key": keys[0], "X-Ctxweb-Session": "budget-openai"},
        )
        claude = Anthropic(
            base_url=f"{running.url}/proxy/anthropic",
            api_key=PROVIDER_KEY,
            max_retries=0,
            default_headers={"X-Ctxweb-Key": keys[1], "X-Ctxweb-Session": "budget-anthropic"},
        )
        before = len(stand_in.requests)
        assert gpt.chat.completions.create(model="gpt-4o", messages=big).choices
        with pytest.raises(openai.RateLimitError) as refused:
            gpt.chat.completions.create(model="gpt-4o", messages=small)
        assert 25 <= int(refused.value.response.headers["Retry-After"]) <= 31
        assert "CTXWEB_PROXY_KEY_MB_PER_MINUTE" in str(refused.value)
        # the other key's budget is whole: its big call goes, then it waits as well
        assert claude.messages.create(model="claude-test", max_tokens=16, messages=big).content
        with pytest.raises(anthropic.RateLimitError) as waiting:
            claude.messages.create(model="claude-test", max_tokens=16, messages=small)
        assert 25 <= int(waiting.value.response.headers["Retry-After"]) <= 31
        assert len(stand_in.requests) == before + 2  # the refused calls never left


@pytest.mark.embedded_server
@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_an_openai_responses_agent_is_recorded_too(
    server: tuple[str, str, Path], stand_in: StandIn, stream: bool
) -> None:
    url, key, _ = server
    session = f"responses-{stream}"
    client = openai_client(url, key, session)
    stand_in.then("Step one done.", "Step two done.")
    items: list[dict[str, Any]] = [{"role": "user", "content": "Do step one."}]
    if stream:
        with client.responses.stream(
            model="gpt-4o", instructions="Be terse.", input=items
        ) as events:
            answer = events.get_final_response()
    else:
        answer = client.responses.create(model="gpt-4o", instructions="Be terse.", input=items)
    assert answer.output_text == "Step one done."
    items += [
        {"role": "assistant", "content": answer.output_text},
        {"role": "user", "content": "Do step two."},
    ]
    client.responses.create(model="gpt-4o", instructions="Be terse.", input=items)
    detail = settle(url, key, session, 2)
    assert detail["format"] == "openai-responses"
    turns = api(url, key, f"sessions/{session}/turns")
    assert turns[1]["regions"]["system"] > 0
    assert turns[1]["regions"]["assistant"] > 0
    sent = stand_in.requests[-2:]
    for turn, request in zip(turns, sent, strict=True):
        assert turn["reported_input_tokens"] == max(1, len(json.dumps(request["input"])) // 4)


@pytest.mark.embedded_server
def test_a_host_the_site_does_not_serve_is_refused_before_anything_leaves(
    server: tuple[str, str, Path], stand_in: StandIn
) -> None:
    import http.client
    from urllib.parse import urlsplit

    url, key, _ = server
    before = len(stand_in.requests)
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
    conn.request(
        "POST",
        "/proxy/openai/v1/chat/completions",
        body=json.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}),
        headers={"Host": "evil.example", "X-Ctxweb-Key": key, "Content-Type": "application/json"},
    )
    answer = conn.getresponse()
    assert answer.status == 400
    assert json.loads(answer.read())["error"]["type"] == "invalid_request_error"
    assert len(stand_in.requests) == before


@pytest.mark.django_db(transaction=True)
def test_the_same_relay_answers_through_djangos_urls(
    stand_in: StandIn, settings: Any, django_user_model: Any
) -> None:
    """WSGI deployments and the test client reach the relay through ``ctxweb.proxy.urls``."""
    from django.test import Client

    from ctxweb.accounts.services import api_key_create, project_create
    from ctxweb.proxy.relay import recording_idle

    settings.CTXWEB_UPSTREAM_OPENAI = f"{stand_in.url}/v1"
    settings.CTXWEB_RATE_LIMIT = ""
    _, raw = api_key_create(project=project_create(name="through-django"))
    client = Client()
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
    refused = client.post(
        "/proxy/openai/v1/chat/completions", body, content_type="application/json"
    )
    assert refused.status_code == 401
    assert refused.json()["error"]["code"] == "invalid_api_key"
    # Each call runs in an event loop of its own (as under WSGI), which ends with the call: the
    # second and third must not reuse the first one's connection.
    stand_in.then("Hello from upstream.", "Again.", "Streamed.")
    for expected, stream in (
        ("Hello from upstream.", False),
        ("Again.", False),
        ("Streamed.", True),
    ):
        answered = client.post(
            "/proxy/openai/v1/chat/completions",
            {**body, "stream": stream},
            content_type="application/json",
            headers={"X-Ctxweb-Key": raw, "Authorization": f"Bearer {PROVIDER_KEY}"},
        )
        assert answered.status_code == 200
        if stream:
            assert answered["content-type"].startswith("text/event-stream")
            events = [
                json.loads(line.removeprefix("data: "))
                for line in answered.content.decode().splitlines()
                if line.startswith("data: {")
            ]
            text = "".join(e["choices"][0]["delta"].get("content") or "" for e in events)
            assert text == expected
        else:
            assert answered.json()["choices"][0]["message"]["content"] == expected
    assert stand_in.headers[-1]["authorization"] == f"Bearer {PROVIDER_KEY}"
    recording_idle(close=True)  # the recorder's connection, to this test's database


@pytest.mark.embedded_server
def test_only_the_agents_headers_go_upstream(
    server: tuple[str, str, Path], stand_in: StandIn
) -> None:
    """No header the agent did not send (a client's User-Agent, Accept or Content-Type) is
    added on the way up: the provider sees the agent's, with its host, the body's length and the
    encodings both the agent and the recorder read."""
    url, key, _ = server
    body = json.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "Hi"}]})
    port = int(url.rsplit(":", 1)[1])
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.putrequest("POST", "/proxy/openai/v1/chat/completions", skip_accept_encoding=True)
    for name, value in (
        ("Host", f"127.0.0.1:{port}"),
        ("X-Ctxweb-Key", key),
        ("X-Ctxweb-Session", "bare-headers"),
        ("Authorization", f"Bearer {PROVIDER_KEY}"),
        ("X-Agent-Trace", "t-1"),
        ("Content-Length", str(len(body))),
    ):
        connection.putheader(name, value)
    connection.endheaders(body.encode())
    answer = connection.getresponse()
    assert answer.status == 200, answer.read()
    answer.read()
    connection.close()
    assert set(stand_in.headers[-1]) == {
        "host",
        "authorization",
        "x-agent-trace",
        "content-length",
        "accept-encoding",
    }
    assert stand_in.headers[-1]["accept-encoding"] == "identity"
    assert stand_in.headers[-1]["content-length"] == str(len(body))
    settle(url, key, "bare-headers", 1)


def test_the_upstream_url_keeps_the_agents_path_and_query_as_sent() -> None:
    from ctxweb.proxy import relay

    base = "http://upstream.test/v1"
    assert str(relay._url(base, "files/a%2Fb", "x=%20y&z=1")) == (
        "http://upstream.test/v1/files/a%2Fb?x=%20y&z=1"
    )
    # a byte outside ASCII (each byte one character, as the server gave it) is percent-encoded
    assert str(relay._url(base, "files/caf\xe9", "")) == "http://upstream.test/v1/files/caf%E9"
    # a lone % is written as an escape
    assert str(relay._url(base, "files/50%", "")) == "http://upstream.test/v1/files/50%25"
    for bad in (("chat/comp\x7fletions", ""), ("chat/completions", "debug=\x7f"), ("a b", "")):
        with pytest.raises(relay._BadUrl):
            relay._url(base, *bad)


def test_the_upstream_is_reached_through_the_environments_proxy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``HTTP(S)_PROXY`` and ``NO_PROXY`` are honoured (read once per upstream)."""
    import asyncio

    import yarl

    from ctxweb.proxy import relay

    monkeypatch.setenv("HTTPS_PROXY", "http://user:secret@proxy.internal:3128")
    monkeypatch.setenv("NO_PROXY", "localhost,127.0.0.1")

    async def proxies() -> tuple[Any, Any]:
        clients = relay._clients()
        try:
            return (
                clients.proxy(yarl.URL("https://api.openai.com/v1")),
                clients.proxy(yarl.URL("http://127.0.0.1:9000/v1")),
            )
        finally:
            await relay.clients_close()

    far, near = asyncio.run(proxies())
    assert far == yarl.URL("http://user:secret@proxy.internal:3128")
    assert near is None


def test_the_servers_lifespan_closes_the_upstream_clients() -> None:
    import asyncio

    from ctxweb.proxy import relay
    from ctxweb.proxy.app import lifespan

    async def served() -> tuple[list[str], bool, bool]:
        messages = asyncio.Queue[dict[str, Any]]()
        sent: list[str] = []

        async def send(message: dict[str, Any]) -> None:
            sent.append(message["type"])

        running = asyncio.ensure_future(lifespan({"type": "lifespan"}, messages.get, send))
        await messages.put({"type": "lifespan.startup"})
        clients = relay._clients()  # a call made them
        await messages.put({"type": "lifespan.shutdown"})
        await asyncio.wait_for(running, 10)
        loop = asyncio.get_running_loop()
        return sent, clients.session.closed, loop in relay._CLIENTS

    sent, closed, kept = asyncio.run(served())
    assert sent == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert closed
    assert not kept
