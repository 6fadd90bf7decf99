"""The real coding agents through the recording proxy: Claude Code and Codex, the npm releases
pinned in ``agents/``, run headless (``claude -p``, ``codex exec``) with their default settings,
configured as the Connect page says and with no ``X-Ctxweb-Session`` header, through a live ctxweb
(uvicorn) whose upstreams are scripted loopback stand-ins (:mod:`tests.support.agents`).

Each conversation is a prompt, two tool rounds and a final text. What ctxweb must make of it: one
session for the conversation and one turn per model call, side calls (Claude Code's title) in
sessions apart, configuration in its regions (system, tools), tool pairs intact, no API item
stored as JSON text, the provider key stored nowhere. Then managed mode: an operator applies
``ctxweb-auto``; the agent continues the conversation (``claude -p --continue``, ``codex exec
resume --last``) with ``X-Ctxweb-Managed: 1``; the provider receives less than the agent's
history, with every tool and instruction the agent sent, and the agent finishes its task.

The agents' tests are skipped when the agents are not installed (``make install-agents``); under
``CI=true`` that is a failure. ``HEAD`` on the proxy is tested without them.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.support.agents import (
    FINAL_TEXT,
    NOTES,
    NOTES_TEXT,
    PROVIDER_KEY,
    STALL,
    AgentRun,
    AgentStandIn,
    Received,
    Tap,
    agent_stand_in,
    claude_command,
    require_agents,
    run_claude,
    run_codex,
    tap,
)
from tests.support.servers import LiveServer, create_key, embedded_env, live_server

pytestmark = [pytest.mark.agents, pytest.mark.slow]

PROMPT = "Read notes.txt and tell me the answer."
AGAIN = "Read the notes again and tell me how many lines they have."
#: What the operator applies before the agent goes on: the agent's tool outputs are compacted
#: (configuration and the conversation's text never are).
COMPACTION = {
    "strategy": "ctxweb-auto",
    "params": {
        "target_tokens": 2000,
        "latest_turn": "outputs",
        "keep_recent_outputs": 0,
        "max_step": "compact",
    },
}
#: The agents and how each is run: Claude Code; Codex with its default model (tools inside
#: ``input``, a custom ``exec`` tool); Codex with a model of classic function tools, which
#: worked before issue 32 and must keep working.
AGENTS = {"claude": [], "codex": [], "codex-classic": ["-m", "gpt-5.1-codex"]}
#: How long the recording of an agent's calls may take (it follows each answer, in a thread).
RECORDING_SECONDS = 20
#: The types of API items (Anthropic content blocks, Responses input items): a stored text that
#: is one of these as JSON is an item that was not understood.
ITEM_TYPES = {
    "text",
    "image",
    "document",
    "tool_use",
    "tool_result",
    "thinking",
    "redacted_thinking",
    "server_tool_use",
    "web_search_tool_result",
    "message",
    "input_text",
    "output_text",
    "function_call",
    "function_call_output",
    "custom_tool_call",
    "custom_tool_call_output",
    "additional_tools",
    "reasoning",
    "web_search_call",
    "local_shell_call",
    "local_shell_call_output",
    "mcp_call",
    "mcp_list_tools",
    "compaction",
    "namespace",
    "function",
    "custom",
}


# --- the world: stand-ins, a live ctxweb, one project per agent ------------------------------


@dataclass
class World:
    server: LiveServer
    api: AgentStandIn
    #: Between the agents and ctxweb: what the agents sent, before managed mode changed it.
    tap: Tap
    data: Path
    root: Path
    workdir: Path
    keys: dict[str, str]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("agents")
    workdir = root / "work"
    workdir.mkdir()
    (workdir / NOTES).write_text(NOTES_TEXT)
    with agent_stand_in(workdir) as api:
        env = embedded_env(
            root / "data",
            CTXWEB_UPSTREAM_ANTHROPIC=f"{api.url}/v1",
            CTXWEB_UPSTREAM_OPENAI=f"{api.url}/v1",
            CTXWEB_RATE_LIMIT="",
            CTXWEB_RATE_LIMIT_COSTLY="",
        )
        keys = {agent: create_key(env, project=agent) for agent in AGENTS}
        keys["interrupted"] = create_key(env, project="interrupted")  # a project of its own
        with live_server(env) as server, tap(server.url) as tapped:
            yield World(server, api, tapped, root / "data", root, workdir, keys)


def call(world: World, agent: str, method: str, path: str, body: Any = None) -> Any:
    request = urllib.request.Request(
        f"{world.server.url}/api/v1/{path}",
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={
            "Authorization": f"Bearer {world.keys[agent]}",
            "Content-Type": "application/json",
        },
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())


def wait(check: Callable[[], Any], what: str, seconds: float = 60) -> Any:
    deadline = time.monotonic() + seconds
    value = None
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"{what}: not within {seconds:.0f} s (last: {value!r})")


def quoted(external_id: str) -> str:
    return urllib.parse.quote(external_id, safe="")


@dataclass
class Recorded:
    """A project's sessions as the API shows them: each with its turns (``GET .../turns``) and
    its latest turn whole (``GET .../turns/{index}``)."""

    sessions: list[dict[str, Any]]
    turns: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    latest: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def turn_count(self) -> int:
        return sum(len(turns) for turns in self.turns.values())

    def largest(self) -> str:
        """The session with the most turns (the conversation's, when it is one session)."""
        assert self.turns, "no session was recorded"
        return max(self.turns, key=lambda external_id: len(self.turns[external_id]))


def recorded(world: World, agent: str, calls: int) -> Recorded:
    """The project's sessions once ``calls`` model calls are recorded (recording follows the
    answer: wait for it), or as they are after ``RECORDING_SECONDS`` (a call that is never
    recorded: the tests say what is missing)."""

    def turns_so_far() -> int:
        sessions = call(world, agent, "GET", "sessions?limit=100")["results"]
        return sum(s["turn_count"] for s in sessions)

    with contextlib.suppress(AssertionError):
        wait(lambda: turns_so_far() >= calls, f"{calls} recorded calls", RECORDING_SECONDS)
    state = Recorded(call(world, agent, "GET", "sessions?limit=100")["results"])
    for session in state.sessions:
        external_id = session["external_id"]
        turns = call(world, agent, "GET", f"sessions/{quoted(external_id)}/turns")
        state.turns[external_id] = turns
        if turns:
            index = turns[-1]["index"]
            state.latest[external_id] = call(
                world, agent, "GET", f"sessions/{quoted(external_id)}/turns/{index}"
            )
    return state


# --- the conversations ----------------------------------------------------------------------


@dataclass
class Conversation:
    """One agent's first run (a prompt, tool rounds, the final text) and what was recorded."""

    agent: str
    run: AgentRun
    calls: list[Received]
    state: Recorded
    home: Path


def converse(world: World, agent: str) -> Conversation:
    require_agents()
    home = world.root / f"home-{agent}"
    home.mkdir()
    first = len(world.api.received)
    if agent == "claude":
        run = run_claude(
            "-p",
            PROMPT,
            home=home,
            workdir=world.workdir,
            base_url=f"{world.tap.url}/proxy/anthropic",
            ctxweb_key=world.keys[agent],
        )
    else:
        run = run_codex(
            "exec",
            "--skip-git-repo-check",
            *AGENTS[agent],
            PROMPT,
            home=home,
            workdir=world.workdir,
            base_url=f"{world.tap.url}/proxy/openai/v1",
            ctxweb_key=world.keys[agent],
        )
    calls = [r for r in world.api.received[first:] if r.method == "POST" and _model_call(r)]
    state = recorded(world, agent, len(calls)) if run.returncode == 0 else Recorded([])
    return Conversation(agent, run, calls, state, home)


def _model_call(received: Received) -> bool:
    path = received.path.split("?")[0].rstrip("/")
    return path.endswith(("/v1/messages", "/v1/responses"))


@pytest.fixture(scope="module")
def claude(world: World) -> Conversation:
    return converse(world, "claude")


@pytest.fixture(scope="module")
def codex(world: World) -> Conversation:
    return converse(world, "codex")


@pytest.fixture(scope="module")
def codex_classic(world: World) -> Conversation:
    return converse(world, "codex-classic")


@pytest.fixture(params=["claude", "codex", "codex_classic"])
def conversation(request: pytest.FixtureRequest) -> Conversation:
    value: Conversation = request.getfixturevalue(request.param)
    return value


def finished(run: AgentRun) -> None:
    assert run.returncode == 0, f"{run.command[1:]} exited {run.returncode}:\n{run.output[-3000:]}"
    assert FINAL_TEXT in run.stdout, run.output[-3000:]


# --- the conversation, recorded -------------------------------------------------------------


def test_it_runs_the_agent_to_the_end_of_its_task(conversation: Conversation) -> None:
    finished(conversation.run)
    mains = [c for c in conversation.calls if c.kind == "main"]
    assert len(mains) == 3, [c.path for c in conversation.calls]  # two tool rounds, then text


def test_it_records_one_turn_per_model_call(conversation: Conversation) -> None:
    finished(conversation.run)
    assert conversation.state.turn_count == len(conversation.calls)


def test_it_keeps_the_conversation_in_one_session_and_side_calls_apart(
    conversation: Conversation,
) -> None:
    finished(conversation.run)
    mains = [c for c in conversation.calls if c.kind == "main"]
    sides = [c for c in conversation.calls if c.kind == "side"]
    state = conversation.state
    main = state.largest()
    assert len(state.turns[main]) == len(mains), {k: len(v) for k, v in state.turns.items()}
    # Every other session holds side calls only: no tools, as the side calls sent none.
    others = [t for external_id, turns in state.turns.items() if external_id != main for t in turns]
    assert len(others) == len(sides)
    assert all(t["regions"].get("tools", 0) == 0 for t in others), others
    if conversation.agent == "claude":
        assert sides, "Claude Code makes a title call beside the conversation"


def test_it_counts_system_and_tools_in_their_regions_on_every_turn(
    conversation: Conversation,
) -> None:
    finished(conversation.run)
    turns = conversation.state.turns[conversation.state.largest()]
    for turn in turns:
        assert turn["regions"]["system"] > 0, turn
        assert turn["regions"]["tools"] > 0, turn


def test_it_keeps_tool_pairs_intact(world: World, conversation: Conversation) -> None:
    finished(conversation.run)
    main = conversation.state.largest()
    latest = conversation.state.latest[main]
    calls, results = set(), set()
    for message in latest["messages"]:
        for part in stored(message).get("parts", []):
            if part.get("kind") == "tool_call":
                calls.add(part["id"])
            elif part.get("kind") == "tool_result":
                results.add(part["tool_call_id"])
    assert len(calls) == 2, latest["messages"]
    assert calls == results
    events = [e for turn in conversation.state.turns[main] for e in turn["events"]]
    assert not [e for e in events if "orphan" in json.dumps(e).lower()], events
    preview = call(
        world,
        conversation.agent,
        "POST",
        f"sessions/{quoted(main)}/preview",
        {"strategy": "ctxweb-auto", "params": {}},
    )
    assert not [w for w in preview["warnings"] if "orphan" in json.dumps(w).lower()], preview[
        "warnings"
    ]


def stored(message: dict[str, Any]) -> dict[str, Any]:
    """A turn's message as stored (the API gives it as an object, or as its JSON text)."""
    value = message["message"]
    return json.loads(value) if isinstance(value, str) else value


def api_item_texts(value: Any) -> Iterator[str]:
    """Texts, anywhere in ``value``, that are an API item or message written as JSON."""
    if isinstance(value, dict):
        for key, inner in value.items():
            if key == "text" and isinstance(inner, str) and inner.lstrip().startswith("{"):
                try:
                    parsed = json.loads(inner)
                except ValueError:
                    parsed = None
                if isinstance(parsed, dict) and (
                    parsed.get("type") in ITEM_TYPES or "role" in parsed
                ):
                    yield inner[:200]
            else:
                yield from api_item_texts(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from api_item_texts(inner)


def kept_as_tools(message: dict[str, Any]) -> bool:
    """A configuration item kept verbatim because it defines tools (Codex's ``additional_tools``):
    stored whole, as sent, counted in the tools region and shown as its tools. The one kind of
    item whose JSON a stored text may hold; calls, outputs and messages never."""
    return message.get("region") == "tools" and all(
        part.get("extra", {}).get("ctxweb:item") for part in stored(message).get("parts", [])
    )


def test_it_stores_no_api_item_as_json_text(conversation: Conversation) -> None:
    finished(conversation.run)
    assert conversation.state.latest, "no session was recorded"
    for external_id, latest in conversation.state.latest.items():
        for message in latest["messages"]:
            if kept_as_tools(message):
                continue
            assert list(api_item_texts(stored(message))) == [], (external_id, message["position"])
        for name in ("system", "tools"):
            assert list(api_item_texts(latest.get(name))) == [], (external_id, name)


# --- managed mode ---------------------------------------------------------------------------


@dataclass
class Managed:
    """After the first conversation: the operator's operation, then the agent going on with
    ``X-Ctxweb-Managed: 1``."""

    before: Conversation
    session: str
    operation: dict[str, Any]
    run: AgentRun
    #: The model calls: as the agent sent them, and as the provider received them (in order).
    sent: list[Received]
    calls: list[Received]
    turns: list[dict[str, Any]]
    #: Why the operation could not be applied, if it could not.
    problem: str = ""

    def pairs(self) -> list[tuple[Received, Received]]:
        """(sent, received) for each call of the conversation (side calls left out)."""
        assert len(self.sent) == len(self.calls), (len(self.sent), len(self.calls))
        return [(s, r) for s, r in zip(self.sent, self.calls, strict=True) if r.kind == "main"]


def manage(world: World, before: Conversation) -> Managed:
    agent = before.agent
    if before.run.returncode != 0 or not before.state.turns:
        problem = f"the first run exited {before.run.returncode} and left {before.state.turns}"
        return Managed(before, "", {}, before.run, [], [], [], problem)
    session = before.state.largest()
    try:
        created = call(world, agent, "POST", f"sessions/{quoted(session)}/operations", COMPACTION)
    except urllib.error.HTTPError as refused:
        problem = f"the operation was refused: {refused.code} {refused.read()[:500]!r}"
        return Managed(before, session, {}, before.run, [], [], [], problem)
    operation = wait(
        lambda: (lambda o: o if o["status"] in ("succeeded", "failed") else None)(
            call(world, agent, "GET", f"operations/{created['id']}")
        ),
        "the operation",
    )
    first, tapped = len(world.api.received), len(world.tap.sent)
    if agent == "claude":
        run = run_claude(
            "-p",
            "--continue",
            AGAIN,
            home=before.home,
            workdir=world.workdir,
            base_url=f"{world.tap.url}/proxy/anthropic",
            ctxweb_key=world.keys[agent],
            headers={"X-Ctxweb-Managed": "1"},
        )
    else:
        run = run_codex(
            "exec",
            "--skip-git-repo-check",
            *AGENTS[agent],
            "resume",
            "--last",
            AGAIN,
            home=before.home,
            workdir=world.workdir,
            base_url=f"{world.tap.url}/proxy/openai/v1",
            ctxweb_key=world.keys[agent],
            headers={"X-Ctxweb-Managed": "1"},
        )
    calls = [r for r in world.api.received[first:] if r.method == "POST" and _model_call(r)]
    sent = [r for r in world.tap.sent[tapped:] if r.method == "POST" and _model_call(r)]
    total = before.state.turn_count + len(calls)
    turns: list[dict[str, Any]] = []
    if run.returncode == 0:
        recorded(world, agent, total)
        turns = call(world, agent, "GET", f"sessions/{quoted(session)}/turns")
    return Managed(before, session, operation, run, sent, calls, turns)


@pytest.fixture(scope="module")
def claude_managed(world: World, claude: Conversation) -> Managed:
    return manage(world, claude)


@pytest.fixture(scope="module")
def codex_managed(world: World, codex: Conversation) -> Managed:
    return manage(world, codex)


@pytest.fixture(scope="module")
def codex_classic_managed(world: World, codex_classic: Conversation) -> Managed:
    return manage(world, codex_classic)


@pytest.fixture(params=["claude", "codex", "codex_classic"])
def managed(request: pytest.FixtureRequest) -> Managed:
    value: Managed = request.getfixturevalue(f"{request.param}_managed")
    return value


def _size(received: Received) -> int:
    body = received.body
    return len(json.dumps(body.get("messages") if "messages" in body else body.get("input")))


def _configuration(received: Received) -> dict[str, Any]:
    """What an agent configures, as content: tool definitions and instructions, wherever its
    format puts them (``cache_control`` markers left out: they move from call to call)."""
    body = received.body

    def plain(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items() if k != "cache_control"}
        if isinstance(value, list):
            return [plain(v) for v in value]
        return value

    if "messages" in body:  # Anthropic Messages
        return {
            "tools": plain(body.get("tools")),
            "system": plain(body.get("system")),
            "system messages": [plain(m) for m in body["messages"] if m.get("role") == "system"],
        }
    items = body.get("input") or []
    return {
        "tools": plain(body.get("tools")),
        "instructions": body.get("instructions"),
        "configuration items": [
            plain({k: v for k, v in item.items() if k != "id"})
            for item in items
            if item.get("type") == "additional_tools" or item.get("role") in ("developer", "system")
        ],
    }


def test_an_applied_operation_shortens_what_the_agent_sends_next(managed: Managed) -> None:
    assert not managed.problem, managed.problem
    assert managed.operation["status"] == "succeeded", managed.operation
    assert managed.operation["result"]["tokens_saved"] > 0, managed.operation["result"]
    finished(managed.run)
    pairs = managed.pairs()
    assert pairs, [c.path for c in managed.calls]
    for sent, received in pairs:  # the agent's whole history went in; less came out
        assert _size(received) < _size(sent), (_size(received), _size(sent))


def test_a_managed_call_reaches_the_model_with_every_tool_and_instruction(
    managed: Managed,
) -> None:
    assert not managed.problem, managed.problem
    finished(managed.run)
    pairs = managed.pairs()
    assert pairs, [c.path for c in managed.calls]
    for sent, received in pairs:
        assert _configuration(received) == _configuration(sent)


def test_a_managed_call_is_marked_on_its_turn(managed: Managed) -> None:
    assert not managed.problem, managed.problem
    finished(managed.run)
    mains = [c for c in managed.calls if c.kind == "main"]
    new = managed.turns[len(managed.before.state.turns[managed.session]) :]
    assert len(new) == len(mains), [t["index"] for t in managed.turns]
    assert any(e.get("type") == "managed" for e in new[0]["events"]), new[0]["events"]


# --- what is stored -------------------------------------------------------------------------


def test_the_provider_key_is_stored_nowhere(
    world: World, claude_managed: Managed, codex_managed: Managed, codex_classic_managed: Managed
) -> None:
    assert any(PROVIDER_KEY in json.dumps(r.headers) for r in world.api.received)
    database = world.data / "db.sqlite3"
    connection = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    try:
        tables = [
            row[0]
            for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        ]
        found: dict[str, set[str]] = {PROVIDER_KEY: set(), PROMPT: set()}
        for table in tables:
            for row in connection.execute(f'SELECT * FROM "{table}"'):
                for value in row:
                    text = value.decode(errors="replace") if isinstance(value, bytes) else value
                    for wanted, where in found.items():
                        if isinstance(text, str) and wanted in text:
                            where.add(table)
        assert found[PROMPT], "the conversations are not in the database: nothing was searched"
        assert found[PROVIDER_KEY] == set()
    finally:
        connection.close()
    for path in world.data.rglob("*"):
        if path.is_file() and path.suffix not in (".sqlite3", ".sqlite3-wal", ".sqlite3-shm"):
            assert PROVIDER_KEY.encode() not in path.read_bytes(), path
    assert PROVIDER_KEY not in world.server.log


# --- friction -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    ["/proxy/anthropic", "/proxy/openai", "/proxy/anthropic/", "/proxy/openai/v1/responses"],
)
def test_head_on_the_proxy_answers_200_without_a_key(world: World, path: str) -> None:
    before = len(world.api.received)
    request = urllib.request.Request(f"{world.server.url}{path}", method="HEAD")
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 200
        assert response.read() == b""
    assert len(world.api.received) == before  # a check of ctxweb: the provider is not asked


def test_head_on_the_proxy_still_checks_the_host(world: World) -> None:
    request = urllib.request.Request(
        f"{world.server.url}/proxy/anthropic", method="HEAD", headers={"Host": "evil.example"}
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 400


@pytest.mark.parametrize("key", ["ctxweb-wrong-key", None], ids=["wrong key", "no key"])
def test_claude_code_stops_at_once_with_ctxwebs_message_on_a_wrong_key(
    world: World, key: str | None
) -> None:
    require_agents()
    home = world.root / f"home-wrong-{key}"
    home.mkdir()
    before = len(world.api.received)
    run = run_claude(
        "-p",
        PROMPT,
        home=home,
        workdir=world.workdir,
        base_url=f"{world.server.url}/proxy/anthropic",
        ctxweb_key=key,
        timeout=60,
    )
    assert run.returncode not in (0, -1), run.output[-2000:]  # -1: still retrying after 60 s
    assert "X-Ctxweb-Key" in run.output, run.output[-2000:]
    assert len(world.api.received) == before  # nothing left for the provider


def test_codex_stops_with_ctxwebs_message_on_a_wrong_key(world: World) -> None:
    require_agents()
    home = world.root / "home-wrong-codex"
    home.mkdir()
    run = run_codex(
        "exec",
        "--skip-git-repo-check",
        PROMPT,
        home=home,
        workdir=world.workdir,
        base_url=f"{world.server.url}/proxy/openai/v1",
        ctxweb_key="ctxweb-wrong-key",
        timeout=60,
    )
    assert run.returncode not in (0, -1), run.output[-2000:]
    assert "X-Ctxweb-Key" in run.output, run.output[-2000:]


def test_claude_interrupted_mid_answer_is_recorded_and_its_turn_says_so(world: World) -> None:
    """A user stops Claude Code while the model answers (here SIGINT to ``claude -p``, as a
    user's Ctrl-C; Esc in its interface ends the call the same way): the call is a turn all the
    same, the request whole with Claude Code's tools and system prompt, and an ``interrupted``
    event."""
    require_agents()
    home = world.root / "home-interrupted"
    home.mkdir()
    command, env = claude_command(
        "-p",
        f"{STALL}: read notes.txt and tell me the answer.",
        home=home,
        base_url=f"{world.server.url}/proxy/anthropic",
        ctxweb_key=world.keys["interrupted"],
    )
    with (home / "claude.log").open("wb") as out:
        agent = subprocess.Popen(
            command,
            cwd=world.workdir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            assert world.api.stalled.wait(90), (home / "claude.log").read_text()[-2000:]
            os.killpg(agent.pid, signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                agent.wait(timeout=20)
        finally:
            if agent.poll() is None:
                os.killpg(agent.pid, signal.SIGKILL)
                agent.wait(timeout=10)
            world.api.unstall.set()

    def interrupted() -> list[tuple[str, int, str]]:
        found = []
        for session in call(world, "interrupted", "GET", "sessions?limit=100")["results"]:
            external_id = session["external_id"]
            for turn in call(world, "interrupted", "GET", f"sessions/{quoted(external_id)}/turns"):
                found += [
                    (external_id, turn["index"], event["message"])
                    for event in turn["events"]
                    if event["type"] == "interrupted"
                ]
        return found

    cut = wait(interrupted, "the interrupted call recorded")
    # A side call (a title, which quotes the prompt too) in flight at the interruption is cut
    # as well, in a session apart: the main call is the one that sends Claude Code's tools.
    turns = {
        (external_id, index): (
            message,
            call(world, "interrupted", "GET", f"sessions/{quoted(external_id)}/turns/{index}"),
        )
        for external_id, index, message in cut
    }
    [(message, turn)] = [(m, t) for m, t in turns.values() if t["tools"]]
    assert "its caller left before the answer's end" in message
    assert STALL in json.dumps(turn["messages"])
    assert turn["regions"]["tools"] > 0
