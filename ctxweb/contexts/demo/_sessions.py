"""The generated sessions: :func:`coding_session`'s ingest bodies, rendered as OpenAI chat or
Anthropic messages, with reported usage, and the generator's token estimate.
"""

from __future__ import annotations

import json
import random
from typing import Any, Literal

from compaction.regions import BASEAGENT_SUMMARY_PREFIX
from ctxweb.contexts.demo._agent import _Agent, _Step
from ctxweb.contexts.demo._vocabulary import _TOOLS, SYSTEM_PROMPT

DemoFormat = Literal["openai-chat", "anthropic-messages"]


#: Characters per token of the generated text (code, logs, prose) under o200k and cl100k: the
#: generator sizes its outputs with it and reports usage from it.
CHARS_PER_TOKEN = 3.6

#: How the summary message of a compaction begins: BaseAgent's prefix or LLM4S's marker.
SUMMARY_PREFIXES = {
    "baseagent": BASEAGENT_SUMMARY_PREFIX,
    "history": "[HISTORY_SUMMARY]\n",
}


def estimate_tokens(text: str) -> int:
    """The generator's estimate of the tokens of ``text`` (:data:`CHARS_PER_TOKEN`)."""
    return int(len(text) / CHARS_PER_TOKEN)


def _render_openai(step: _Step) -> list[dict[str, Any]]:
    if step.kind == "user":
        return [{"role": "user", "content": step.text}]
    message: dict[str, Any] = {"role": "assistant", "content": step.text or None}
    if step.calls:
        message["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
            }
            for c in step.calls
        ]
    results = [{"role": "tool", "tool_call_id": i, "content": r} for i, r in step.results]
    return [message, *results]


def _render_anthropic(step: _Step) -> list[dict[str, Any]]:
    if step.kind == "user":
        return [{"role": "user", "content": step.text}]
    content: list[dict[str, Any]] = [{"type": "text", "text": step.text}] if step.text else []
    content += [
        {"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments} for c in step.calls
    ]
    message = {"role": "assistant", "content": content}
    if not step.results:
        return [message]
    results = [{"type": "tool_result", "tool_use_id": i, "content": r} for i, r in step.results]
    return [message, {"role": "user", "content": results}]


def coding_session(
    turns: int,
    *,
    seed: int,
    target_tokens: int = 40_000,
    format: DemoFormat = "openai-chat",
    model: str | None = None,
    max_output_tokens: int | None = None,
    compact_at: int | None = None,
    summary_marker: str = "baseagent",
    user_every: tuple[int, int] = (12, 30),
) -> list[dict[str, Any]]:
    """The ingest bodies of a coding agent's ``turns`` model calls.

    Args:
        turns: how many model calls (bodies) to generate.
        seed: the seed; the same arguments always give the same bodies.
        target_tokens: about how many tokens the last context holds (and the context just before
            a compaction).
        format: ``"openai-chat"`` or ``"anthropic-messages"``.
        model: the model named in the requests (default ``gpt-4o`` or ``claude-sonnet-4-5``).
        max_output_tokens: the request's ``max_tokens`` (default 4,096 or 8,192).
        compact_at: the turn at which the context drops to the system prompt and a summary
            message (``SUMMARY_PREFIXES[summary_marker]``); it then grows to ``target_tokens``
            again by the last turn.
        user_every: after how many calls (a range) the agent reports and the user asks for more.

    Returns:
        One body per call: ``{"format", "model", "turn_id", "request", "usage"}``.

    Example:
        >>> bodies = coding_session(40, seed=7, target_tokens=20_000, compact_at=20)
        >>> bodies[20]["request"]["messages"][1]["content"].startswith("Another language model")
        True
    """
    if format not in ("openai-chat", "anthropic-messages"):
        raise ValueError(f"unsupported format {format!r}")
    if compact_at is not None and not 0 < compact_at < turns:
        raise ValueError("compact_at must be between 0 and turns")
    anthropic = format == "anthropic-messages"
    model = model or ("claude-sonnet-4-5" if anthropic else "gpt-4o")
    max_output_tokens = max_output_tokens or (8_192 if anthropic else 4_096)
    rng = random.Random(seed)
    agent = _Agent(rng, "toolu_01" if anthropic else "call_")
    repo = agent.repo
    system = SYSTEM_PROMPT.format(root=repo.root, python="3.12", package=repo.package)
    render = _render_anthropic if anthropic else _render_openai
    if anthropic:
        tools = [
            {"name": t["name"], "description": t["description"], "input_schema": t["parameters"]}
            for t in _TOOLS
        ]
        head: dict[str, Any] = {
            "model": model,
            "max_tokens": max_output_tokens,
            "system": [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}],
            "tools": tools,
        }
        messages: list[dict[str, Any]] = []
    else:
        tools = [{"type": "function", "function": t} for t in _TOOLS]
        head = {"model": model, "max_tokens": max_output_tokens, "tools": tools}
        messages = [{"role": "system", "content": system}]
    base_chars = len(system) + len(json.dumps(tools))
    first = _Step("user", text=agent.task())
    messages += render(first)
    chars = base_chars + first.size()
    phase_end = compact_at if compact_at is not None else turns
    next_user = rng.randint(*user_every)
    previous_tokens = 0
    bodies: list[dict[str, Any]] = []
    for index in range(turns):
        if index == compact_at:
            summary = _Step("user", text=agent.summary(SUMMARY_PREFIXES[summary_marker], index))
            messages = messages[:1] if not anthropic else []
            messages += render(summary)
            chars = base_chars + summary.size()
            phase_end = turns
        tokens = int(chars / CHARS_PER_TOKEN)
        bodies.append(
            {
                "format": format,
                "model": model,
                "turn_id": f"turn-{index:04d}",
                "request": {**head, "messages": list(messages)},
                "usage": _usage(anthropic, tokens, previous_tokens, rng),
            }
        )
        previous_tokens = tokens
        if index == turns - 1:
            break
        if index + 1 == next_user and index + 1 != compact_at:
            steps = [_Step("assistant", text=agent.report()), _Step("user", text=agent.task())]
            next_user += rng.randint(*user_every)
        else:
            left = max(1, phase_end - index - 1)
            per_turn = (target_tokens * CHARS_PER_TOKEN - chars) / left
            # Outputs vary a lot in size: a few big reads and logs, many small edits and greps.
            budget = int(per_turn * rng.lognormvariate(0, 0.9) / 1.5) - 250
            budget = min(budget, int(max(per_turn, 0) * 8))
            steps = [agent.step(max(60, budget))]
        for step in steps:
            messages += render(step)
            chars += step.size()
    return bodies


def _usage(anthropic: bool, tokens: int, cached: int, rng: random.Random) -> dict[str, Any]:
    """Reported usage for a context of about ``tokens``: the prefix of the last call is cached."""
    output = rng.randint(40, 600)
    cached = min(cached, tokens)
    if anthropic:
        return {
            "input_tokens": 3,
            "cache_read_input_tokens": cached,
            "cache_creation_input_tokens": max(0, tokens - cached - 3),
            "output_tokens": output,
        }
    return {
        "prompt_tokens": tokens,
        "completion_tokens": output,
        "total_tokens": tokens + output,
        "prompt_tokens_details": {"cached_tokens": cached // 128 * 128},
    }
