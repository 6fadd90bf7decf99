"""The proxy's memory of conversations is looked up by a bounded number of digests a query: a
call of a long session asks for its last prefixes only (where the conversation it extends almost
always ends), and the answer is the one every prefix would give: the session of the longest
remembered prefix of the key (of the named session, when one is named), within the hour."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from compaction.messages import message_identity, parse
from compaction.messages.model import Message
from ctxweb.contexts.models import ProxyConversation
from ctxweb.contexts.services import proxying

pytestmark = pytest.mark.django_db

KEY = 7


def remember(hashes: tuple[str, ...], external_id: str, *, key: int = KEY, age: int = 0) -> None:
    ProxyConversation.objects.create(
        key_id=key,
        digest=proxying._prefix_digests(hashes)[-1],
        external_id=external_id,
        remembered_at=timezone.now() - timedelta(seconds=age),
    )


def every_prefix(key: int, hashes: tuple[str, ...], external_id: str | None = None) -> str | None:
    """What the memory says when every prefix is looked up: the longest remembered one's
    session (the lookup as it was, one parameter a message)."""
    since = timezone.now() - timedelta(seconds=proxying.RECENT_SECONDS)
    rows = dict(
        ProxyConversation.objects.filter(key_id=key, remembered_at__gte=since).values_list(
            "digest", "external_id"
        )
    )
    found = None
    for digest in proxying._prefix_digests(hashes):
        if digest in rows and external_id in (None, rows[digest]):
            found = rows[digest]
    return found


@contextmanager
def parameters() -> Iterator[list[int]]:
    """How many parameters each query sent within the block had."""
    counts: list[int] = []

    def count(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        counts.append(len(params or ()))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(count):
        yield counts


def history(length: int, tag: str = "m") -> tuple[str, ...]:
    return tuple(f"{tag}{n}" for n in range(length))


def test_a_long_sessions_call_asks_for_its_last_prefixes_only() -> None:
    call = history(3000)
    remember(call[:2990], "long")
    with parameters() as sent:
        assert proxying._joined(KEY, call) == "long"
    assert len(sent) == 1
    assert sent[0] <= proxying.NEAR_PREFIXES + 2  # the key and the hour beside the digests


def test_a_conversation_far_back_is_still_found_when_the_memory_is_small() -> None:
    call = history(3000)
    remember(call[:100], "far")
    remember(history(50, "other"), "other")
    with parameters() as sent:
        assert proxying._joined(KEY, call) == "far"
    assert len(sent) == 2  # the near prefixes, then the key's memory whole
    assert max(sent) <= proxying.NEAR_PREFIXES + 2


def test_a_busy_keys_memory_is_asked_by_bounded_chunks_longest_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(proxying, "NEAR_PREFIXES", 4)
    monkeypatch.setattr(proxying, "FAR_PREFIXES", 8)
    call = history(40)
    for n in range(12):  # more conversations than the memory is read whole for
        remember(history(3, f"busy{n}-"), f"busy{n}")
    remember(call[:30], "nearer")
    remember(call[:5], "older")
    with parameters() as sent:
        assert proxying._joined(KEY, call) == "nearer"
    # near (36..40), the memory's first rows (too many), then 28..36: found, nothing further
    assert len(sent) == 3
    assert max(sent) <= 8 + 3


def test_a_named_sessions_call_finds_only_its_own_conversation() -> None:
    call = history(200)
    remember(call[:150], "named")
    remember(call[:199], "another")
    assert proxying._joined(KEY, call) == "another"
    assert proxying._joined(KEY, call, external_id="named") == "named"
    assert proxying._joined(KEY, call, external_id="third") is None


@pytest.mark.parametrize("seed", range(40))
def test_the_lookup_answers_what_looking_up_every_prefix_answers(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Random memories (near, far, branched, unrelated, another key's, expired) and calls, with
    bounds small enough that each way of looking up is taken (the near prefixes alone, the
    memory read whole, the memory asked by chunks)."""
    monkeypatch.setattr(proxying, "NEAR_PREFIXES", 4)
    monkeypatch.setattr(proxying, "FAR_PREFIXES", 8)
    rng = random.Random(seed)
    call = history(rng.randint(0, 60))
    sessions = ["a", "b", "c"]
    for _ in range(rng.randint(0, 30)):
        kind = rng.choice(["prefix", "prefix", "branch", "unrelated", "other key", "expired"])
        length = rng.randint(1, max(1, len(call)))
        prefix = call[:length] or ("lone",)
        if kind in ("branch", "unrelated"):
            prefix = (*prefix[:-1], f"{kind}{rng.random()}")
        if kind == "unrelated":
            prefix = prefix[-1:]
        ProxyConversation.objects.update_or_create(
            key_id=KEY + 1 if kind == "other key" else KEY,
            digest=proxying._prefix_digests(prefix)[-1],
            defaults={
                "external_id": rng.choice(sessions),
                "remembered_at": timezone.now()
                - timedelta(seconds=proxying.RECENT_SECONDS + 60 if kind == "expired" else 0),
            },
        )
    assert proxying._joined(KEY, call) == every_prefix(KEY, call)
    for session in sessions:
        assert proxying._joined(KEY, call, external_id=session) == every_prefix(KEY, call, session)


