"""SWE-agent trajectories (``*.traj``: one JSON object).

``history`` is the main agent's message list in OpenAI Chat shape plus SWE-agent fields
(``agent``, ``message_type``, ``thought``, ``action``, ``is_demo``; function-calling runs add
``tool_calls`` and ``tool_call_ids``, sometimes as Python-repr strings). ``trajectory`` holds one
step per model call; newer versions record in each step the ``messages`` the agent held after it,
already passed through its history processors (``last_n_observations`` replaces old outputs with
"Old environment output: (n lines omitted)").

Rebuilding: every assistant entry of ``history`` is a model call. Its context is the history
before it, except that when the steps carry ``messages`` the context of call ``k`` is the
``messages`` of step ``k - 1``: that is what was really sent. Identical messages are one object,
so contexts share them. The system prompt is a message of the history; tool definitions are not
recorded (unknown). ``info.model_stats`` totals go to the session's metadata, not to turns.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping
from typing import Any

from compaction.errors import FormatError
from compaction.messages.model import Context, Message

from ._dialects import chat_message
from ._records import as_dict, as_list, decode_json, obj, opt_str
from .model import ImportedSession, ImportedTurn

__all__ = ["parse"]

_UNKNOWN = frozenset({"tools"})


def _literal(value: Any, path: str) -> Any:
    """Fields SWE-agent sometimes stores as the ``repr`` of a Python list."""
    if not isinstance(value, str):
        return value
    try:
        return ast.literal_eval(value)
    except (ValueError, SyntaxError):
        try:
            return json.loads(value)
        except (ValueError, RecursionError):
            raise FormatError(path, "not a list literal") from None


class _Messages:
    """Converts history entries, one :class:`Message` per distinct entry."""

    def __init__(self) -> None:
        self._seen: dict[str, Message] = {}

    def get(self, entry: Any, path: str) -> Message:
        entry = as_dict(entry, path)
        key = json.dumps(entry, sort_keys=True, default=str)
        message = self._seen.get(key)
        if message is None:
            message = self._seen[key] = chat_message(_chat_shape(entry, path), path)
        return message


def _chat_shape(entry: Mapping[str, Any], path: str) -> dict[str, Any]:
    shaped: dict[str, Any] = {"role": entry.get("role"), "content": entry.get("content")}
    if entry.get("tool_calls"):
        shaped["tool_calls"] = _literal(entry["tool_calls"], f"{path}.tool_calls")
    ids = entry.get("tool_call_ids")
    if entry.get("role") == "tool":
        ids = _literal(ids, f"{path}.tool_call_ids") if ids else []
        shaped["tool_call_id"] = (
            ids[0] if isinstance(ids, list) and ids else entry.get("tool_call_id")
        )
    return shaped


def parse(data: bytes | str, *, name: str = "") -> list[ImportedSession]:
    """Parse a SWE-agent trajectory into one ``openai-chat`` session.

    Example:
        >>> traj = (
        ...     '{"history": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"},'
        ...     ' {"role": "assistant", "content": "a"}], "trajectory": [], "info": {}}'
        ... )
        >>> [len(t.context.messages) for t in parse(traj)[0].turns]
        [2]
    """
    document = as_dict(decode_json(data), "file")
    history = as_list(document.get("history"), "history")
    steps = document.get("trajectory")
    steps = steps if isinstance(steps, list) else []
    main_agent = history[0].get("agent") if history and isinstance(history[0], dict) else None
    convert = _Messages()

    entries: list[tuple[int, Message]] = []
    for i, entry in enumerate(history):
        if isinstance(entry, dict) and main_agent is not None and entry.get("agent") != main_agent:
            continue
        entries.append((i, convert.get(entry, f"history.{i}")))

    calls = [k for k, (_, message) in enumerate(entries) if message.role == "assistant"]
    step_messages = [s.get("messages") if isinstance(s, dict) else None for s in steps]
    use_steps = len(step_messages) == len(calls) and all(isinstance(m, list) for m in step_messages)

    turns: list[ImportedTurn] = []
    for n, k in enumerate(calls):
        if use_steps and n > 0:
            recorded = step_messages[n - 1]
            assert isinstance(recorded, list)
            context = tuple(
                convert.get(m, f"trajectory.{n - 1}.messages.{j}") for j, m in enumerate(recorded)
            )
        else:
            context = tuple(message for _, message in entries[:k])
        turns.append(
            ImportedTurn(
                context=Context("openai-chat", context),
                response=(entries[k][1],),
                usage=None,
                unknown=_UNKNOWN,
            )
        )
    if not turns:
        return []

    info = obj(document.get("info"))
    model = _model(document)
    metadata: dict[str, Any] = {
        k: info[k] for k in ("exit_status", "model_stats") if info.get(k) is not None
    }
    metadata["contexts_from_steps"] = use_steps
    stem = name.rsplit("/", 1)[-1].removesuffix(".traj")
    return [
        ImportedSession(
            external_id=stem or opt_str(document, "environment") or "swe-agent",
            model=model,
            format="openai-chat",
            turns=tuple(turns),
            source="swe-agent",
            metadata=metadata,
        )
    ]


def _model(document: Mapping[str, Any]) -> str | None:
    config = document.get("replay_config")
    if isinstance(config, str):
        try:
            config = json.loads(config)
        except (ValueError, RecursionError):
            return None
    agent = config.get("agent") if isinstance(config, dict) else None
    model = agent.get("model") if isinstance(agent, dict) else None
    name = model.get("name") if isinstance(model, dict) else None
    # "replay" means the file was re-run from a recording: the real model is not named.
    return name if isinstance(name, str) and name and name != "replay" else None
