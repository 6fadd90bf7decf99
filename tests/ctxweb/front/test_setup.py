"""The Connect page (``/setup/``): for each agent the proxy serves, the lines for the key, for
naming the session and for managed mode, at the address the page is served from; each snippet
read back by what reads it (bash, TOML, JSON, YAML, Python) says what the page says it does."""

from __future__ import annotations

import html
import json
import re
import subprocess
import tomllib
from typing import Any

import pytest
import yaml

from tests.support.world import World

pytestmark = pytest.mark.django_db

#: The address `make run` serves on.
BASE = "http://127.0.0.1:8000"
KEY = "ctx_test_key_0123456789"


@pytest.fixture
def blocks(world: World) -> dict[str, str]:
    """Each copy block of the page, by id."""
    page = world.login(world.teammate).get("/setup/", HTTP_HOST="127.0.0.1:8000")
    assert page.status_code == 200
    found = re.findall(
        r'<pre id="setup-([a-z-]+)"[^>]*><code>(.*?)</code></pre>', page.content.decode(), re.S
    )
    return {name: html.unescape(text) for name, text in found}


def bash(script: str, *names: str) -> dict[str, str]:
    """The variables ``names`` after ``script`` ran in bash (its commands other than export
    skipped), with CTXWEB_API_KEY set."""
    exports = "\n".join(line for line in _logical_lines(script) if line.startswith("export "))
    shown = "; ".join(f'printf "%s\\0" "${name}"' for name in names)
    done = subprocess.run(
        ["bash", "-c", f"export CTXWEB_API_KEY={KEY}\n{exports}\n{shown}"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    return dict(zip(names, done.stdout.split("\0")[:-1], strict=True))


def _logical_lines(script: str) -> list[str]:
    """Lines, a double-quoted string spanning lines kept in one."""
    lines: list[str] = []
    for line in script.splitlines():
        if lines and lines[-1].count('"') % 2 == 1:
            lines[-1] += "\n" + line
        else:
            lines.append(line)
    return lines


def test_the_key_comes_from_a_command_that_works_from_a_fresh_clone(
    blocks: dict[str, str], world: World
) -> None:
    assert blocks["key"].splitlines()[0] == "make key PROJECT=alpha"
    page = html.unescape(world.login(world.owner).get("/setup/").content.decode())
    assert ".venv/bin/python manage.py create_api_key --project alpha --role ingest" in page
    assert "<code>python manage.py" not in page


def test_claude_code_gets_the_key_the_session_and_managed_mode_one_header_a_line(
    blocks: dict[str, str],
) -> None:
    plain = bash(blocks["claude-code"], "ANTHROPIC_BASE_URL", "ANTHROPIC_CUSTOM_HEADERS")
    assert plain == {
        "ANTHROPIC_BASE_URL": f"{BASE}/proxy/anthropic",
        "ANTHROPIC_CUSTOM_HEADERS": f"X-Ctxweb-Key: {KEY}",
    }
    named = bash(blocks["claude-code-session"], "ANTHROPIC_CUSTOM_HEADERS")
    assert named["ANTHROPIC_CUSTOM_HEADERS"] == f"X-Ctxweb-Key: {KEY}\nX-Ctxweb-Session: my-task"
    managed = bash(blocks["claude-code-managed"], "ANTHROPIC_CUSTOM_HEADERS")
    assert managed["ANTHROPIC_CUSTOM_HEADERS"] == (
        f"X-Ctxweb-Key: {KEY}\nX-Ctxweb-Session: my-task\nX-Ctxweb-Managed: 1"
    )


def _codex(config: str, option: str = "") -> dict[str, Any]:
    """The Codex configuration, the option's lines added to its provider's table."""
    lines = [line for line in option.splitlines() if not line.startswith("#")]
    return tomllib.loads(config + "\n" + "\n".join(lines))


def test_codex_reads_the_key_from_the_environment_and_the_rest_from_http_headers(
    blocks: dict[str, str],
) -> None:
    config = _codex(blocks["codex"])
    assert config["model_provider"] == "ctxweb"
    provider = config["model_providers"]["ctxweb"]
    assert provider["base_url"] == f"{BASE}/proxy/openai/v1"
    assert provider["wire_api"] == "responses"
    assert provider["env_key"] == "OPENAI_API_KEY"
    assert provider["env_http_headers"] == {"X-Ctxweb-Key": "CTXWEB_API_KEY"}
    named = _codex(blocks["codex"], blocks["codex-session"])["model_providers"]["ctxweb"]
    assert named["http_headers"] == {"X-Ctxweb-Session": "my-task"}
    managed = _codex(blocks["codex"], blocks["codex-managed"])["model_providers"]["ctxweb"]
    assert managed["http_headers"] == {"X-Ctxweb-Session": "my-task", "X-Ctxweb-Managed": "1"}


def test_the_sdks_send_the_key_and_the_options_add_the_session_and_managed_mode(
    blocks: dict[str, str],
) -> None:
    sdks = blocks["sdks"]
    assert f'OpenAI(base_url="{BASE}/proxy/openai/v1", default_headers=ctxweb)' in sdks
    assert f'Anthropic(base_url="{BASE}/proxy/anthropic", default_headers=ctxweb)' in sdks
    headers: dict[str, str] = {}
    for option in ("sdks-session", "sdks-managed"):
        exec(compile(blocks[option], option, "exec"), {"ctxweb": headers})
    assert headers == {"X-Ctxweb-Session": "my-run", "X-Ctxweb-Managed": "1"}
    compile(sdks, "sdks", "exec")


def test_opencode_gets_a_provider_with_ctxwebs_base_url_and_headers(
    blocks: dict[str, str],
) -> None:
    body = blocks["opencode"].split("\n", 1)[1]  # after its comment line
    config = json.loads(body)
    provider = config["provider"]["ctxweb"]
    assert provider["npm"] == "@ai-sdk/openai-compatible"
    assert provider["options"]["baseURL"] == f"{BASE}/proxy/openai/v1"
    assert provider["options"]["headers"] == {"X-Ctxweb-Key": "{env:CTXWEB_API_KEY}"}
    assert config["model"] == "ctxweb/gpt-4.1"
    named = json.loads("{" + blocks["opencode-session"] + "}")["headers"]
    assert named == {"X-Ctxweb-Key": "{env:CTXWEB_API_KEY}", "X-Ctxweb-Session": "my-task"}
    managed = json.loads("{" + blocks["opencode-managed"] + "}")["headers"]
    assert managed["X-Ctxweb-Managed"] == "1"


def test_aider_gets_extra_headers_and_ctxwebs_base_url(blocks: dict[str, str]) -> None:
    settings = yaml.safe_load(blocks["aider"].split("# then:")[0])
    assert settings == [
        {
            "name": "aider/extra_params",
            "extra_params": {"extra_headers": {"X-Ctxweb-Key": "<your ctxweb key>"}},
        }
    ]
    assert (
        f"aider --openai-api-base {BASE}/proxy/openai/v1 --model openai/gpt-4.1" in blocks["aider"]
    )
    managed = yaml.safe_load(blocks["aider-managed"].strip())["extra_headers"]
    assert managed == {
        "X-Ctxweb-Key": "<your ctxweb key>",
        "X-Ctxweb-Session": "my-task",
        "X-Ctxweb-Managed": "1",
    }
    named = yaml.safe_load(blocks["aider-session"].strip())["extra_headers"]
    assert named["X-Ctxweb-Session"] == "my-task"


def test_each_agents_options_say_what_they_do(world: World) -> None:
    text = html.unescape(world.login(world.teammate).get("/setup/").content.decode())
    for agent in ("claude-code", "codex", "sdks", "opencode", "aider"):
        assert f'data-copy="setup-{agent}-session"' in text, agent
        assert f'data-copy="setup-{agent}-managed"' in text, agent
    assert "Name the session (optional" in text
    assert "Managed mode (optional" in text