# --- identities reused from a conversation's previous call ----------------------------------------


def chat(*contents: Any) -> tuple[Message, ...]:
    """An OpenAI chat request's messages, parsed as the recorder parses them."""
    items = [{"role": "user", "content": content} for content in contents]
    return parse("openai-chat", {"model": "gpt-4o", "messages": items}).messages


@pytest.fixture
def identities() -> Iterator[None]:
    proxying.proxy_memory_clear()
    yield
    proxying.proxy_memory_clear()


@pytest.mark.parametrize("seed", range(20))
def test_identities_reused_from_the_previous_call_are_those_computed_afresh(
    seed: int, identities: None
) -> None:
    """Calls that extend, rewrite the middle of, or branch off their session's previous call,
    across sessions of one key and two keys: every identity as ``message_identity`` gives it."""
    rng = random.Random(seed)
    conversations: dict[tuple[int, str | None], list[Any]] = {}
    for _ in range(30):
        slot = (rng.choice([1, 2]), rng.choice(["a", "b", None]))
        contents = conversations.setdefault(slot, [])
        change = rng.choice(["extend", "extend", "rewrite", "retype", "cut"])
        if change == "rewrite" and contents:
            contents[rng.randrange(len(contents))] = f"rewritten {rng.random()}"
        elif change == "retype" and contents:  # equal in Python, another JSON: another identity
            at = rng.randrange(len(contents))
            contents[at] = [{"type": "text", "text": "x", "n": rng.choice([1, 1.0, True])}]
        elif change == "cut":
            del contents[rng.randrange(len(contents) + 1) :]
        contents += [f"message {rng.random()}" for _ in range(rng.randint(1, 4))]
        messages = chat(*contents)
        found = proxying._identities(slot[0], slot[1], messages, 100)
        assert found == tuple(message_identity(m) for m in messages)


