"""What fills the context, item by item, as the real agents send it (issue 36): Claude Code and
Codex, the npm releases pinned in ``agents/``, run headless through a live ctxweb against the
scripted loopback stand-ins (:mod:`tests.support.agents`), each configured as a user configures
them: an MCP server (:mod:`tests.support.mcp_server`, over stdio), the project's instruction file
(``CLAUDE.md``, ``AGENTS.md``) and, for Claude Code, a ``UserPromptSubmit`` hook.

What the turn's attribution (``GET .../turns/{n}/attribution``) and the project overview
(``GET overview``) must show: the MCP server's tool definitions grouped under the server, the
instruction file's contents, the hook's output, the files the agent's tools read, and the items
adding up to the turn's total.
"""

from __future__ import annotations

import json
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.agents import (
    NOTES,
    NOTES_TEXT,
    AgentRun,
    agent_stand_in,
    require_agents,
    run_claude,
    run_codex,
)
from tests.support.servers import LiveServer, create_key, embedded_env, live_server

pytestmark = [pytest.mark.agents, pytest.mark.slow]

PROMPT = "Read notes.txt and tell me the answer."
#: How long the recording of an agent's calls may take (it follows each answer).
RECORDING_SECONDS = 20
SERVER = "tickets"
MCP_TOOLS = {"lookup_ticket", "search_runbooks"}
#: What the project's instruction file says, and what the hook adds to each prompt.
INSTRUCTIONS = "Always answer in one sentence. Never touch the deploy scripts under ops/.\n" * 6
HOOK_TEXT = "Reminder from the hook: the deploy freeze starts on Friday."
MCP_SCRIPT = Path(__file__).resolve().parents[2] / "support" / "mcp_server.py"


@dataclass
class Run:
    agent: str
    run: AgentRun
    server: LiveServer
    key: str

    def get(self, path: str) -> Any:
        request = urllib.request.Request(
            f"{self.server.url}/api/v1/{path}", headers={"Authorization": f"Bearer {self.key}"}
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.loads(response.read())


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Run]]:
    require_agents()
    root = tmp_path_factory.mktemp("agents-attribution")
    workdir = root / "work"
    workdir.mkdir()
    (workdir / NOTES).write_text(NOTES_TEXT)
    (workdir / "CLAUDE.md").write_text(INSTRUCTIONS)
    (workdir / "AGENTS.md").write_text(INSTRUCTIONS)
    with agent_stand_in(workdir) as api:
        env = embedded_env(
            root / "data",
            CTXWEB_UPSTREAM_ANTHROPIC=f"{api.url}/v1",
            CTXWEB_UPSTREAM_OPENAI=f"{api.url}/v1",
            CTXWEB_RATE_LIMIT="",
            CTXWEB_RATE_LIMIT_COSTLY="",
        )
        keys = {agent: create_key(env, project=f"{agent}-items") for agent in RUNS}
        with live_server(env) as server:
            yield {
                agent: Run(agent, start(root, workdir, server, keys[agent]), server, keys[agent])
                for agent, start in RUNS.items()
            }


def _claude(root: Path, workdir: Path, server: LiveServer, key: str) -> AgentRun:
    home = root / "home-claude"
    config = home / ".claude"
    config.mkdir(parents=True)
    hook = {"type": "command", "command": f"echo {json.dumps(HOOK_TEXT)}"}
    (config / "settings.json").write_text(
        json.dumps({"hooks": {"UserPromptSubmit": [{"hooks": [hook]}]}})
    )
    mcp = root / "mcp.json"
    mcp.write_text(
        json.dumps(
            {"mcpServers": {SERVER: {"command": sys.executable, "args": [str(MCP_SCRIPT), SERVER]}}}
        )
    )
    return run_claude(
        "-p",
        PROMPT,
        "--mcp-config",
        str(mcp),
        "--strict-mcp-config",
        home=home,
        workdir=workdir,
        base_url=f"{server.url}/proxy/anthropic",
        ctxweb_key=key,
    )


def _codex(root: Path, workdir: Path, server: LiveServer, key: str, *model: str) -> AgentRun:
    table = (
        f"[mcp_servers.{SERVER}]\n"
        f"command = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(str(MCP_SCRIPT))}, {json.dumps(SERVER)}]\n"
    )
    return run_codex(
        "exec",
        "--skip-git-repo-check",
        *model,
        PROMPT,
        home=root / f"home-codex{len(model)}",
        workdir=workdir,
        base_url=f"{server.url}/proxy/openai/v1",
        ctxweb_key=key,
        extra_config=table,
    )


def _codex_classic(root: Path, workdir: Path, server: LiveServer, key: str) -> AgentRun:
    return _codex(root, workdir, server, key, "-m", "gpt-5.1-codex")


