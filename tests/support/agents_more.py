"""OpenCode and aider, run headless through ctxweb's recording proxy, against a scripted loopback
stand-in for the OpenAI Chat Completions API (streaming).

Both agents are installed into the project by ``make install-agents-more``: OpenCode from the npm
registry into ``agents/opencode/node_modules`` (its binary arrives as a per-platform optional
dependency), aider from PyPI into its own virtualenv ``agents/aider/.venv``. :func:`require`
skips a test when one is missing, and fails it under ``CI=true``.

Each agent is pointed at the proxy the way a user points it (the lines the Connect page shows):

- OpenCode: an ``opencode.json`` provider on ``@ai-sdk/openai-compatible`` with ``options.baseURL``
  (the proxy's OpenAI path) and ``options.headers`` (``X-Ctxweb-Key``): :func:`opencode_config`.
- aider: ``--openai-api-base`` (the same path) and a ``.aider.model.settings.yml`` whose
  ``aider/extra_params`` entry (applied to every model aider calls) carries ``X-Ctxweb-Key`` in
  ``extra_headers``: :func:`aider_files` and :func:`aider_command`.

Nothing leaves the machine: HOME and each tool's configuration, data and cache folders are in a
temporary folder; OpenCode's models catalogue, auto-update, sharing and LSP downloads are off and
its background install of ``@opencode-ai/plugin`` into its configuration folder finds npm offline;
aider's update check and analytics are off, and its model metadata comes from a local file (else it
downloads litellm's price list).

    with ChatStandIn([{"tool": "bash", "arguments": {...}}, "Done."]) as api:
        ...  # api.main / api.side: the requests the agent sent, main conversation and side calls
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.support.providers import anthropic_events

ROOT = Path(__file__).resolve().parents[2]
OPENCODE = ROOT / "agents" / "opencode" / "node_modules" / ".bin" / "opencode"
AIDER = ROOT / "agents" / "aider" / ".venv" / "bin" / "aider"
#: The model name both agents ask for (the stand-in answers any).
MODEL = "gpt-4o"
ANTHROPIC_MODEL = "claude-sonnet-4-5"
#: A run that takes longer than this has hung (each finishes in seconds against the stand-in).
RUN_SECONDS = 90


def require(binary: Path, name: str) -> None:
    """Skip when ``binary`` is not installed, with the command that installs it; under
    ``CI=true`` fail instead (CI installs every agent)."""
    if binary.is_file() and os.access(binary, os.X_OK):
        return
    reason = f"{name} is not installed ({binary.relative_to(ROOT)}): run `make install-agents-more`"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: the agents must be installed)")
    pytest.skip(reason)


def version(binary: Path) -> str:
    """What ``binary --version`` prints (its last line)."""
    result = subprocess.run(
        [str(binary), "--version"], capture_output=True, text=True, timeout=60, env=_base_env()
    )
    return (result.stdout.strip().splitlines() or ["?"])[-1]


# --- the stand-in -------------------------------------------------------------------------------


def is_title_call(request: dict[str, Any]) -> bool:
    """A side call that names the conversation: no tools, and a system text asking for a title
    (OpenCode's title agent: "You are a title generator..."), in a Chat Completions system
    message or Anthropic's ``system``."""
    if request.get("tools"):
        return False
    system = [request.get("system")] + [
        message.get("content")
        for message in request.get("messages") or []
        if message.get("role") == "system"
    ]
    return "title" in json.dumps(system).lower()


@dataclass
class ChatStandIn:
    """An OpenAI Chat Completions and Anthropic Messages server on a free loopback port,
    streaming (as each provider streams) or not.

    The main conversation's calls are answered from ``script`` in turn: a string is a text reply,
    ``{"tool": name, "arguments": {...}}`` one tool call; past its end, "Done.". Side calls (what
    ``side`` says is one: by default a title request) are answered with ``title`` and never
    consume the script. ``GET /v1/models`` lists :data:`MODEL`.
    """

    script: list[Any] = field(default_factory=list)
    title: str = "Scripted conversation"
    side: Callable[[dict[str, Any]], bool] = is_title_call
    url: str = ""
    #: Every call as it arrived: (path, headers with lower-case names, JSON body).
    calls: list[tuple[str, dict[str, str], dict[str, Any]]] = field(default_factory=list)
    main: list[dict[str, Any]] = field(default_factory=list)
    side_calls: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    def __enter__(self) -> ChatStandIn:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        server.daemon_threads = True
        self._server = server
        self.url = f"http://127.0.0.1:{server.server_address[1]}"
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def reset(self, script: list[Any]) -> None:
        """A new conversation: answer the next main calls with ``script``."""
        with self._lock:
            self.script = list(script)
            self.calls.clear()
            self.main.clear()
            self.side_calls.clear()

    def answer(self, path: str, headers: dict[str, str], request: dict[str, Any]) -> Any:
        """The reply to this call (and the call remembered)."""
        with self._lock:
            self.calls.append((path, headers, request))
            if self.side(request):
                self.side_calls.append(request)
                return self.title
            self.main.append(request)
            n = len(self.main) - 1
            return self.script[n] if n < len(self.script) else "Done."


def _message(reply: Any, n: int) -> tuple[dict[str, Any], str]:
    if isinstance(reply, dict):
        # As OpenAI writes a call's arguments: compact JSON.
        arguments = json.dumps(reply["arguments"], separators=(",", ":"))
        call = {
            "id": f"call_{n}",
            "type": "function",
            "function": {"name": reply["tool"], "arguments": arguments},
        }
        return {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"
    return {"role": "assistant", "content": reply}, "stop"


def _usage(request: dict[str, Any]) -> dict[str, int]:
    prompt = max(1, len(json.dumps(request.get("messages") or [])) // 4)
    return {"prompt_tokens": prompt, "completion_tokens": 9, "total_tokens": prompt + 9}


def _chunks(request: dict[str, Any], message: dict[str, Any], finish: str) -> Iterator[Any]:
    """The stream OpenAI sends for ``message``: a tool call's first chunk carries the role, a null
    content and the call's id and name, then its arguments in pieces; a text's first chunk
    carries the role and an empty content, then the text in pieces; then the finish reason and,
    when asked for, the usage."""
    base = {"id": "chatcmpl-a", "object": "chat.completion.chunk", "created": 1, "model": MODEL}

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        return {
            **base,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        }

    calls = message.get("tool_calls") or []
    for call in calls:
        head = {
            "index": 0,
            "id": call["id"],
            "type": "function",
            "function": {"name": call["function"]["name"], "arguments": ""},
        }
        yield chunk({"role": "assistant", "content": None, "tool_calls": [head]})
        arguments = call["function"]["arguments"]
        for start in range(0, len(arguments), 16):
            piece = {"index": 0, "function": {"arguments": arguments[start : start + 16]}}
            yield chunk({"tool_calls": [piece]})
    if not calls:
        yield chunk({"role": "assistant", "content": "", "refusal": None})
        text = message["content"]
        for start in range(0, len(text), 24):
            yield chunk({"content": text[start : start + 24]})
    yield chunk({}, finish)
    if (request.get("stream_options") or {}).get("include_usage"):
        yield {**base, "choices": [], "usage": _usage(request)}


def _anthropic_content(reply: Any, n: int) -> tuple[list[dict[str, Any]], str]:
    if isinstance(reply, dict):
        use = {"type": "tool_use", "id": f"toolu_{n}", "name": reply["tool"]}
        return [{**use, "input": reply["arguments"]}], "tool_use"
    return [{"type": "text", "text": reply}], "end_turn"


def _anthropic_usage(request: dict[str, Any]) -> dict[str, int]:
    sent = [request.get("system"), request.get("messages"), request.get("tools")]
    return {"input_tokens": max(1, len(json.dumps(sent)) // 4), "output_tokens": 9}


def _anthropic_events(
    request: dict[str, Any], content: list[dict[str, Any]], stop: str
) -> Iterator[dict[str, Any]]:
    """The stream Anthropic sends (:func:`tests.support.providers.anthropic_events`)."""
    usage = _anthropic_usage(request)
    for _, event in anthropic_events(
        request,
        content,
        stop,
        usage={**usage, "output_tokens": 1},
        output_tokens=usage["output_tokens"],
        message_id="msg_a",
    ):
        yield event


def _handler(state: ChatStandIn) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            if self.path.split("?")[0].rstrip("/") == "/v1/models":
                self._json(200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]})
            else:
                self._json(404, {"error": {"message": "not here", "type": "not_found"}})

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            path = self.path.split("?")[0].rstrip("/")
            if path not in ("/v1/chat/completions", "/v1/messages"):
                self._json(404, {"error": {"message": "not here", "type": "not_found"}})
                return
            request = json.loads(body or b"{}")
            headers = {k.lower(): v for k, v in self.headers.items()}
            reply = state.answer(path, headers, request)
            if path == "/v1/messages":
                self._anthropic(request, reply)
                return
            message, finish = _message(reply, len(state.calls))
            if not request.get("stream"):
                self._json(
                    200,
                    {
                        "id": f"chatcmpl-{len(state.calls)}",
                        "object": "chat.completion",
                        "created": 1,
                        "model": MODEL,
                        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                        "usage": _usage(request),
                    },
                )
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for event in _chunks(request, message, finish):
                self._chunk(f"data: {json.dumps(event)}\n\n".encode())
            self._chunk(b"data: [DONE]\n\n")
            self._chunk(b"")

        def _anthropic(self, request: dict[str, Any], reply: Any) -> None:
            content, stop = _anthropic_content(reply, len(state.calls))
            if not request.get("stream"):
                self._json(
                    200,
                    {
                        "id": f"msg_{len(state.calls)}",
                        "type": "message",
                        "role": "assistant",
                        "model": request.get("model"),
                        "content": content,
                        "stop_reason": stop,
                        "stop_sequence": None,
                        "usage": _anthropic_usage(request),
                    },
                )
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for event in _anthropic_events(request, content, stop):
                self._chunk(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode())
            self._chunk(b"")

        def _json(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _chunk(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

    return Handler


# --- running the agents -------------------------------------------------------------------------


@dataclass
class Run:
    """One headless run: its exit status and output."""

    returncode: int
    stdout: str
    stderr: str

    def __str__(self) -> str:
        return (
            f"exit {self.returncode}\n--- stdout\n{self.stdout[-4000:]}"
            f"\n--- stderr\n{self.stderr[-4000:]}"
        )


def _base_env() -> dict[str, str]:
    """What every run inherits: a PATH and a locale, nothing of the caller's keys or settings."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "NO_COLOR": "1",
    }


def home_env(home: Path) -> dict[str, str]:
    """HOME and the XDG folders (configuration, data, cache, state) inside ``home``."""
    for name in (".config", ".local/share", ".cache", ".local/state"):
        (home / name).mkdir(parents=True, exist_ok=True)
    return {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local/share"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_STATE_HOME": str(home / ".local/state"),
    }


def run(command: list[str], *, cwd: Path, env: dict[str, str]) -> Run:
    """Run an agent headless (no terminal, no standard input) and wait for it."""
    done = subprocess.run(
        command,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=RUN_SECONDS,
    )
    return Run(done.returncode, done.stdout, done.stderr)


def opencode_config(
    base_url: str, ctxweb_key: str, *, provider_key: str, session: str | None = None
) -> dict[str, Any]:
    """An ``opencode.json`` whose model goes through ctxweb's proxy (``base_url`` is the proxy's
    OpenAI path, ``.../proxy/openai/v1``)."""
    headers = {"X-Ctxweb-Key": ctxweb_key}
    if session is not None:
        headers["X-Ctxweb-Session"] = session
    return {
        "$schema": "https://opencode.ai/config.json",
        "autoupdate": False,
        "share": "disabled",
        "provider": {
            "ctxweb": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "ctxweb",
                "options": {"baseURL": base_url, "apiKey": provider_key, "headers": headers},
                "models": {MODEL: {"name": MODEL}},
            }
        },
        "model": f"ctxweb/{MODEL}",
        "small_model": f"ctxweb/{MODEL}",
    }


def opencode_anthropic_config(
    base_url: str, ctxweb_key: str, *, provider_key: str, session: str | None = None
) -> dict[str, Any]:
    """An ``opencode.json`` whose Anthropic provider (built in) goes through ctxweb's proxy
    (``base_url`` is the proxy's Anthropic path, ``.../proxy/anthropic/v1``)."""
    headers = {"X-Ctxweb-Key": ctxweb_key}
    if session is not None:
        headers["X-Ctxweb-Session"] = session
    return {
        "$schema": "https://opencode.ai/config.json",
        "autoupdate": False,
        "share": "disabled",
        "provider": {
            "anthropic": {
                "options": {"baseURL": base_url, "apiKey": provider_key, "headers": headers}
            }
        },
        "model": f"anthropic/{ANTHROPIC_MODEL}",
        "small_model": f"anthropic/{ANTHROPIC_MODEL}",
    }


def opencode_env(home: Path) -> dict[str, str]:
    """OpenCode's environment: its folders in ``home``, nothing fetched from the network."""
    return {
        **_base_env(),
        **home_env(home),
        "OPENCODE_DISABLE_AUTOUPDATE": "1",
        "OPENCODE_DISABLE_MODELS_FETCH": "1",
        "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
        "OPENCODE_DISABLE_SHARE": "1",
        # OpenCode installs @opencode-ai/plugin into its configuration folder in the background
        # (with the npm client it embeds, which reads npm's settings): offline, it gives up at once.
        "npm_config_offline": "true",
    }


def opencode_command(prompt: str) -> list[str]:
    return [str(OPENCODE), "run", prompt]


def aider_files(folder: Path, ctxweb_key: str, *, session: str | None = None) -> None:
    """Write aider's model settings (the ctxweb headers, for every model it calls:
    ``aider/extra_params``) and model metadata (so it downloads no price list) into ``folder``,
    under the names aider reads from the folder it runs in."""
    headers = {"X-Ctxweb-Key": ctxweb_key}
    if session is not None:
        headers["X-Ctxweb-Session"] = session
    (folder / ".aider.model.settings.yml").write_text(
        "- name: aider/extra_params\n"
        "  extra_params:\n"
        "    extra_headers:\n"
        + "".join(f"      {name}: {json.dumps(value)}\n" for name, value in headers.items())
    )
    window = {
        "max_input_tokens": 128000,
        "max_output_tokens": 16384,
        "input_cost_per_token": 0.0,
        "output_cost_per_token": 0.0,
        "litellm_provider": "openai",
        "mode": "chat",
    }
    # The model and its weak model (aider's settings for openai/gpt-4o name gpt-4o-mini).
    (folder / ".aider.model.metadata.json").write_text(
        json.dumps({f"openai/{MODEL}": window, f"{MODEL}-mini": window})
    )


def aider_command(message: str, *, base_url: str, files: list[str]) -> list[str]:
    return [
        str(AIDER),
        "--model",
        f"openai/{MODEL}",
        "--openai-api-base",
        base_url,
        "--no-check-update",
        "--analytics-disable",
        "--no-show-release-notes",
        "--yes-always",
        "--no-git",
        "--no-auto-lint",
        "--no-pretty",
        "--stream",
        "--message",
        message,
        *files,
    ]


def aider_env(home: Path, *, provider_key: str) -> dict[str, str]:
    """aider's environment: HOME in ``home``, the provider's key where litellm reads it, litellm's
    own price list from the package (not downloaded)."""
    return {
        **_base_env(),
        **home_env(home),
        "OPENAI_API_KEY": provider_key,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "AIDER_CHECK_UPDATE": "false",
        "AIDER_ANALYTICS": "false",
    }
