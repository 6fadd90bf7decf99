"""Ingesting turns and reading them back through the REST API."""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
from typing import Any

import pytest
from channels.layers import InMemoryChannelLayer
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from compaction.messages import message_to_dict, parse
from ctxweb.contexts import events, selectors, services
from ctxweb.contexts.models import Message, Session, Turn
from tests.support.world import World

pytestmark = pytest.mark.django_db


def chat(*messages: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"model": "gpt-4o", "messages": list(messages), **extra}


SYSTEM = {"role": "system", "content": "You are a careful coding agent."}
ASK = {"role": "user", "content": "List the files in the repository."}
CALL = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "ls", "arguments": '{"path": "."}'},
        }
    ],
}
RESULT = {"role": "tool", "tool_call_id": "call_1", "content": "README.md\nsetup.py\nsrc/\n" * 50}


def post(client: Any, external_id: str, body: dict[str, Any]) -> Any:
    return client.post(
        f"/api/v1/sessions/{external_id}/turns",
        data=json.dumps(body),
        content_type="application/json",
    )


def test_it_ingests_a_first_turn_and_creates_the_session(world: World) -> None:
    response = post(
        world.api(world.ingest_key), "s1", {"format": "openai-chat", "request": chat(SYSTEM, ASK)}
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["session"] == "s1"
    assert body["index"] == 0
    assert body["context_window"] == 128_000  # gpt-4o from the model table
    assert sum(body["regions"].values()) == body["total_tokens"]
    assert body["regions"]["system"] > 0
    assert body["regions"]["user"] > 0
    assert body["usage_ratio"] == pytest.approx(body["total_tokens"] / 128_000)
    session = Session.objects.get(external_id="s1")
    assert session.encoding == "o200k_base"
    assert not session.approximate


def test_each_message_is_stored_once_across_turns(world: World) -> None:
    client = world.api(world.ingest_key)
    post(client, "s1", {"format": "openai-chat", "request": chat(SYSTEM, ASK)})
    post(client, "s1", {"format": "openai-chat", "request": chat(SYSTEM, ASK, CALL, RESULT)})
    third = post(
        client, "s1", {"format": "openai-chat", "request": chat(SYSTEM, ASK, CALL, RESULT, ASK)}
    )
    assert third.json()["index"] == 2
    assert Message.objects.count() == 4  # system, ask, call, result: the repeated ask is one row
    turns = client.get("/api/v1/sessions/s1/turns").json()
    assert [t["index"] for t in turns] == [0, 1, 2]
    assert turns[1]["regions"]["tool_results"] > turns[0]["regions"]["tool_results"] == 0
    assert all(sum(t["regions"].values()) == t["total_tokens"] for t in turns)


def test_the_turns_come_by_pages_after_an_index_with_a_link_to_the_next(world: World) -> None:
    client = world.api(world.ingest_key)
    history = [ASK]
    for n in range(5):
        history.append({"role": "user", "content": f"And step {n}?"})
        post(client, "s1", {"format": "openai-chat", "request": chat(*history)})
    every = client.get("/api/v1/sessions/s1/turns")
    assert [t["index"] for t in every.json()] == [0, 1, 2, 3, 4]
    assert "Link" not in every  # every turn: no page, no link (the contract's plain array)
    after = client.get("/api/v1/sessions/s1/turns?after=2")
    assert after.json() == every.json()[3:]
    assert "Link" not in after
    seen: list[int] = []
    url: str | None = "/api/v1/sessions/s1/turns?limit=2"
    links: list[str] = []
    while url:
        page = client.get(url)
        assert page.status_code == 200
        assert len(page.json()) <= 2
        seen += [t["index"] for t in page.json()]
        link = page.headers.get("Link")
        links.append(link or "")
        url = link.split(">", 1)[0].lstrip("<") if link else None
    assert seen == [0, 1, 2, 3, 4]
    assert links[0] == '<http://testserver/api/v1/sessions/s1/turns?after=1&limit=2>; rel="next"'
    assert links[1].endswith('turns?after=3&limit=2>; rel="next"')
    assert links[2] == ""
    exact = client.get("/api/v1/sessions/s1/turns?after=0&limit=4")  # the last page, full
    assert [t["index"] for t in exact.json()] == [1, 2, 3, 4]
    assert "Link" not in exact
    assert client.get("/api/v1/sessions/s1/turns?after=4").json() == []
    assert client.get("/api/v1/sessions/s1/turns?after=99&limit=1").json() == []
    for query, field in [
        ("limit=0", "limit"),
        ("limit=501", "limit"),
        ("limit=two", "limit"),
        ("after=-1", "after"),
        ("after=1.5", "after"),
        (f"after={2**63}", "after"),
    ]:
        refused = client.get(f"/api/v1/sessions/s1/turns?{query}")
        assert refused.status_code == 400, query
        assert field in refused.json()["error"]["fields"], (query, refused.json())
    assert world.api(world.outsider_key).get("/api/v1/sessions/s1/turns?limit=0").status_code == 404


def test_a_retried_turn_id_returns_the_same_turn(world: World) -> None:
    client = world.api(world.ingest_key)
    body = {"format": "openai-chat", "request": chat(SYSTEM, ASK), "turn_id": "t-1"}
    first = post(client, "s1", body)
    again = post(client, "s1", body)
    assert first.status_code == 201
    assert again.status_code == 200
    assert again.json()["index"] == first.json()["index"] == 0
    assert Turn.objects.count() == 1


def test_a_turn_id_reused_with_another_body_is_a_conflict(world: World) -> None:
    client = world.api(world.ingest_key)
    post(client, "s1", {"format": "openai-chat", "request": chat(SYSTEM, ASK), "turn_id": "t-1"})
    response = post(client, "s1", {"format": "openai-chat", "request": chat(ASK), "turn_id": "t-1"})
    assert response.status_code == 409
    assert response.json()["error"]["fields"] == {"turn_id": "reused with a different body"}
    assert Turn.objects.count() == 1


def test_a_retry_of_a_long_sessions_latest_turn_hashes_no_message_again(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The process that stored a turn knows its messages' hashes: a retry of it is recognized
    without hashing the whole context again (a late turn's retry cost a whole context's hashing);
    a conflicting body is still told apart."""
    client = world.api(world.ingest_key)
    history = [SYSTEM, ASK]
    for n in range(20):
        history += [
            {**CALL, "tool_calls": [{**CALL["tool_calls"][0], "id": f"call_{n}"}]},
            {**RESULT, "tool_call_id": f"call_{n}"},
        ]
        sent = {"format": "openai-chat", "request": chat(*history), "turn_id": f"t-{n}"}
        assert post(client, "long", sent).status_code == 201
    hashed: list[str] = []
    digest = hashlib.sha256

    def counting(data: bytes = b"") -> Any:
        hashed.append("x")
        return digest(data)

    monkeypatch.setattr("ctxweb.contexts.services._canonical.hashlib.sha256", counting)
    again = post(client, "long", sent)
    assert again.status_code == 200
    assert again.json()["index"] == 19
    # the API key's hash and the body's own two, not one per message (42 of them)
    assert len(hashed) <= 3
    hashed.clear()
    other = {**sent, "request": chat(*history[:-1], {**history[-1], "content": "changed"})}
    assert post(client, "long", other).status_code == 409
    assert len(hashed) > len(history)  # a mismatch: every former way of hashing is tried


def test_reported_usage_is_kept_and_the_excess_is_unattributed(world: World) -> None:
    body = {
        "format": "anthropic-messages",
        "request": {
            "model": "claude-sonnet-4-5",
            "max_tokens": 1024,
            "messages": [{"role": "user", "content": "hi"}],
        },
        "usage": {"input_tokens": 10, "cache_read_input_tokens": 5000, "output_tokens": 3},
    }
    response = post(world.api(world.ingest_key), "s1", body)
    data = response.json()
    assert data["reported_input_tokens"] == 5010  # Anthropic excludes cache reads: added back
    assert data["regions"]["unattributed"] == 5010 - sum(
        v for k, v in data["regions"].items() if k != "unattributed"
    )
    assert data["total_tokens"] == 5010
    assert Session.objects.get().approximate  # Claude has no public tokenizer


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"format": "nope", "request": {}}, "format"),
        ({"format": "openai-chat"}, "request"),
        (
            {
                "format": "openai-chat",
                "request": {"messages": [{"role": ["user"], "content": "x"}]},
            },
            "messages.0.role",
        ),
        (
            {
                "format": "openai-chat",
                "request": {
                    "messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]
                },
            },
            "messages.0.content.0.text",
        ),
        (
            {
                "format": "openai-chat",
                "request": {"messages": [{"role": "user", "content": "a\x00b"}]},
            },
            "messages.0",
        ),
    ],
)
def test_bad_input_gets_a_400_naming_the_field(
    world: World, body: dict[str, Any], field: str
) -> None:
    response = post(world.api(world.ingest_key), "s1", body)
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert any(path.startswith(field) for path in error["fields"]), error
    assert not Turn.objects.exists()


def test_malformed_json_is_a_400(world: World) -> None:
    response = world.api(world.ingest_key).post(
        "/api/v1/sessions/s1/turns", data="{not json", content_type="application/json"
    )
    assert response.status_code == 400
    assert "error" in response.json()


def test_a_body_over_the_limit_is_a_413(world: World, settings: Any) -> None:
    settings.CTXWEB_MAX_REQUEST_BYTES = 1000
    body = {"format": "openai-chat", "request": chat({"role": "user", "content": "x" * 5000})}
    response = post(world.api(world.ingest_key), "s1", body)
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "too_large"


def test_an_outsider_sees_nothing_of_the_project(world: World) -> None:
    post(world.api(world.ingest_key), "s1", {"format": "openai-chat", "request": chat(ASK)})
    outsider = world.api(world.outsider_key)
    assert outsider.get("/api/v1/sessions/s1").status_code == 404
    assert outsider.get("/api/v1/sessions/s1/turns").status_code == 404
    assert outsider.get("/api/v1/sessions/s1/turns/0").status_code == 404
    assert outsider.get("/api/v1/sessions").json()["count"] == 0
    logged_in = world.login(world.outsider)
    assert logged_in.get("/api/v1/sessions/s1").status_code == 404


def test_a_teammate_logged_in_reads_the_session(world: World) -> None:
    post(world.api(world.ingest_key), "s1", {"format": "openai-chat", "request": chat(ASK)})
    client = world.login(world.teammate)
    assert client.get("/api/v1/sessions/s1").json()["turn_count"] == 1


def test_a_viewer_logged_in_reads_but_does_not_post(world: World) -> None:
    body = {"format": "openai-chat", "request": chat(ASK)}
    response = post(world.login(world.teammate), "s1", body)
    assert response.status_code == 403
    error = response.json()["error"]
    assert error["code"] == "permission_denied"
    assert "Viewers read only" in error["message"]
    assert not Session.objects.exists()
    # the owner (an admin member) posts from the dashboard login, as any API key does
    assert post(world.login(world.owner), "s1", body).status_code == 201


def test_requests_without_credentials_or_with_a_revoked_key_are_refused(world: World) -> None:
    assert world.api().get("/api/v1/sessions").status_code in (401, 403)
    from ctxweb.accounts.models import ApiKey
    from ctxweb.accounts.services import api_key_revoke, hash_key

    api_key_revoke(key=ApiKey.objects.get(key_hash=hash_key(world.ingest_key)))
    response = world.api(world.ingest_key).get("/api/v1/sessions")
    assert response.status_code == 401
    assert response.json()["error"]["message"] == "Invalid or revoked API key."


def test_the_turn_detail_lists_messages_with_regions_and_tokens(world: World) -> None:
    client = world.api(world.ingest_key)
    post(client, "s1", {"format": "openai-chat", "request": chat(SYSTEM, ASK, CALL, RESULT)})
    detail = client.get("/api/v1/sessions/s1/turns/0").json()
    assert [m["role"] for m in detail["messages"]] == ["system", "user", "assistant", "tool"]
    assert [m["region"] for m in detail["messages"]] == [
        "system",
        "user",
        "tool_calls",
        "tool_results",
    ]
    assert all(m["tokens"] > 0 for m in detail["messages"])
    assert client.get("/api/v1/sessions/s1/turns/9").status_code == 404


def test_sessions_list_sorts_filters_and_pages(world: World) -> None:
    client = world.api(world.ingest_key)
    for name in ("a", "b", "c"):
        post(client, name, {"format": "openai-chat", "request": chat(ASK)})
    post(client, "b", {"format": "openai-chat", "request": chat(ASK, CALL, RESULT)})
    listing = client.get("/api/v1/sessions?sort=-fill&limit=2").json()
    assert listing["count"] == 3
    assert listing["results"][0]["external_id"] == "b"
    assert len(listing["results"]) == 2
    assert client.get("/api/v1/sessions?q=c").json()["count"] == 1
    assert client.get("/api/v1/sessions?sort=bogus").status_code == 400


def test_a_big_drop_between_turns_is_a_compaction_event(world: World) -> None:
    client = world.api(world.ingest_key)
    post(client, "s1", {"format": "openai-chat", "request": chat(SYSTEM, ASK, CALL, RESULT)})
    response = post(client, "s1", {"format": "openai-chat", "request": chat(SYSTEM, ASK)})
    events = response.json()["events"]
    assert events
    assert events[0]["type"] == "compaction"
    assert Session.objects.get().compaction_count == 1


def test_the_schema_and_docs_are_served_offline(world: World) -> None:
    client = world.login(world.owner)
    schema = client.get("/api/schema/")
    assert schema.status_code == 200
    assert b"/api/v1/sessions/{external_id}/turns" in schema.content
    docs = client.get("/api/docs/")
    assert docs.status_code == 200
    assert b"cdn" not in docs.content.lower()


def conversation(turns: int) -> list[dict[str, Any]]:
    """The messages of an agent's request after ``turns`` calls: each adds a call and its
    result."""
    messages: list[dict[str, Any]] = [SYSTEM, ASK]
    for n in range(turns):
        call = {**CALL, "tool_calls": [{**CALL["tool_calls"][0], "id": f"call_{n}"}]}
        messages += [call, {**RESULT, "tool_call_id": f"call_{n}", "content": f"file {n}\n" * 40}]
    return messages


def ingest(world: World, external_id: str, turns: int, turn_id: str | None = None) -> Turn:
    """Turn ``turns - 1`` of a session, ingested in process as the view does."""
    body = {"format": "openai-chat", "request": chat(*conversation(turns)), "turn_id": turn_id}
    context = services.turn_request_parse(
        project=world.project,
        external_id=external_id,
        format="openai-chat",
        request=body["request"],
    )
    return services.turn_ingest(
        project=world.project, external_id=external_id, context=context, turn_id=turn_id, body=body
    ).turn


def statements(queries: CaptureQueriesContext) -> list[str]:
    """The statements run, less transaction control (``BEGIN``, savepoints, ``COMMIT``)."""
    control = ("BEGIN", "SAVEPOINT", "RELEASE SAVEPOINT", "ROLLBACK", "COMMIT")
    return [q["sql"] for q in queries.captured_queries if not q["sql"].startswith(control)]


def assert_turn_holds(turn: Turn, turns: int) -> None:
    """The stored turn resolves to the context its body sent."""
    sent = parse("openai-chat", chat(*conversation(turns)))
    ids = selectors.turn_message_ids(session=turn.session, index=turn.index)
    rows = Message.objects.in_bulk(set(ids))
    assert set(rows) == set(ids)
    stored = selectors.turn_context(turn=turn, rows=[rows[i] for i in ids])
    assert stored.messages == sent.messages
    assert stored.system == sent.system


@pytest.mark.parametrize("batched", [True, False])
def test_a_late_turn_takes_the_same_few_statements_whatever_the_session_length(
    world: World, monkeypatch: pytest.MonkeyPatch, batched: bool
) -> None:
    if not batched:  # a driver binding parameters on the server sends one statement at a time
        options = connection.settings_dict["OPTIONS"]
        monkeypatch.setitem(options, "server_side_binding", True)
    for n in range(1, 40):
        ingest(world, "long", n)
    counts = []
    for n in (40, 41):
        with CaptureQueriesContext(connection) as queries:
            turn = ingest(world, "long", n, turn_id=f"t-{n}")
        counts.append(len(statements(queries)))
        assert_turn_holds(turn, n)
    # Lock and read the session, read its previous turn, insert the new messages; save the
    # session and insert the turn (one statement on PostgreSQL); then the attribution rollups'
    # writes (five for this conversation's turns), which read nothing back. PostgreSQL gets
    # them in two round trips when its driver may batch statements: the rollups' writes go
    # with the turn's insert.
    if connection.vendor != "postgresql":
        assert counts == [10, 10]
    else:
        assert counts == ([2, 2] if batched else [9, 9])


def test_a_turn_whose_previous_turn_another_process_wrote_is_stored_whole(
    world: World,
) -> None:
    for n in range(1, 4):
        ingest(world, "s1", n)
    # Another process stores turn 4: what this one remembers is stale, yet the messages it
    # guesses new for turn 5 (turn 4's among them) are inserted with the lock, once.
    with services.as_another_process():
        assert_turn_holds(ingest(world, "s1", 4), 4)
    turn = ingest(world, "s1", 5)
    assert_turn_holds(turn, 5)
    distinct = {json.dumps(m, sort_keys=True) for m in conversation(5)}
    assert Message.objects.count() == len(distinct)  # each stored once
    assert_turn_holds(ingest(world, "s1", 6), 6)


def fail_after_storing(world: World, external_id: str, turns: int) -> None:
    """A request that stored its turn, then failed: all it wrote is rolled back."""
    with transaction.atomic():
        ingest(world, external_id, turns)
        raise RuntimeError("the request failed")


def test_a_turn_rolled_back_is_never_taken_for_the_previous_one(world: World) -> None:
    for n in range(1, 4):
        ingest(world, "s1", n)
    with pytest.raises(RuntimeError):
        fail_after_storing(world, "s1", 4)
    turn = ingest(world, "s1", 5)
    assert turn.index == 3
    assert_turn_holds(turn, 5)


def test_a_turn_stored_elsewhere_in_place_of_one_rolled_back_is_told_from_it(
    world: World,
) -> None:
    for n in range(1, 4):
        ingest(world, "s1", n)
    with pytest.raises(RuntimeError):
        fail_after_storing(world, "s1", 4)
    # Another process stores another turn in its place: SQLite may give it the same keys.
    other = conversation(4)
    other[-1] = {**other[-1], "content": "another output"}
    context = parse("openai-chat", chat(*other))
    with services.as_another_process():
        services.turn_ingest(project=world.project, external_id="s1", context=context)
    turn = ingest(world, "s1", 5)
    assert_turn_holds(turn, 5)


def test_turns_stored_elsewhere_after_one_rolled_back_are_told_from_it(world: World) -> None:
    """This process remembers a turn that was rolled back; other processes then store that
    turn's place and the next: the remembered messages are not taken for the session's."""
    for n in range(1, 4):
        ingest(world, "s1", n)
    with pytest.raises(RuntimeError):
        fail_after_storing(world, "s1", 4)
    other = conversation(4)
    other[-1] = {**other[-1], "content": "another output"}
    with services.as_another_process():
        context = parse("openai-chat", chat(*other))
        services.turn_ingest(project=world.project, external_id="s1", context=context)
        context = parse("openai-chat", chat(*other, *conversation(5)[len(other) :]))
        services.turn_ingest(project=world.project, external_id="s1", context=context)
    following = [*other, *conversation(6)[len(other) :]]
    turn = services.turn_ingest(
        project=world.project,
        external_id="s1",
        context=parse("openai-chat", chat(*following)),
    ).turn
    ids = selectors.turn_message_ids(session=turn.session, index=turn.index)
    rows = Message.objects.in_bulk(set(ids))
    stored = selectors.turn_context(turn=turn, rows=[rows[i] for i in ids])
    assert stored.messages == parse("openai-chat", chat(*following)).messages


def round_robin_turn(world: World, n: int, on_commit: Any) -> None:
    """Turn ``n - 1`` of session s1 as round robin over three processes stores it: this process
    stores every third turn, another process the others; each turn committed (processes learn
    of others' turns through commits)."""
    with on_commit(execute=True):
        if n % 3 == 0:
            assert_turn_holds(ingest(world, "s1", n), n)
        else:
            with services.as_another_process():
                assert_turn_holds(ingest(world, "s1", n), n)


def test_turns_in_turn_with_other_processes_are_stored_whole(
    world: World, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> None:
    """Round robin over three processes: each stores every third turn, remembering its own, and
    takes what it remembers of the session's messages from there."""
    continued = []
    read, rebuilt = selectors.turn_message_ids_after, selectors.turn_message_ids_rebuilt

    def spy_read(**call: Any) -> list[int] | None:
        continued.append(("read", read(**call)))
        return continued[-1][1]

    def spy_rebuilt(*args: Any, **call: Any) -> list[int] | None:
        continued.append(("with the lock", rebuilt(*args, **call)))
        return continued[-1][1]

    monkeypatch.setattr(selectors, "turn_message_ids_after", spy_read)
    monkeypatch.setattr(selectors, "turn_message_ids_rebuilt", spy_rebuilt)
    for n in range(1, 12):
        round_robin_turn(world, n, django_capture_on_commit_callbacks)
    distinct = {json.dumps(m, sort_keys=True) for m in conversation(11)}
    assert Message.objects.count() == len(distinct)
    # turns 6 and 9 (turn 3 had only another process's before it); turn 9 read the turns since
    # its process's turn 6 with the session's lock, in the same round trip
    assert [how for how, _ in continued] == ["read", "with the lock"]
    assert all(ids is not None for _, ids in continued)


def test_a_process_behind_round_robin_counts_only_what_no_process_stored(
    world: World, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> None:
    """Once a process has found that others store a session's turns between its own (round
    robin), it looks the messages since up before counting them: it counts only those that no
    process stored (it used to count every message since its own previous turn)."""
    from ctxweb.contexts.services import storage

    counted: list[Any] = []
    count = storage.message_regions

    def spy(message: Any, counter: Any) -> Any:
        counted.append(message)
        return count(message, counter)

    monkeypatch.setattr(storage, "message_regions", spy)
    for n in range(1, 12):
        counted.clear()
        round_robin_turn(world, n, django_capture_on_commit_callbacks)
        if n == 9:  # its previous turn (6) was already behind others' (4 and 5)
            new = len(conversation(9)) - len(conversation(8))
            assert len(counted) == new, (len(counted), new)


def test_a_retry_of_a_turn_hashed_the_former_way_is_still_recognized(world: World) -> None:
    client = world.api(world.ingest_key)
    body = {"format": "openai-chat", "request": chat(SYSTEM, ASK), "turn_id": "t-1"}
    assert post(client, "s1", body).status_code == 201

    # Turns stored before hashed the body with its messages' hashes listed in their place:
    # the SHA-256 of canonical JSON (sorted keys, no spaces, UTF-8).
    def sha256(value: Any) -> str:
        text = json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    context = parse("openai-chat", body["request"])
    hashes = [sha256(message_to_dict(m)) for m in context.messages]
    listed = {**body, "request": {**body["request"], "messages": {"ctxweb:message_hashes": hashes}}}
    Turn.objects.update(body_hash=sha256(listed))
    assert post(client, "s1", body).status_code == 200
    other = {**body, "request": chat(SYSTEM, ASK, CALL, RESULT)}
    assert post(client, "s1", other).status_code == 409


def json_hashed(body: dict[str, Any]) -> str:
    """A body's idempotency hash as json wrote canonical JSON (sorted keys, no spaces)."""

    def sha256(value: Any) -> str:
        text = json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    request = body["request"]
    hashes = [sha256(message_to_dict(m)) for m in parse("openai-chat", request).messages]
    joined = hashlib.sha256("".join(hashes).encode()).hexdigest()
    return sha256({**body, "request": {**request, "messages": {"ctxweb:messages_sha256": joined}}})


def test_a_body_is_hashed_as_json_wrote_it_but_for_floats_exponents(world: World) -> None:
    """Bodies are hashed as msgspec writes canonical JSON: json's bytes, so the hashes stored
    before still stand, but for a float's exponent (``1e-7``, where json wrote ``1e-07``); a
    turn hashed json's way keeps its retries even then."""
    client = world.api(world.ingest_key)
    request = {**chat(SYSTEM, ASK, CALL, RESULT), "temperature": 0.25, "max_tokens": 9, "n": 1}
    body = {"format": "openai-chat", "request": request, "turn_id": "t-1"}
    assert post(client, "s1", body).status_code == 201
    assert Turn.objects.get().body_hash == json_hashed(body)

    request = {**chat(SYSTEM, ASK), "temperature": 1e-07, "top_p": 1e16}
    body = {"format": "openai-chat", "request": request, "turn_id": "t-1"}
    assert post(client, "s2", body).status_code == 201
    turn = Turn.objects.get(session__external_id="s2")
    assert turn.body_hash != json_hashed(body)  # the exponents differ
    Turn.objects.filter(pk=turn.pk).update(body_hash=json_hashed(body))
    assert post(client, "s2", body).status_code == 200
    other = {**body, "request": {**request, "temperature": 2e-07}}
    assert post(client, "s2", other).status_code == 409


@pytest.mark.parametrize("synchronous", [True, False])
def test_a_turn_commits_without_waiting_for_the_disk_only_when_configured(
    world: World, settings: Any, synchronous: bool
) -> None:
    settings.CTXWEB_INGEST_SYNCHRONOUS_COMMIT = synchronous
    ingest(world, "s1", 1)
    with CaptureQueriesContext(connection) as queries:
        turn = ingest(world, "s1", 2)
    assert_turn_holds(turn, 2)
    sent = " ".join(q["sql"] for q in queries.captured_queries)
    if connection.vendor != "postgresql":  # SQLite's commit is set once for all (WAL, NORMAL)
        assert "synchronous_commit" not in sent
        return
    assert ("SET LOCAL synchronous_commit TO OFF" in sent) is not synchronous
    with connection.cursor() as cursor:  # in the test's transaction, which holds the turn's
        cursor.execute("SHOW synchronous_commit")
        assert cursor.fetchone()[0] == ("on" if synchronous else "off")


def test_a_turn_nobody_watches_is_not_sent_to_the_in_memory_layer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sent: list[str] = []

    async def group_send(self: Any, group: str, message: dict[str, Any]) -> None:
        sent.append(group)

    monkeypatch.setattr(events, "get_channel_layer", InMemoryChannelLayer)
    monkeypatch.setattr(InMemoryChannelLayer, "group_send", group_send)
    assert events.publish(1, {"type": "turn.created"}) is True
    assert sent == []


class RecordingLayer:
    """An out-of-process layer, as channels-redis is: records where each send ran."""

    def __init__(self) -> None:
        self.sends: list[tuple[str, asyncio.AbstractEventLoop, str]] = []

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        loop = asyncio.get_running_loop()
        self.sends.append((group, loop, threading.current_thread().name))


def test_publishing_reuses_one_loop_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    layer = RecordingLayer()
    monkeypatch.setattr(events, "get_channel_layer", lambda: layer)
    monkeypatch.setattr(events, "_paused_until", 0.0)
    assert events.publish(7, {"type": "turn.created"}) is True
    assert events.publish(7, {"type": "turn.created"}) is True
    (group, first, thread), (_, second, _) = layer.sends
    assert group == "session-7"
    assert first is second  # not a new loop (and thread) a publish
    assert thread == "ctxweb-publish"


class HungLayer:
    """A layer that never acknowledges a send (a frozen Redis)."""

    def __init__(self) -> None:
        self.started = 0
        self.cancelled = threading.Event()

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        self.started += 1
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise


def test_a_hung_send_is_abandoned_and_publishing_pauses(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    layer = HungLayer()
    monkeypatch.setattr(events, "get_channel_layer", lambda: layer)
    monkeypatch.setattr(events, "PUBLISH_SECONDS", 0.05)
    monkeypatch.setattr(events, "_paused_until", 0.0)
    assert events.publish(1, {"type": "turn.created"}) is False
    assert "could not publish turn.created" in caplog.text
    assert layer.cancelled.wait(5)  # the abandoned send does not linger on the loop
    assert events.publish(1, {"type": "turn.created"}) is False  # paused: not even tried
    assert layer.started == 1


BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"


def test_the_api_speaks_json_only_even_to_a_browser(world: World) -> None:
    """No browsable HTML pages of the API: a browser (signed in to the dashboard, so its
    session authenticates) gets the JSON a client gets; a client that accepts only HTML is
    told so in the API's error shape."""
    client = world.login(world.owner)
    listing = client.get("/api/v1/sessions", HTTP_ACCEPT=BROWSER_ACCEPT)
    assert listing.status_code == 200
    assert listing["Content-Type"] == "application/json"
    assert "results" in listing.json()
    for accept in (None, "*/*", "application/json", "application/*", "application/json; q=1"):
        extra = {} if accept is None else {"HTTP_ACCEPT": accept}
        answered = client.get("/api/v1/sessions", **extra)
        assert answered.status_code == 200, accept
        assert answered["Content-Type"] == "application/json", accept
    refused = client.get("/api/v1/sessions", HTTP_ACCEPT="text/html")
    assert refused.status_code == 406
    assert refused["Content-Type"] == "application/json"
    assert refused.json()["error"]["code"] == "not_acceptable"


def _copies(turn: Turn, count: int) -> None:
    """``count`` more turns of ``turn``'s session, copies of it (each its own index)."""
    fields = {
        f.attname: getattr(turn, f.attname)
        for f in Turn._meta.concrete_fields
        if f.attname not in ("id", "index", "turn_id")
    }
    Turn.objects.bulk_create(
        [Turn(**fields, index=turn.index + n) for n in range(1, count + 1)], batch_size=500
    )


def _peak_reading(client: Any, url: str) -> int:
    """The most memory Python held while the answer to ``url`` was made and read, its bytes
    each let go once read (as a client writing them to a file): what the server holds."""
    import tracemalloc

    tracemalloc.start()
    try:
        response = client.get(url)
        assert response.status_code == 200
        chunks = response.streaming_content if response.streaming else [response.content]
        size = sum(len(chunk) for chunk in chunks)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert size > 0
    return peak


def test_every_turn_goes_out_a_page_at_a_time_in_bounded_memory(
    world: World, settings: Any
) -> None:
    settings.CTXWEB_TURN_LIST_PAGE = 50
    client = world.api(world.ingest_key)
    for session in ("short", "long"):
        post(client, session, {"format": "openai-chat", "request": chat(SYSTEM, ASK, CALL, RESULT)})
    first = {t.session.external_id: t for t in Turn.objects.select_related("session")}
    _copies(first["short"], 99)
    _copies(first["long"], 799)

    every = client.get("/api/v1/sessions/long/turns")
    assert every.streaming
    assert every["Content-Type"] == "application/json"
    turns = every.json()
    assert [t["index"] for t in turns] == list(range(800))  # pages of 50, none twice or missed
    paged: list[dict[str, Any]] = []
    url: str | None = "/api/v1/sessions/long/turns?limit=500"
    while url:
        page = client.get(url)
        paged += page.json()
        link = page.headers.get("Link")
        url = link.split(">", 1)[0].lstrip("<") if link else None
    assert turns == paged  # the same turns, the same shape, as the pages say them
    assert client.get("/api/v1/sessions/long/turns?after=749").json() == paged[750:]
    assert client.get("/api/v1/sessions/long/turns?after=799").json() == []
    assert client.get("/api/v1/sessions/long/turns?after=100").json()[0]["index"] == 101

    # The least of three reads each: tracemalloc counts every thread's allocations, and a
    # thread another test left (a recorder finishing) may allocate during one read.
    short = min(_peak_reading(client, "/api/v1/sessions/short/turns") for _ in range(3))
    long = min(_peak_reading(client, "/api/v1/sessions/long/turns") for _ in range(3))
    # eight times the turns: the whole array built at once held about six times as much
    # (0.6 MB and 4.7 MB when it was; a page at a time, 0.53 MB and 0.54 MB)
    assert long < 2 * short, (short, long)
