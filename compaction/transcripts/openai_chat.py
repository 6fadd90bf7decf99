"""OpenAI Chat conversations saved as JSON.

Accepted shapes: one conversation (a list of messages, or ``{"messages": [...]}``, optionally with
``tools`` and ``model``), or a list of conversations (lists, ``{"messages": ...}`` objects, or
tau-bench results whose ``traj`` is the message list, sometimes as the ``repr`` of a Python list,
read with :func:`ast.literal_eval`, never evaluated).

Rebuilding: each assistant message is a model call; its context is the messages before it (the
system prompt is one of them), as slices of one tuple so turns share their messages. Tool
definitions are unknown unless the conversation records ``tools``. Usage is not recorded. Session
ids: ``id`` or ``task_id`` (tau-bench adds ``-trial-<n>``), else the file name and position.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import Any

from compaction.errors import FormatError
from compaction.messages.model import Context, ToolDefinition

from ._dialects import chat_message
from ._records import as_dict, as_list, decode_json, obj, opt_str
from .model import ImportedSession, ImportedTurn

__all__ = ["conversations", "parse"]


def _is_message(value: Any) -> bool:
    return isinstance(value, dict) and "role" in value


def conversations(document: Any) -> list[tuple[str, Mapping[str, Any], list[Any]]]:
    """``(path, the conversation's object, its messages)`` for each conversation in ``document``."""
    if isinstance(document, dict):
        return [("", document, _messages(document, ""))]
    items = as_list(document, "file")
    if not items or _is_message(items[0]):
        return [("", {}, items)]
    found: list[tuple[str, Mapping[str, Any], list[Any]]] = []
    for i, item in enumerate(items):
        path = str(i)
        if isinstance(item, list):
            found.append((path, {}, item))
        else:
            item = as_dict(item, path)
            found.append((path, item, _messages(item, path)))
    return found


def _messages(item: Mapping[str, Any], path: str) -> list[Any]:
    prefix = f"{path}." if path else ""
    if "messages" in item:
        return as_list(item["messages"], f"{prefix}messages")
    if "traj" in item:
        traj = item["traj"]
        if isinstance(traj, str):
            try:
                traj = ast.literal_eval(traj)
            except (ValueError, SyntaxError):
                raise FormatError(f"{prefix}traj", "not a message list literal") from None
        return as_list(traj, f"{prefix}traj")
    raise FormatError(path or "file", "expected messages, traj or a list of messages")


def _tools(value: Any, path: str) -> tuple[ToolDefinition, ...]:
    tools = []
    for i, tool in enumerate(as_list(value, path)):
        tool = as_dict(tool, f"{path}.{i}")
        function = obj(tool.get("function")) or tool
        rest = {k: v for k, v in tool.items() if k != "function"}
        tools.append(
            ToolDefinition(
                name=str(function.get("name") or ""),
                description=str(function.get("description") or ""),
                parameters=function.get("parameters") or {},
                extra=rest,
            )
        )
    return tuple(tools)


def _session_id(item: Mapping[str, Any], stem: str, index: int, single: bool) -> str:
    for key in ("id", "task_id", "conversation_id", "session_id"):
        value = item.get(key)
        if isinstance(value, str | int) and not isinstance(value, bool):
            base = f"task-{value}" if key == "task_id" else str(value)
            trial = item.get("trial")
            return f"{base}-trial-{trial}" if isinstance(trial, int) else base
    return stem if single else f"{stem}-{index}"


def parse(data: bytes | str, *, name: str = "") -> list[ImportedSession]:
    """Parse OpenAI Chat conversations: one session per conversation.

    Example:
        >>> doc = '[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}]'
        >>> [(s.external_id, len(s.turns)) for s in parse(doc, name="chat.json")]
        [('chat', 1)]
    """
    found = conversations(decode_json(data))
    stem = name.rsplit("/", 1)[-1].removesuffix(".json").removesuffix(".jsonl") or "openai-chat"
    sessions: list[ImportedSession] = []
    seen: dict[str, int] = {}
    for index, (path, item, raw) in enumerate(found):
        prefix = f"{path}." if path else ""
        messages = tuple(chat_message(m, f"{prefix}messages.{i}") for i, m in enumerate(raw))
        tools = _tools(item["tools"], f"{prefix}tools") if item.get("tools") else ()
        model = opt_str(item, "model")
        extra = {"model": model} if model else {}
        unknown = frozenset() if "tools" in item else frozenset({"tools"})
        turns = tuple(
            ImportedTurn(
                context=Context("openai-chat", messages[:k], tools=tools, extra=extra),
                response=(message,),
                unknown=unknown,
            )
            for k, message in enumerate(messages)
            if message.role == "assistant"
        )
        if not turns:
            continue
        external_id = _session_id(item, stem, index, len(found) == 1)
        if external_id in seen:
            seen[external_id] += 1
            external_id = f"{external_id}-{seen[external_id]}"
        else:
            seen[external_id] = 1
        metadata = {k: item[k] for k in ("reward", "task_id", "trial") if k in item}
        sessions.append(
            ImportedSession(external_id, model, "openai-chat", turns, "openai-chat", metadata)
        )
    return sessions