@pytest.mark.parametrize("seed", range(10))
def test_a_call_parsed_from_its_slots_last_parse_is_the_call_parsed_afresh(
    seed: int, identities: None
) -> None:
    """The recorder's parse (:func:`proxying._parsed`) reuses the last call's of the same key,
    session and first message: over extends, rewrites, type changes and cuts, the context is
    ``parse``'s, and the messages it repeats are the very objects of the last call's parse."""
    rng = random.Random(seed)
    conversations: dict[tuple[int, str | None, str], list[Any]] = {}
    last: dict[tuple[int, str | None, str], tuple[Message, ...]] = {}
    last_items: dict[tuple[int, str | None, str], list[Any]] = {}
    reused = 0
    for _ in range(40):
        slot = (rng.choice([1, 2]), rng.choice(["a", None]), rng.choice(["main", "side"]))
        contents = conversations.setdefault(slot, [slot[2]])
        change = rng.choice(["extend", "extend", "extend", "rewrite", "retype", "cut"])
        if change == "rewrite" and len(contents) > 1:
            contents[rng.randrange(1, len(contents))] = f"rewritten {rng.random()}"
        elif change == "retype" and len(contents) > 1:
            at = rng.randrange(1, len(contents))
            contents[at] = [{"type": "text", "text": "x", "n": rng.choice([1, 1.0, True])}]
        elif change == "cut":
            del contents[rng.randrange(1, len(contents) + 1) :]
        contents += [f"message {rng.random()}" for _ in range(rng.randint(1, 3))]
        items = [{"role": "user", "content": content} for content in contents]
        request = {"model": "gpt-4o", "messages": json.loads(json.dumps(items))}
        context = proxying._parsed(slot[0], slot[1], "openai-chat", request, 100)
        assert context == parse("openai-chat", request)
        before = last.get(slot, ())
        same = [
            n for n, message in enumerate(context.messages[: len(before)]) if message is before[n]
        ]
        reused += len(same)
        for n in same:  # only a message equal in its JSON is taken from the last parse
            assert json.dumps(items[n]) == json.dumps(last_items[slot][n])
        last[slot], last_items[slot] = context.messages, items
    assert reused > 40


def test_a_value_of_another_type_is_not_taken_for_the_same_message(identities: None) -> None:
    one = chat([{"type": "text", "text": "x", "n": 1}])
    true = chat([{"type": "text", "text": "x", "n": True}])
    assert one == true  # as Python compares them
    proxying._identities(KEY, "s", one, 100)
    assert proxying._identities(KEY, "s", true, 100) == (message_identity(true[0]),)
    assert message_identity(true[0]) != message_identity(one[0])


def test_the_identities_kept_are_bounded_in_calls_and_bytes(
    identities: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(proxying, "IDENTITIES_KEPT", 3)
    monkeypatch.setattr(proxying, "IDENTITIES_BYTES", 1000)
    for session in "abcd":
        proxying._identities(KEY, session, chat(session), 100)
    assert [slot[1] for slot in proxying._IDENTITIES] == ["b", "c", "d"]
    proxying._identities(KEY, "e", chat("e"), 250)  # at most a quarter of the bytes: kept
    proxying._identities(KEY, "f", chat("f"), 251)  # more: computed, not kept
    assert [slot[1] for slot in proxying._IDENTITIES] == ["c", "d", "e"]
    monkeypatch.setattr(proxying, "IDENTITIES_KEPT", 10)
    for session in "ghij":
        proxying._identities(KEY, session, chat(session), 250)
    # c, d (100 each), e, g, h, i, j (250 each) are over 1000: the oldest go until they are not
    assert [slot[1] for slot in proxying._IDENTITIES] == ["g", "h", "i", "j"]
    assert sum(entry[2] for entry in proxying._IDENTITIES.values()) == 1000
    # the parses are kept within the same bounds
    for session in "klmnop":
        request = {"model": "gpt-4o", "messages": [{"role": "user", "content": session}]}
        proxying._parsed(KEY, session, "openai-chat", request, 250)
    proxying._parsed(KEY, "q", "openai-chat", request, 251)  # more than a quarter: not kept
    assert [slot[1] for slot in proxying._PARSES] == ["m", "n", "o", "p"]


def test_a_side_call_between_two_main_calls_does_not_cost_the_next_its_identities(
    identities: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session's side calls (a title, a summary: another first message) come between its main
    calls: the next main call still reuses the last main call's identities."""
    computed: list[Message] = []
    real = proxying.message_identity

    def counted(message: Message) -> str:
        computed.append(message)
        return real(message)

    monkeypatch.setattr(proxying, "message_identity", counted)
    main = [f"main {n}" for n in range(10)]
    proxying._identities(KEY, "s", chat(*main), 100)
    proxying._identities(KEY, "s", chat("Write a title for this conversation.", "x"), 100)
    computed.clear()
    later = chat(*main, "one more")
    assert proxying._identities(KEY, "s", later, 100) == tuple(real(m) for m in later)
    assert computed == [later[0], later[-1]]  # the first (which slot) and the new one