#: The runs: Claude Code; Codex with its default model (code mode: its tools in an
#: ``additional_tools`` item of namespaces, MCP servers' tools not sent); Codex with a model of
#: classic tools (an MCP server's tools in a ``namespace`` tool named ``mcp__<server>``).
RUNS: dict[str, Callable[[Path, Path, LiveServer, str], AgentRun]] = {
    "claude": _claude,
    "codex": _codex,
    "codex-classic": _codex_classic,
}


def conversation_turn(run: Run) -> dict[str, Any]:
    """The last turn of the run's conversation (its session with the most turns), with its
    attribution, once the agent's calls are recorded."""
    assert run.run.returncode == 0, run.run.output[-3000:]
    deadline = time.monotonic() + RECORDING_SECONDS
    while True:
        sessions = run.get("sessions?limit=100")["results"]
        main = max(sessions, key=lambda s: s["turn_count"], default=None)
        if (main and main["turn_count"] >= 3) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert main, sessions
    assert main["turn_count"] >= 3, sessions  # two tool rounds, then the answer
    external_id = urllib.parse.quote(main["external_id"], safe="")
    turns = run.get(f"sessions/{external_id}/turns")
    return run.get(f"sessions/{external_id}/turns/{turns[-1]['index']}/attribution")


def items(attribution: dict[str, Any], region: str | None = None) -> list[dict[str, Any]]:
    return [
        item
        for entry in attribution["regions"]
        if region is None or entry["region"] == region
        for item in entry["items"]
    ]


def instructions(attribution: dict[str, Any]) -> dict[str, str]:
    return {i["name"]: i["detail"] for i in items(attribution) if i["kind"] == "instruction"}


@pytest.mark.parametrize("agent", ["claude", "codex", "codex-classic"])
def test_the_items_add_up_to_the_turn(runs: dict[str, Run], agent: str) -> None:
    attribution = conversation_turn(runs[agent])
    assert attribution["matches_turn"], attribution["total_tokens"]
    for entry in attribution["regions"]:
        if entry["more"] is None:
            assert sum(i["tokens"] for i in entry["items"]) == entry["tokens"], entry


@pytest.mark.parametrize("agent", ["claude", "codex-classic"])
def test_an_mcp_servers_tools_are_grouped_under_the_server(
    runs: dict[str, Run], agent: str
) -> None:
    tools = items(conversation_turn(runs[agent]), "tools")
    served = {i["name"] for i in tools if i["group"] == SERVER}
    assert {f"mcp__{SERVER}__{name}" for name in MCP_TOOLS} <= served, tools
    mine = [i for i in tools if i["group"] == SERVER and i["name"] != f"mcp__{SERVER}"]
    assert all(i["tokens"] > 100 for i in mine), mine  # the long descriptions are theirs
    overview = runs[agent].get("overview")
    servers = {row["name"]: row for row in overview["top"]["mcp_servers"]}
    assert SERVER in servers, overview["top"]


def test_claude_codes_instruction_file_hook_skills_and_agents_are_items(
    runs: dict[str, Run],
) -> None:
    attribution = conversation_turn(runs["claude"])
    found = instructions(attribution)
    assert found["CLAUDE.md"].endswith("CLAUDE.md"), found
    # Claude Code 2.1.19x sends these untagged, in a system message inside ``messages``
    assert found["hook output"] == "UserPromptSubmit", found
    assert {"skills list", "agents list"} <= found.keys(), found
    hook = next(i for i in items(attribution) if i["name"] == "hook output")
    assert 0 < hook["tokens"] < 40, hook  # the hook's line, not the message around it
    files = {i["name"] for i in items(attribution, "tool_results") if i["kind"] == "file"}
    assert any(name.endswith(NOTES) for name in files), files
    top = runs["claude"].get("overview")["top"]
    assert {"CLAUDE.md", "hook output"} <= {row["name"] for row in top["instructions"]}, top


@pytest.mark.parametrize("agent", ["codex", "codex-classic"])
def test_codex_instruction_file_and_environment_are_items(runs: dict[str, Run], agent: str) -> None:
    found = instructions(conversation_turn(runs[agent]))
    assert found["AGENTS.md"].endswith("work"), found
    assert "<environment_context>" in found, found


def test_codex_code_mode_tools_are_each_an_item(runs: dict[str, Run]) -> None:
    """Codex's default model gets its tools in an ``additional_tools`` item, namespaces of
    tools: each tool is an item of its own, named within its namespace."""
    tools = items(conversation_turn(runs["codex"]), "tools")
    names = {i["name"] for i in tools}
    assert "functions.exec" in names, names
    exec_tool = next(i for i in tools if i["name"] == "functions.exec")
    assert exec_tool["tokens"] > 1000, exec_tool  # its long description is its own
    wrapper = [i for i in tools if i["name"] == "additional_tools"]
    assert all(i["tokens"] < 50 for i in wrapper), wrapper  # only the item's wrapper is left
