"""Transcript import: every real transcript parses by auto-detection into the sessions and turns
counted by hand, and synthetic records cover what the real files lack (compactions, thinking)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import compaction.transcripts as transcripts
from compaction import messages
from compaction.errors import FormatError
from compaction.messages.model import MediaPart, Message, ReasoningPart, TextPart, ToolCallPart
from compaction.transcripts import ImportedSession, detect_format, parse_transcript

# (file, detected format, request format, turns per session) — counted from the raw files:
# Claude Code: distinct assistant message ids per session / sidechain root, plus one pending turn
# where the conversation ends on a user message (agentcmd-session-five, image-message); Codex:
# runs of model items (equal to the token_count events); SWE-agent: assistant entries; OpenHands:
# distinct model_response ids (recent) or agent actions (resolver); tau-bench: assistant messages.
EXPECTED: list[tuple[str, str, str, list[int]]] = [
    (
        "anthropic-messages/claude-trace-traffic.jsonl",
        "anthropic-messages",
        "anthropic-messages",
        [14, 3, 47],
    ),
    ("claude-code/agentcmd-session-five.jsonl", "claude-code", "anthropic-messages", [4]),
    ("claude-code/agentcmd-session-four.jsonl", "claude-code", "anthropic-messages", [30]),
    ("claude-code/agentcmd-session-two.jsonl", "claude-code", "anthropic-messages", [11]),
    ("claude-code/image-message.jsonl", "claude-code", "anthropic-messages", [1]),
    ("claude-code/sniffly-ai-music-ba79134d.jsonl", "claude-code", "anthropic-messages", [24]),
    ("claude-code/sniffly-ai-music-d3ad4cdc.jsonl", "claude-code", "anthropic-messages", [62]),
    ("claude-code/sniffly-ai-music-fed8ce56.jsonl", "claude-code", "anthropic-messages", [4]),
    ("claude-code/viewer-sample-1af7fc5e.jsonl", "claude-code", "anthropic-messages", [7]),
    ("claude-code/viewer-sample-5c0375b4.jsonl", "claude-code", "anthropic-messages", [10, 3, 7]),
    (
        "claude-code/viewer-sample-fe5e1c67.jsonl",
        "claude-code",
        "anthropic-messages",
        [9, 9, 34, 40, 25, 53],
    ),
    ("codex/agentcmd-rollout-0924-1922.jsonl", "codex", "openai-responses", [132]),
    ("codex/agentcmd-rollout-0924-2012.jsonl", "codex", "openai-responses", [18]),
    ("codex/agentcmd-rollout-0925-0949.jsonl", "codex", "openai-responses", [85]),
    ("openhands/multi-swe-bench-output.jsonl", "openhands", "openai-chat", [23, 33, 49]),
    ("openhands/resolver-output.jsonl", "openhands", "openai-chat", [4, 22]),
    ("swe-agent/ctf-crypto-katy.traj", "swe-agent", "openai-chat", [18]),
    ("swe-agent/ctf-web-i-got-id.traj", "swe-agent", "openai-chat", [21]),
    ("swe-agent/marshmallow-1867-function-calling.traj", "swe-agent", "openai-chat", [13]),
    ("swe-agent/pydicom-1458.traj", "swe-agent", "openai-chat", [12]),
]
TAU = "openai-chat/tau-bench-gpt-4o-airline.json"


def load(folder: Path, relative: str) -> list[ImportedSession]:
    path = folder / relative
    return parse_transcript(path.read_bytes(), name=path.name)


def test_the_public_api_is_pinned() -> None:
    assert transcripts.__all__ == [
        "TRANSCRIPT_FORMATS",
        "ImportedSession",
        "ImportedTurn",
        "detect_format",
        "parse_transcript",
    ]
    assert set(transcripts.TRANSCRIPT_FORMATS) == {
        "claude-code",
        "codex",
        "swe-agent",
        "openhands",
        "openai-chat",
        "anthropic-messages",
    }


def test_every_transcript_file_is_covered(transcripts: Path) -> None:
    files = {
        str(p.relative_to(transcripts)) for p in transcripts.glob("*/*") if p.name != "README.md"
    }
    assert files == {row[0] for row in EXPECTED} | {TAU}


@pytest.mark.parametrize(("relative", "detected", "request_format", "turns"), EXPECTED)
def test_it_parses_each_transcript_by_detection(
    transcripts: Path, relative: str, detected: str, request_format: str, turns: list[int]
) -> None:
    data = (transcripts / relative).read_bytes()
    assert detect_format(Path(relative).name, data) == detected
    assert detect_format("", data) == detected  # content decides, not the name
    sessions = load(transcripts, relative)
    assert [len(s.turns) for s in sessions] == turns
    assert {s.format for s in sessions} == {request_format}
    assert {s.source for s in sessions} == {detected}
    assert len({s.external_id for s in sessions}) == len(sessions)
    for session in sessions:
        for turn in session.turns:
            assert turn.context.format == request_format


@pytest.mark.parametrize("relative", [row[0] for row in EXPECTED])
def test_each_turn_renders_to_a_request_that_parses_back(transcripts: Path, relative: str) -> None:
    for session in load(transcripts, relative):
        for turn in session.turns:
            body = messages.render(turn.context)
            again = messages.parse(turn.context.format, body)
            assert len(again.messages) == len(turn.context.messages)


def test_tau_bench_gives_one_session_per_task_and_trial(transcripts: Path) -> None:
    sessions = load(transcripts, TAU)
    assert len(sessions) == 200
    assert sum(len(s.turns) for s in sessions) == 2454  # the assistant messages
    assert sessions[0].external_id == "task-0-trial-0"
    assert sessions[-1].external_id == "task-49-trial-3"
    first = sessions[0].turns[0]
    assert first.context.messages[0].role == "system"
    assert first.unknown == frozenset({"tools"})
    assert first.usage is None
    calls = [t for s in sessions for t in s.turns if t.response[0].tool_calls]
    assert calls
    turn = sessions[0].turns[0]
    assert messages.render(turn.context)["messages"][0]["role"] == "system"


def assistant_ids(path: Path) -> Counter[tuple[str, bool]]:
    """Distinct assistant message ids per (session, sidechain), straight from the file."""
    ids: set[tuple[str, bool, str]] = set()
    for line in path.read_text().splitlines():
        record = json.loads(line)
        if record.get("type") == "assistant":
            ids.add((record["sessionId"], record["isSidechain"], record["message"]["id"]))
    return Counter((sid, side) for sid, side, _ in ids)


def test_claude_code_turns_are_distinct_assistant_message_ids(transcripts: Path) -> None:
    path = transcripts / "claude-code/viewer-sample-fe5e1c67.jsonl"
    counts = assistant_ids(path)
    sessions = load(transcripts, "claude-code/viewer-sample-fe5e1c67.jsonl")
    main, *subagents = sessions
    sid = "fe5e1c67-53e7-4862-81ae-d0e013e3270b"
    assert main.external_id == sid
    assert len(main.turns) == counts[(sid, False)] == 9
    assert sum(len(s.turns) for s in subagents) == counts[(sid, True)] == 161
    assert [s.external_id for s in subagents] == [f"{sid}:sidechain-{n}" for n in range(1, 6)]
    assert all(s.metadata["parent_session"] == sid for s in subagents)
    # Each sub-agent starts from the Task prompt alone.
    assert all(len(s.turns[0].context.messages) == 1 for s in subagents)


def test_claude_code_keeps_usage_with_cache_tokens_in_the_input(transcripts: Path) -> None:
    [session] = load(transcripts, "claude-code/sniffly-ai-music-d3ad4cdc.jsonl")
    assert session.model
    assert session.model.startswith("claude")
    first = session.turns[0]
    # input_tokens 4 + cache_creation 3968 + cache_read 10215
    assert first.usage == {
        "input_tokens": 14187,
        "output_tokens": 5,
        "cache_read_tokens": 10215,
        "cache_write_tokens": 3968,
    }
    assert all(t.usage is not None for t in session.turns)
    assert all(t.unknown == frozenset({"system", "tools"}) for t in session.turns)


def test_claude_code_merges_a_response_split_over_records(transcripts: Path) -> None:
    [session] = load(transcripts, "claude-code/sniffly-ai-music-d3ad4cdc.jsonl")
    # msg_012Jgepu2CuNk9cFtB5i3GLM: two records, one Read call each
    second_call = session.turns[1]
    assert [p.name for p in second_call.response[0].tool_calls] == ["Read", "Read"]
    # ...and both tool results go back in one user message
    after = session.turns[2].context.messages[-1]
    assert after.role == "user"
    assert len(after.tool_results) == 2


def test_contexts_grow_and_share_message_objects(transcripts: Path) -> None:
    for relative in (
        "claude-code/viewer-sample-fe5e1c67.jsonl",
        "codex/agentcmd-rollout-0924-1922.jsonl",
        "openhands/multi-swe-bench-output.jsonl",
        "anthropic-messages/claude-trace-traffic.jsonl",
    ):
        for session in load(transcripts, relative):
            if session.metadata.get("misc"):
                continue
            for before, after in zip(session.turns, session.turns[1:], strict=False):
                old, new = before.context.messages, after.context.messages
                assert len(new) > len(old), relative
                # everything but a trailing user message (merged with later tool results) is
                # the very same object; claude-trace requests really differ where Claude Code
                # moved cache_control or rewrote the first message, and share the rest
                kept = old[:-1] if old and old[-1].role == "user" else old
                pairs = list(zip(kept, new, strict=False))
                if relative.startswith("anthropic"):
                    pairs = [(a, b) for a, b in pairs if a == b]
                    assert len(pairs) >= len(kept) - 2
                assert all(a is b for a, b in pairs), relative


def test_the_response_is_the_message_the_next_context_holds(transcripts: Path) -> None:
    [session] = load(transcripts, "claude-code/agentcmd-session-four.jsonl")
    for before, after in zip(session.turns, session.turns[1:], strict=False):
        assert after.context.messages[len(before.context.messages)] is before.response[0]


def test_claude_code_images_stay_media(transcripts: Path) -> None:
    [session] = load(transcripts, "claude-code/image-message.jsonl")
    [turn] = session.turns  # a pending call: the file ends on the user's message
    assert turn.response == ()
    assert turn.usage is None
    media = [p for m in turn.context.messages for p in m.parts if isinstance(p, MediaPart)]
    assert len(media) == 2
    assert all(p.media == "image" and p.media_type == "image/png" for p in media)
    assert all(p.data and p.data.startswith("iVBORw0KGgo") for p in media)


def test_codex_images_stay_media(transcripts: Path) -> None:
    [session] = load(transcripts, "codex/agentcmd-rollout-0924-2012.jsonl")
    media = [
        p for m in session.turns[0].context.messages for p in m.parts if isinstance(p, MediaPart)
    ]
    assert len(media) == 1
    assert media[0].media_type == "image/png"
    assert media[0].data


def test_codex_usage_comes_from_token_count_events(transcripts: Path) -> None:
    [session] = load(transcripts, "codex/agentcmd-rollout-0924-2012.jsonl")
    assert session.external_id == "01997ea4-a70d-7da3-8c20-c736db82a7c5"
    assert session.model == "gpt-5-codex"
    assert session.turns[0].usage == {
        "input_tokens": 3587,
        "output_tokens": 229,
        "cache_read_tokens": 2560,
        "cache_write_tokens": 0,
    }
    assert session.turns[1].usage is not None
    assert session.turns[1].usage["input_tokens"] == 3984
    assert all(t.usage for t in session.turns)
    # instructions is null in this rollout: the system prompt was not recorded
    assert session.turns[0].unknown == frozenset({"system", "tools"})
    assert session.turns[0].context.system == ()
    kinds = [type(p).__name__ for m in session.turns[0].response for p in m.parts]
    assert kinds == ["ReasoningPart", "ToolCallPart"]


def test_swe_agent_contexts_come_from_the_recorded_step_messages(transcripts: Path) -> None:
    [session] = load(transcripts, "swe-agent/marshmallow-1867-function-calling.traj")
    assert session.metadata["contexts_from_steps"] is True
    last = session.turns[-1].context.messages
    assert last[0].role == "system"
    # last_n_observations had elided old outputs in what was really sent
    assert any("Old environment output" in r.text for m in last for r in m.tool_results)
    assert session.turns[0].response[0].tool_calls[0].name == "bash"
    assert all(t.unknown == frozenset({"tools"}) for t in session.turns)


def test_swe_agent_history_only_trajectories(transcripts: Path) -> None:
    [session] = load(transcripts, "swe-agent/pydicom-1458.traj")
    assert session.metadata["contexts_from_steps"] is False
    assert session.metadata["model_stats"]["api_calls"] == 12 == len(session.turns)
    assert [len(t.context.messages) for t in session.turns[:3]] == [3, 5, 7]


def test_openhands_keeps_tools_system_and_per_call_usage(transcripts: Path) -> None:
    sessions = load(transcripts, "openhands/multi-swe-bench-output.jsonl")
    assert [s.external_id for s in sessions] == [
        "ponylang__ponyc-4595",
        "ponylang__ponyc-4593",
        "ponylang__ponyc-4588",
    ]
    first = sessions[0].turns[0]
    assert first.unknown == frozenset()
    assert [t.name for t in first.context.tools][:1] == ["execute_bash"]
    assert first.context.messages[0].role == "system"
    assert first.usage == {
        "input_tokens": 5920,
        "output_tokens": 128,
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
    }
    assert all(t.usage for s in sessions for t in s.turns)


def test_openhands_old_resolver_output(transcripts: Path) -> None:
    sessions = load(transcripts, "openhands/resolver-output.jsonl")
    assert [s.external_id for s in sessions] == ["neubig/pr-viewer#5", "neubig/pr-viewer#1"]
    turn = sessions[0].turns[0]
    assert turn.unknown == frozenset({"system", "tools"})
    assert "<execute_bash>\ntouch LICENSE\n</execute_bash>" in turn.response[0].text


def test_claude_trace_groups_conversations_and_keeps_requests_exact(transcripts: Path) -> None:
    path = transcripts / "anthropic-messages/claude-trace-traffic.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    main, second, misc = load(transcripts, "anthropic-messages/claude-trace-traffic.jsonl")
    assert main.external_id == "claude-trace-traffic:1"
    assert misc.external_id == "claude-trace-traffic:misc"
    assert misc.metadata["misc"] is True
    assert messages.render(main.turns[0].context) == records[5]["request"]["body"]
    assert main.turns[0].unknown == frozenset()
    assert len(main.turns[0].context.tools) == 17
    # streamed response rebuilt from server-sent events
    assert main.turns[1].response[0].tool_calls[0].name == "LS"
    assert main.turns[1].usage == {
        "input_tokens": 6 + 304 + 15032,
        "output_tokens": 70,
        "cache_read_tokens": 15032,
        "cache_write_tokens": 304,
    }
    assert all(t.usage for s in (main, second, misc) for t in s.turns)


# --- synthetic records: what the real files lack ---------------------------------------------


def jsonl(*records: dict[str, Any]) -> bytes:
    return "\n".join(json.dumps(r) for r in records).encode()


def cc(uuid: str, parent: str | None, kind: str, content: Any, **more: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "type": kind,
        "uuid": uuid,
        "parentUuid": parent,
        "sessionId": "s1",
        "isSidechain": False,
        "timestamp": f"2025-01-01T00:00:0{len(uuid)}Z",
    }
    if kind in ("user", "assistant"):
        record["message"] = {"role": kind, "content": content}
    record.update(more)
    return record


def test_claude_code_compact_boundary_restarts_the_context() -> None:
    usage = {"input_tokens": 5, "cache_read_input_tokens": 10, "output_tokens": 2}
    data = jsonl(
        cc("u1", None, "user", "hello"),
        cc("a1", "u1", "assistant", [{"type": "thinking", "thinking": "hmm", "signature": "sig"}]),
        cc("a2", "a1", "assistant", [{"type": "text", "text": "hi"}]),
        cc(
            "b1",
            None,
            "system",
            None,
            subtype="compact_boundary",
            logicalParentUuid="a2",
            compactMetadata={"trigger": "auto", "preTokens": 150000},
        ),
        cc("u2", "b1", "user", "This session is being continued...", isCompactSummary=True),
        cc("a3", "u2", "assistant", [{"type": "text", "text": "ok"}]),
    )
    records = [json.loads(line) for line in data.decode().splitlines()]
    for record, mid in ((records[1], "m1"), (records[2], "m1"), (records[5], "m2")):
        record["message"].update(id=mid, model="claude-x", usage=usage)
    data = jsonl(*records)
    assert detect_format("", data) == "claude-code"
    [session] = parse_transcript(data)
    first, second = session.turns
    assert [type(p) for p in first.response[0].parts] == [ReasoningPart, TextPart]
    assert first.usage is not None
    assert first.usage["input_tokens"] == 15
    assert first.events == ()
    [summary] = second.context.messages
    assert summary.extra["isCompactSummary"] is True
    assert second.events == (
        {
            "type": "compaction",
            "source": "claude-code",
            "trigger": "auto",
            "pre_tokens": 150000,
            "timestamp": records[3]["timestamp"],
        },
    )


def codex_line(kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {"timestamp": "2025-01-01T00:00:00Z", "type": kind, "payload": payload}


def user_item(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def test_codex_compacted_replaces_the_history() -> None:
    usage = {"input_tokens": 100, "cached_input_tokens": 40, "output_tokens": 7}
    answer = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "a"}],
    }
    data = jsonl(
        codex_line("session_meta", {"id": "r1", "instructions": "Be terse."}),
        codex_line("turn_context", {"model": "gpt-5"}),
        codex_line("response_item", user_item("one")),
        codex_line(
            "response_item",
            {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c1"},
        ),
        codex_line("event_msg", {"type": "token_count", "info": {"last_token_usage": usage}}),
        codex_line(
            "response_item", {"type": "function_call_output", "call_id": "c1", "output": "ok"}
        ),
        codex_line("response_item", answer),
        codex_line(
            "compacted",
            {"message": "summary", "replacement_history": [user_item("one"), user_item("summary")]},
        ),
        codex_line("response_item", user_item("two")),
        codex_line("response_item", answer),
        codex_line("compacted", {"message": "summary two"}),
        codex_line("response_item", answer),
    )
    [session] = parse_transcript(data)
    assert [len(t.context.messages) for t in session.turns] == [1, 3, 3, 1]
    first = session.turns[0]
    assert first.usage == {
        "input_tokens": 100,
        "output_tokens": 7,
        "cache_read_tokens": 40,
        "cache_write_tokens": 0,
    }
    assert first.unknown == frozenset({"tools"})
    assert first.context.system[0].text == "Be terse."  # type: ignore[union-attr]
    assert [e["type"] for t in session.turns for e in t.events] == ["compaction", "compaction"]
    assert session.turns[2].events[0]["source"] == "codex"
    assert session.turns[3].context.messages[0].extra == {"compacted": True}


def test_codex_old_layout_without_wrappers() -> None:
    data = jsonl(
        {"id": "old-1", "timestamp": "2025-05-01T00:00:00Z", "instructions": None},
        {"record_type": "state"},
        user_item("hi"),
        {
            "type": "local_shell_call",
            "call_id": "c1",
            "status": "completed",
            "action": {"type": "exec", "command": ["ls"]},
        },
        {
            "type": "function_call_output",
            "call_id": "c1",
            "output": {"content": "a.txt", "success": True},
        },
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "done"}],
        },
    )
    assert detect_format("rollout.jsonl", data) == "codex"
    [session] = parse_transcript(data)
    assert session.external_id == "old-1"
    first, second = session.turns
    [call] = first.response[0].tool_calls
    assert isinstance(call, ToolCallPart)
    assert call.name == "local_shell"
    assert second.context.messages[-1].tool_results[0].text == "a.txt"


@given(
    st.lists(st.sampled_from(["user", "assistant", "tool"]), max_size=12),
)
def test_openai_chat_makes_one_turn_per_assistant_message(roles: list[str]) -> None:
    conversation = [{"role": "system", "content": "s"}] + [
        {"role": r, "content": f"m{i}", **({"tool_call_id": "x"} if r == "tool" else {})}
        for i, r in enumerate(roles)
    ]
    sessions = parse_transcript(json.dumps({"messages": conversation}).encode(), name="c.json")
    positions = [i for i, m in enumerate(conversation) if m["role"] == "assistant"]
    turns = sessions[0].turns if sessions else ()
    assert [len(t.context.messages) for t in turns] == positions
    for turn in turns:
        assert isinstance(turn.response[0], Message)


def test_openai_chat_reads_tau_bench_repr_strings_safely() -> None:
    traj = repr([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}])
    data = json.dumps([{"task_id": 7, "traj": traj}]).encode()
    [session] = parse_transcript(data, format="openai-chat")
    assert session.external_id == "task-7"
    evil = json.dumps([{"task_id": 1, "traj": "__import__('os').system('true')"}]).encode()
    with pytest.raises(FormatError) as error:
        parse_transcript(evil, format="openai-chat")
    assert error.value.path == "0.traj"


# --- malformed input -------------------------------------------------------------------------


def test_a_bad_line_is_named() -> None:
    good = json.dumps(cc("u1", None, "user", "hi"))
    data = f"{good}\n{good}\nnot json at all\n".encode()
    with pytest.raises(FormatError) as error:
        parse_transcript(data, format="claude-code")
    assert str(error.value) == "line 3: not JSON"


def test_a_bad_field_is_named() -> None:
    record = cc("u1", None, "user", "hi")
    record["message"] = {"role": 7, "content": "hi"}
    with pytest.raises(FormatError) as error:
        parse_transcript(jsonl(record), format="claude-code")
    assert error.value.path == "line 1.message.role"


def test_swe_agent_history_must_be_a_list() -> None:
    with pytest.raises(FormatError) as error:
        parse_transcript(b'{"history": 3, "trajectory": []}')
    assert error.value.path == "history"


def test_unknown_content_and_formats_are_refused() -> None:
    with pytest.raises(FormatError) as error:
        detect_format("notes.txt", b"hello there")
    assert error.value.path == "format"
    with pytest.raises(FormatError):
        parse_transcript(b"", name="empty.jsonl")
    with pytest.raises(FormatError) as error:
        parse_transcript(b"[]", format="langfuse")
    assert error.value.path == "format"
    with pytest.raises(FormatError) as error:
        parse_transcript(b'{"a": 1}\x00', format="codex")
    assert "NUL" in error.value.reason
    with pytest.raises(FormatError) as error:
        parse_transcript(b"\xff\xfe", format="codex")
    assert error.value.path == "file"


def test_a_bad_trace_body_is_named() -> None:
    line = {"request": {"body": {"messages": [{"role": "user", "content": [{"type": "text"}]}]}}}
    with pytest.raises(FormatError) as error:
        parse_transcript(jsonl(line))
    assert error.value.path == "line 1.request.body.messages.0.content.0.text"
