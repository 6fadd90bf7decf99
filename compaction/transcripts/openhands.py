"""OpenHands output files (evaluation ``output.jsonl``, resolver ``output.jsonl``).

Each line is one run: ``instance_id`` (evaluation) or ``issue`` (resolver), ``metrics`` and a
``history`` of events. Recent versions write events with ``id``, ``source`` (agent, user,
environment), ``action`` or ``observation``, and for every tool call a ``tool_call_metadata``
holding the LLM's whole ``model_response`` (message, tool calls, usage). The first event is the
``system`` action: the system prompt and the tool definitions. Older resolver files hold flat
CodeAct events (``thought``, ``command``, ``code``) with neither ids nor model responses.

Rebuilding (recent): the system action becomes the system message and the tools; the user's
message action a user message; the agent actions sharing one ``model_response.id`` are one model
call, whose response is that model response's message and whose usage is its ``usage``;
observations with ``tool_call_metadata`` become tool messages and error observations user
messages. Recall observations (workspace context that OpenHands renders from templates) are left
out, so contexts are a close approximation, not a byte-exact copy (``metadata["approximate"]``).
Older files: each agent action is a model call whose response is its thought followed by the
command in CodeAct's ``<execute_bash>`` / ``<execute_ipython>`` tags, observations are
``OBSERVATION:`` user messages, and system prompt and tools are unknown.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from compaction.messages.model import Context, Message, TextPart, ToolDefinition, ToolResultPart

from ._dialects import chat_message, data_url_media, openai_usage
from ._records import as_list, iter_jsonl, obj, opt_str
from .model import ImportedSession, ImportedTurn

__all__ = ["parse"]

_CODEACT_TAGS = {"run": ("execute_bash", "command"), "run_ipython": ("execute_ipython", "code")}


def parse(data: bytes | str, *, name: str = "") -> list[ImportedSession]:
    """Parse an OpenHands output JSONL: one session per line.

    Example:
        >>> line = ('{"instance_id": "x", "history": [{"id": 0, "source": "user", '
        ...         '"action": "message", "args": {"content": "fix it"}}]}')
        >>> parse(line)
        []
    """
    stem = name.rsplit("/", 1)[-1].removesuffix(".jsonl") or "openhands"
    sessions: list[ImportedSession] = []
    for number, record in iter_jsonl(data):
        history = as_list(record.get("history"), f"line {number}.history")
        events = [e for e in history if isinstance(e, dict)]
        recent = any("source" in e for e in events)
        if recent:
            turns, model = _recent(events)
        else:
            turns, model = _codeact(events)
        if not turns:
            continue
        metadata = _metadata(record)
        metadata["approximate"] = True
        model = model or _configured_model(record)
        sessions.append(
            ImportedSession(
                external_id=_session_id(record, stem, number),
                model=model,
                format="openai-chat",
                turns=tuple(turns),
                source="openhands",
                metadata=metadata,
            )
        )
    return sessions


def _session_id(record: Mapping[str, Any], stem: str, number: int) -> str:
    instance = record.get("instance_id")
    if isinstance(instance, str | int) and not isinstance(instance, bool):
        return str(instance)
    issue = record.get("issue")
    if isinstance(issue, dict) and issue.get("repo") and issue.get("number") is not None:
        return f"{issue.get('owner')}/{issue.get('repo')}#{issue.get('number')}"
    return f"{stem}-{number}"


def _configured_model(record: Mapping[str, Any]) -> str | None:
    meta = record.get("metadata")
    config = meta.get("llm_config") if isinstance(meta, dict) else None
    return opt_str(config, "model") if isinstance(config, dict) else None


def _metadata(record: Mapping[str, Any]) -> dict[str, Any]:
    metadata: dict[str, Any] = {}
    metrics = record.get("metrics")
    if isinstance(metrics, dict):
        for key in ("accumulated_cost", "accumulated_token_usage"):
            if key in metrics:
                metadata[key] = metrics[key]
    meta = record.get("metadata")
    if isinstance(meta, dict) and isinstance(meta.get("agent_class"), str):
        metadata["agent_class"] = meta["agent_class"]
    return metadata


def _tools(value: Any) -> tuple[ToolDefinition, ...]:
    tools: list[ToolDefinition] = []
    for tool in value if isinstance(value, list) else []:
        if not isinstance(tool, dict):
            continue
        function = obj(tool.get("function")) or tool
        tools.append(
            ToolDefinition(
                name=str(function.get("name") or ""),
                description=str(function.get("description") or ""),
                parameters=function.get("parameters") or {},
                extra={k: v for k, v in tool.items() if k != "function"},
            )
        )
    return tuple(tools)


def _recent(events: list[dict[str, Any]]) -> tuple[list[ImportedTurn], str | None]:
    messages: tuple[Message, ...] = ()
    tools: tuple[ToolDefinition, ...] = ()
    known = False
    turns: list[ImportedTurn] = []
    model: str | None = None
    current: str | None = None  # model_response.id of the call being read
    pending: tuple[Mapping[str, Any], ...] = ()
    for event in events:
        args = obj(event.get("args"))
        action = event.get("action")
        metadata = event.get("tool_call_metadata")
        response = metadata.get("model_response") if isinstance(metadata, dict) else None
        if action == "system":
            known = True
            tools = _tools(args.get("tools"))
            messages = (*messages, Message("system", (TextPart(str(args.get("content") or "")),)))
        elif action == "condensation":
            pending = (
                *pending,
                {"type": "compaction", "source": "openhands", "timestamp": event.get("timestamp")},
            )
        elif action == "message" and event.get("source") == "user":
            parts: list[Any] = [TextPart(str(args.get("content") or ""))]
            parts += [data_url_media(str(u)) for u in args.get("image_urls") or [] if u]
            messages = (*messages, Message("user", tuple(parts)))
        elif action is not None and isinstance(response, dict):
            response_id = str(response.get("id") or id(response))
            if response_id == current:
                continue  # another tool call of the same response
            current = response_id
            answer = _response_message(response)
            model = opt_str(response, "model") or model
            turns.append(
                ImportedTurn(
                    context=Context("openai-chat", messages, tools=tools),
                    response=(answer,),
                    usage=openai_usage(response.get("usage")),
                    unknown=frozenset() if known else frozenset({"system", "tools"}),
                    events=pending,
                    timestamp=opt_str(event, "timestamp"),
                )
            )
            pending = ()
            messages = (*messages, answer)
        elif action == "message" and event.get("source") == "agent":
            answer = Message("assistant", (TextPart(str(args.get("content") or "")),))
            turns.append(
                ImportedTurn(
                    context=Context("openai-chat", messages, tools=tools),
                    response=(answer,),
                    unknown=frozenset() if known else frozenset({"system", "tools"}),
                    events=pending,
                    timestamp=opt_str(event, "timestamp"),
                )
            )
            pending = ()
            messages = (*messages, answer)
        elif "observation" in event and isinstance(metadata, dict):
            result = ToolResultPart(
                str(metadata.get("tool_call_id") or ""),
                (TextPart(str(event.get("content") or "")),),
            )
            messages = (
                *messages,
                Message("tool", (result,), name=opt_str(metadata, "function_name")),
            )
        elif event.get("observation") == "error":
            messages = (*messages, Message("user", (TextPart(str(event.get("content") or "")),)))
    return turns, model


def _response_message(response: Mapping[str, Any]) -> Message:
    choices = response.get("choices")
    choice = (
        choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
    )
    raw = obj(choice.get("message"))
    shaped = {k: raw.get(k) for k in ("role", "content", "tool_calls")}
    shaped["role"] = shaped["role"] or "assistant"
    return chat_message(shaped, "model_response.choices.0.message")


def _codeact(events: list[dict[str, Any]]) -> tuple[list[ImportedTurn], str | None]:
    messages: tuple[Message, ...] = ()
    turns: list[ImportedTurn] = []
    unknown = frozenset({"system", "tools"})
    for event in events:
        action = event.get("action")
        if action == "message" and not turns and not any(m.role == "user" for m in messages):
            messages = (*messages, Message("user", (TextPart(str(event.get("content") or "")),)))
        elif action is not None:
            text = str(event.get("thought") or event.get("content") or "")
            tag = _CODEACT_TAGS.get(str(action))
            if tag is not None and event.get(tag[1]):
                text = f"{text}\n<{tag[0]}>\n{event[tag[1]]}\n</{tag[0]}>".lstrip("\n")
            answer = Message("assistant", (TextPart(text),))
            turns.append(
                ImportedTurn(
                    context=Context("openai-chat", messages), response=(answer,), unknown=unknown
                )
            )
            messages = (*messages, answer)
        elif "observation" in event:
            text = f"OBSERVATION:\n{event.get('content') or ''}"
            messages = (*messages, Message("user", (TextPart(text),)))
    return turns, None
