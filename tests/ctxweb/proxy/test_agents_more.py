"""OpenCode and aider, as users run them, through a live ctxweb's recording proxy: each is pointed
at the proxy with its own configuration (an ``opencode.json`` provider, OpenAI-compatible or
Anthropic; aider's API base and model settings), runs headless against a scripted loopback
stand-in for the provider's API, does its task, and its conversation is recorded: one session, one
turn per model call, its regions right, the provider's key stored nowhere.

OpenCode's conversation is joined into one session by its content (no session header), its title
call kept apart; named, the session holds every call, the title call too. aider names its session
(``X-Ctxweb-Session`` in its model settings): each of its calls moves the files' message and its
reminder to the end, so no call extends the one before it and none could be joined."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.agents_more import (
    AIDER,
    OPENCODE,
    ChatStandIn,
    aider_command,
    aider_env,
    aider_files,
    opencode_anthropic_config,
    opencode_command,
    opencode_config,
    opencode_env,
    require,
    run,
    version,
)
from tests.support.servers import LiveServer, create_key, embedded_env, live_server

pytestmark = [pytest.mark.agents, pytest.mark.slow]

PROVIDER_KEY = "sk-provider-secret-agents-more-0123456789"


@dataclass
class Live:
    server: LiveServer
    key: str
    data: Path
    api: ChatStandIn

    @property
    def openai_base(self) -> str:
        return f"{self.server.url}/proxy/openai/v1"

    @property
    def anthropic_base(self) -> str:
        return f"{self.server.url}/proxy/anthropic/v1"

    def get(self, path: str) -> Any:
        request = urllib.request.Request(
            f"{self.server.url}/api/v1/{path}", headers={"Authorization": f"Bearer {self.key}"}
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())

    def sessions_holding(self, text: str, turns: int) -> list[dict[str, Any]]:
        """The sessions whose first turn holds ``text``, once they have ``turns`` turns between
        them (recording follows the answer), fewest turns first."""
        deadline = time.monotonic() + 30
        found: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            found = [
                session
                for session in self.get("sessions?limit=500")["results"]
                if text in json.dumps(self.get(f"sessions/{session['external_id']}/turns/0"))
            ]
            if sum(session["turn_count"] for session in found) >= turns:
                return sorted(found, key=lambda session: session["turn_count"])
            time.sleep(0.2)
        raise AssertionError(
            f"the sessions holding {text!r} have not {turns} turns: {found}\n"
            f"the server's last lines:\n{self.server.output}"
        )

    def session(self, external_id: str, turns: int) -> dict[str, Any]:
        """The named session once it has ``turns`` turns."""
        deadline = time.monotonic() + 30
        seen: Any = None
        while time.monotonic() < deadline:
            try:
                seen = self.get(f"sessions/{external_id}")
            except urllib.error.HTTPError as failure:
                seen = failure
            else:
                if seen["turn_count"] >= turns:
                    return dict(seen)
            time.sleep(0.2)
        raise AssertionError(
            f"{external_id} has not {turns} turns: {seen}\n"
            f"the server's last lines:\n{self.server.output}"
        )

    def stored(self) -> bytes:
        """Everything the database holds: its files and, when sqlite3 is there, its dump."""
        content = b"".join(path.read_bytes() for path in self.data.glob("db.sqlite3*"))
        if shutil.which("sqlite3"):
            dump = subprocess.run(
                ["sqlite3", str(self.data / "db.sqlite3"), ".dump"],
                capture_output=True,
                timeout=60,
            )
            content += dump.stdout
        return content


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    with ChatStandIn() as api:
        data = tmp_path_factory.mktemp("agents-more")
        env = embedded_env(
            data,
            CTXWEB_UPSTREAM_OPENAI=f"{api.url}/v1",
            CTXWEB_UPSTREAM_ANTHROPIC=f"{api.url}/v1",
            CTXWEB_RATE_LIMIT="",
        )
        key = create_key(env, role="ingest")
        with live_server(env) as server:
            yield Live(server, key, data, api)


def test_it_runs_the_releases_the_project_pins() -> None:
    require(OPENCODE, "OpenCode")
    require(AIDER, "aider")
    agents = Path(__file__).resolve().parents[3] / "agents"
    pinned = json.loads((agents / "opencode" / "package.json").read_text())["dependencies"]
    assert version(OPENCODE) == pinned["opencode-ai"]
    (aider,) = (agents / "aider" / "requirements.txt").read_text().split()
    assert version(AIDER) == "aider " + aider.removeprefix("aider-chat==")


def regions(live: Live, session: dict[str, Any]) -> list[dict[str, int]]:
    return [turn["regions"] for turn in live.get(f"sessions/{session['external_id']}/turns")]


def opencode_does_its_task(
    live: Live,
    tmp_path: Path,
    prompt: str,
    *,
    session: str | None = None,
    provider: str = "openai",
) -> None:
    """OpenCode, told ``prompt``, writes hello.txt with its bash tool, reads it back with its read
    tool and says so (three calls, and its title call), its ctxweb key in its configuration
    read from the environment as a user keeps it; through an OpenAI-compatible provider or its
    own Anthropic provider."""
    require(OPENCODE, "OpenCode")
    work = tmp_path / "work"
    work.mkdir()
    live.api.reset(
        [
            {
                "tool": "bash",
                "arguments": {
                    "command": "printf 'hello from opencode\\n' > hello.txt",
                    "description": "Write hello.txt",
                },
            },
            {"tool": "read", "arguments": {"filePath": str(work / "hello.txt")}},
            "hello.txt now says hello.",
        ]
    )
    if provider == "openai":
        config = opencode_config(
            live.openai_base, "{env:CTXWEB_API_KEY}", provider_key=PROVIDER_KEY, session=session
        )
    else:
        config = opencode_anthropic_config(
            live.anthropic_base,
            "{env:CTXWEB_API_KEY}",
            provider_key=PROVIDER_KEY,
            session=session,
        )
    (work / "opencode.json").write_text(json.dumps(config))
    env = {**opencode_env(tmp_path / "home"), "CTXWEB_API_KEY": live.key}

    done = run(opencode_command(prompt), cwd=work, env=env)

    assert done.returncode == 0, done
    assert (work / "hello.txt").read_text() == "hello from opencode\n", done
    assert "hello.txt now says hello." in done.stdout, done
    assert len(live.api.main) == 3, [len(r.get("messages") or []) for r in live.api.main]
    assert len(live.api.side_calls) == 1
    for _, headers, _ in live.api.calls:
        if provider == "openai":
            assert headers["authorization"] == f"Bearer {PROVIDER_KEY}"
        else:
            assert headers["x-api-key"] == PROVIDER_KEY
        assert not any(name.startswith("x-ctxweb") for name in headers), headers


def assert_the_conversation_is_recorded(live: Live, session: dict[str, Any]) -> None:
    """Every turn of OpenCode's conversation has its instructions and tools; the last its two
    tool rounds."""
    for turn in regions(live, session):
        assert turn["system"] > 0, turn
        assert turn["tools"] > 0, turn
    last = regions(live, session)[-1]
    assert last["tool_calls"] > 0, last
    assert last["tool_results"] > 0, last
    assert PROVIDER_KEY.encode() not in live.stored()


def test_it_joins_opencodes_calls_into_one_session_and_keeps_its_title_call_apart(
    live: Live, tmp_path: Path
) -> None:
    prompt = "Write hello into hello.txt, then read it back to check it."
    opencode_does_its_task(live, tmp_path, prompt)

    found = live.sessions_holding(prompt, turns=4)
    assert [s["turn_count"] for s in found] == [1, 3], found
    title, session = found
    assert "title" in json.dumps(live.get(f"sessions/{title['external_id']}/turns/0")["messages"])
    assert_the_conversation_is_recorded(live, session)


def test_it_joins_opencodes_calls_through_its_anthropic_provider_into_one_session(
    live: Live, tmp_path: Path
) -> None:
    prompt = "Write hello into hello.txt with Claude, then read it back."
    opencode_does_its_task(live, tmp_path, prompt, provider="anthropic")

    found = live.sessions_holding(prompt, turns=4)
    assert [s["turn_count"] for s in found] == [1, 3], found
    assert {s["format"] for s in found} == {"anthropic-messages"}
    assert_the_conversation_is_recorded(live, found[1])


def test_it_records_every_opencode_call_in_the_session_its_configuration_names(
    live: Live, tmp_path: Path
) -> None:
    opencode_does_its_task(live, tmp_path, "Write hello into hello.txt.", session="opencode-named")

    # Its title call carries the same headers: it is a turn of the session too.
    session = live.session("opencode-named", turns=4)
    assert session["turn_count"] == 4, session
    turns = live.get("sessions/opencode-named/turns")
    main = [turn for turn in turns if turn["regions"]["tools"] > 0]
    assert len(main) == 3, turns
    for turn in main:
        assert turn["regions"]["system"] > 0, turn
    assert main[-1]["regions"]["tool_calls"] > 0, main[-1]
    assert main[-1]["regions"]["tool_results"] > 0, main[-1]
    assert PROVIDER_KEY.encode() not in live.stored()


def test_it_records_aiders_calls_in_the_session_aider_names_while_aider_edits_the_file(
    live: Live, tmp_path: Path
) -> None:
    require(AIDER, "aider")
    work = tmp_path / "work"
    work.mkdir()
    (work / "greet.py").write_text('def greet():\n    return "helo, world"\n')
    message = "Fix the typo in greet.py's greeting."

    def edit(search: str, replace: str) -> str:
        """A reply in aider's diff edit format: one SEARCH/REPLACE block on greet.py."""
        return (
            "The greeting misspells hello.\n\ngreet.py\n```python\n<<<<<<< SEARCH\n"
            f"{search}\n=======\n{replace}\n>>>>>>> REPLACE\n```\n"
        )

    # The first block does not match the file: aider sends the failure back in a second call,
    # and the second block applies. aider names its session: it moves the files' message and its
    # reminder to the end of every call, so no call starts with the one before it.
    live.api.reset(
        [
            edit('    return "hello world"', '    return "hello, world!"'),
            edit('    return "helo, world"', '    return "hello, world"'),
        ]
    )
    aider_files(work, live.key, session="aider-typo")

    done = run(
        aider_command(message, base_url=live.openai_base, files=["greet.py"]),
        cwd=work,
        env=aider_env(tmp_path / "home", provider_key=PROVIDER_KEY),
    )

    assert done.returncode == 0, done
    assert (work / "greet.py").read_text() == 'def greet():\n    return "hello, world"\n', done
    assert "Applied edit to greet.py" in done.stdout, done
    assert len(live.api.main) == 2
    assert not live.api.side_calls
    assert "SearchReplaceNoExactMatch" not in json.dumps(live.api.main[0]["messages"])
    assert "SearchReplaceNoExactMatch" in json.dumps(live.api.main[1]["messages"])
    for _, headers, _ in live.api.calls:
        assert headers["authorization"] == f"Bearer {PROVIDER_KEY}"
        assert not any(name.startswith("x-ctxweb") for name in headers), headers
    session = live.session("aider-typo", turns=2)
    assert session["turn_count"] == 2, session
    assert message in json.dumps(live.get("sessions/aider-typo/turns/0")["messages"])
    for turn in regions(live, session):
        assert turn["system"] > 0, turn
        assert turn["user"] > 0, turn
        assert turn["assistant"] > 0, turn
    assert PROVIDER_KEY.encode() not in live.stored()
