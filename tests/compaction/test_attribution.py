"""Attribution by item: exact tokens per tool definition, call, output, file and instruction
block, and the items of each region add up to the region, on hand-made contexts, generated
requests and the real transcripts."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter as Tally
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import compaction.attribution
from compaction.attribution import (
    KINDS,
    LABEL_RULES,
    MAX_BLOCKS,
    MAX_NAME_CHARS,
    TOP_LISTS,
    Attribution,
    Item,
    PrefixMemo,
    call_files,
    context_items,
    instruction_blocks,
    item_labels,
    message_items,
    output_file,
    sum_items,
    tool_server,
)
from compaction.messages import message_hash, parse
from compaction.messages.model import (
    Context,
    MediaPart,
    Message,
    TextPart,
    ToolCallPart,
    ToolDefinition,
    ToolResultPart,
)
from compaction.regions import PICOCLAW_SUMMARY_PREFIX, context_regions
from compaction.tokens import MESSAGE_OVERHEAD, REQUEST_OVERHEAD, TOOLS_OVERHEAD, media_tokens
from compaction.tokens._counter import tool_definition_json
from compaction.transcripts import parse_transcript
from tests.support.hangs import hang_detector
from tests.support.messages import COUNTER
from tests.support.requests import REQUESTS


def test_the_public_api_is_pinned() -> None:
    assert sorted(compaction.attribution.__all__) == sorted(
        [
            "KINDS",
            "LABEL_RULES",
            "MAX_BLOCKS",
            "MAX_NAME_CHARS",
            "Attribution",
            "Block",
            "CallTarget",
            "Item",
            "ItemKey",
            "ItemKind",
            "ItemTotal",
            "LabelRule",
            "PrefixMemo",
            "TOP_LISTS",
            "Where",
            "call_files",
            "call_patch",
            "call_targets",
            "context_items",
            "instruction_blocks",
            "item_labels",
            "message_items",
            "output_file",
            "patch_sections",
            "sum_items",
            "system_items",
            "tool_items",
            "tool_server",
        ]
    )
    for name in compaction.attribution.__all__:
        assert hasattr(compaction.attribution, name)


def region_sums(attribution: Attribution) -> dict[str, int]:
    sums: Tally[str] = Tally()
    for item in attribution.items:
        sums[item.region] += item.tokens
    return dict(sums)


def assert_exact(attribution: Attribution, context: Context, reported: int | None = None) -> None:
    """Every region's items add up to that region of ``context_regions``, no item is empty."""
    regions = context_regions(context, COUNTER, reported_input_tokens=reported).regions
    assert attribution.regions == regions
    sums = region_sums(attribution)
    assert {r: t for r, t in regions.items() if t} == sums
    assert all(item.tokens > 0 for item in attribution.items)


def found(attribution: Attribution, **fields: object) -> list[Item]:
    return [
        item
        for item in attribution.items
        if all(getattr(item, name) == value for name, value in fields.items())
    ]


def tokens(text: str) -> int:
    return COUNTER.count_text(text)


# --- tool definitions, grouped by MCP server ----------------------------------------------------


def tool(name: str, description: str = "Does a thing.") -> ToolDefinition:
    return ToolDefinition(name, description, {"type": "object", "properties": {}})


def test_mcp_tools_are_grouped_by_their_server_each_with_its_definitions_tokens() -> None:
    tools = (
        tool("Read", "Reads a file."),
        tool("mcp__github__create_issue", "Create an issue."),
        tool("mcp__github__get_issue", "Get an issue."),
        tool("mcp__linear_app__search", "Search Linear."),
    )
    context = Context("anthropic-messages", (Message("user", (TextPart("hi"),)),), tools=tools)
    attribution = context_items(context, COUNTER)
    assert_exact(attribution, context)
    definitions = found(attribution, kind="tool_definition")
    assert [(i.name, i.group, i.where) for i in definitions] == [
        ("Read", "Read", "tools"),
        ("mcp__github__create_issue", "github", "tools"),
        ("mcp__github__get_issue", "github", "tools"),
        ("mcp__linear_app__search", "linear_app", "tools"),
    ]
    for item, definition in zip(definitions, tools, strict=True):
        assert item.tokens == tokens(tool_definition_json(definition))
    assert [i.tokens for i in found(attribution, region="tools", kind="unattributed")] == [
        TOOLS_OVERHEAD
    ]


def test_an_mcp_server_a_responses_request_declares_is_its_definitions_group() -> None:
    request = {
        "model": "gpt-5",
        "input": "hi",
        "tools": [
            {"type": "mcp", "server_label": "deepwiki", "server_url": "https://x.example/mcp"},
            {"type": "function", "name": "lookup", "parameters": {"type": "object"}},
        ],
    }
    context = parse("openai-responses", request)
    attribution = context_items(context, COUNTER)
    assert_exact(attribution, context)
    assert [(i.name, i.group) for i in found(attribution, kind="tool_definition")] == [
        ("deepwiki", "deepwiki"),
        ("lookup", "lookup"),
    ]


def test_mcp_calls_are_grouped_by_server_and_other_calls_by_tool() -> None:
    calls = Message(
        "assistant",
        (
            ToolCallPart("c1", "mcp__github__get_issue", '{"number": 7}'),
            ToolCallPart("c2", "Bash", '{"command": "make test"}'),
        ),
    )
    results = Message(
        "user",
        (
            ToolResultPart("c1", (TextPart("Issue 7: the build fails"),)),
            ToolResultPart("c2", (TextPart("2 passed"),)),
        ),
    )
    context = Context("anthropic-messages", (calls, results))
    attribution = context_items(context, COUNTER)
    assert_exact(attribution, context)
    assert [
        (i.kind, i.name, i.group, i.tokens) for i in found(attribution, region="tool_calls")
    ] == [
        (
            "tool_call",
            "mcp__github__get_issue",
            "github",
            tokens("mcp__github__get_issue") + tokens('{"number": 7}'),
        ),
        ("tool_call", "Bash", "Bash", tokens("Bash") + tokens('{"command": "make test"}')),
    ]
    outputs = found(attribution, region="tool_results")
    assert [(i.kind, i.name, i.group, i.tokens) for i in outputs] == [
        ("tool_output", "mcp__github__get_issue", "github", tokens("Issue 7: the build fails")),
        ("tool_output", "Bash", "Bash", tokens("2 passed")),
    ]


# --- files -----------------------------------------------------------------------------------


SOURCE = "import os\n\n\ndef main() -> None:\n    print(os.getcwd())\n"


def test_a_read_of_a_file_is_attributed_to_the_file_call_and_output() -> None:
    arguments = '{"file_path": "/repo/src/app.py"}'
    call = Message("assistant", (TextPart("Reading."), ToolCallPart("r1", "Read", arguments)))
    result = Message("user", (ToolResultPart("r1", (TextPart(SOURCE),)),))
    context = Context("anthropic-messages", (Message("user", (TextPart("fix it"),)), call, result))
    attribution = context_items(context, COUNTER)
    assert_exact(attribution, context)
    files = found(attribution, kind="file")
    assert [(i.name, i.group, i.region, i.where, i.tokens) for i in files] == [
        ("/repo/src/app.py", "Read", "tool_calls", 1, tokens("Read") + tokens(arguments)),
        ("/repo/src/app.py", "Read", "tool_results", 2, tokens(SOURCE)),
    ]
    assert not found(attribution, kind="tool_output")


def test_a_prefix_memo_reuses_only_what_the_same_leading_messages_and_servers_give() -> None:
    """A turn attributed after another with one memo (as the turn page does: the turn, then the
    one before it) gets the items it gets alone, whatever the two share."""
    task = Message("user", (TextPart("fix it"),))
    read_app = Message("assistant", (ToolCallPart("r1", "Read", '{"file_path": "/repo/app.py"}'),))
    read_cli = Message("assistant", (ToolCallPart("r1", "Read", '{"file_path": "/repo/cli.py"}'),))
    # the same output object after two different calls: its file is the call's
    output = Message("user", (ToolResultPart("r1", (TextPart(SOURCE),)),))
    issue = Message("assistant", (ToolCallPart("g1", "mcp__github__get_issue", "{}"),))
    plain = (tool("Read"), tool("mcp__github__get_issue"))
    renamed = (tool("Read"), tool("mcp__gh__get_issue"))
    contexts = [
        Context("anthropic-messages", (task, read_app, output), tools=plain),
        Context("anthropic-messages", (task, read_app, output, issue), tools=plain),
        Context("anthropic-messages", (task, read_cli, output, issue), tools=plain),
        Context("anthropic-messages", (task, read_cli, output), tools=plain),
        Context("anthropic-messages", (task, read_cli, output, issue), tools=renamed),
        Context("anthropic-messages", (task, read_app, output, issue), tools=plain),
    ]
    memo = PrefixMemo()
    for context in contexts:
        assert context_items(context, COUNTER, prefix=memo) == context_items(context, COUNTER)
    files = found(context_items(contexts[2], COUNTER, prefix=memo), kind="file")
    assert {i.name for i in files} == {"/repo/cli.py"}


def test_a_file_read_twice_adds_up_under_one_item() -> None:
    messages: list[Message] = []
    for k in range(2):
        messages.append(
            Message("assistant", (ToolCallPart(f"r{k}", "Read", '{"file_path": "/a.py"}'),))
        )
        messages.append(Message("user", (ToolResultPart(f"r{k}", (TextPart(SOURCE),)),)))
    attribution = context_items(Context("anthropic-messages", tuple(messages)), COUNTER)
    [read] = [t for t in attribution.by_region()["tool_results"] if t.kind == "file"]
    assert (read.name, read.count, read.where, read.tokens) == (
        "/a.py",
        2,
        (1, 3),
        2 * tokens(SOURCE),
    )


def test_codex_shell_reads_are_files_joined_to_the_working_folder() -> None:
    script = "cd /work/repo && sed -n '1,200p' 'src/app (copy).ts'"
    arguments = json.dumps({"command": ["bash", "-lc", script], "workdir": "/work/repo"})
    assert call_files("shell", arguments) == ("/work/repo/src/app (copy).ts",)
    assert call_files(
        "shell",
        json.dumps({"command": ["bash", "-lc", "nl -ba a.py | sed -n '1,9p'"], "workdir": "/w"}),
    ) == ("/w/a.py",)
    assert call_files("shell", json.dumps({"command": ["bash", "-lc", "cat README.md"]})) == (
        "README.md",
    )
    assert call_files(
        "shell", json.dumps({"command": ["bash", "-lc", "head -n 5 /etc/hosts"]})
    ) == ("/etc/hosts",)
    assert call_files("shell", json.dumps({"command": ["bash", "-lc", "rg -n foo src"]})) == ()
    # bash refuses an unquoted parenthesis: nothing was read
    assert (
        call_files("shell", json.dumps({"command": ["bash", "-lc", "sed -n '1p' a/(x)/b.ts"]}))
        == ()
    )


def test_a_codex_patch_of_two_files_is_split_by_file() -> None:
    patch = (
        "*** Begin Patch\n*** Update File: src/a.py\n@@\n-x = 1\n+x = 2\n"
        "*** Add File: src/b.py\n+print('b')\n*** End Patch\n"
    )
    arguments = json.dumps({"command": ["apply_patch", patch], "workdir": "/repo"})
    call = Message("assistant", (ToolCallPart("p1", "shell", arguments),))
    result = Message("tool", (ToolResultPart("p1", (TextPart("Done!"),)),))
    context = Context("openai-responses", (call, result))
    attribution = context_items(context, COUNTER)
    assert_exact(attribution, context)
    section_a = "*** Update File: src/a.py\n@@\n-x = 1\n+x = 2\n"
    section_b = "*** Add File: src/b.py\n+print('b')\n"
    escaped = [json.dumps(s)[1:-1] for s in (section_a, section_b)]
    calls = found(attribution, region="tool_calls")
    assert [(i.kind, i.name) for i in calls] == [
        ("file", "/repo/src/a.py"),
        ("file", "/repo/src/b.py"),
        ("tool_call", "shell"),
    ]
    assert [i.tokens for i in calls[:2]] == [tokens(e) for e in escaped]
    assert sum(i.tokens for i in calls) == tokens("shell") + tokens(arguments)
    # a patch names two files: its output is the tool's
    output = next(i for i in attribution.items if i.region == "tool_results")
    assert (output.kind, output.name) == ("tool_output", "shell")


def test_editors_name_their_file_in_the_output() -> None:
    assert output_file("[File: /repo/app.py (120 lines total)]\n1:import os") == "/repo/app.py"
    assert output_file("OBSERVATION:\n[File: /w/App.css (42 lines total)]\n") == "/w/App.css"
    assert (
        output_file("Here's the result of running `cat -n` on /w/a.c:\n     1\tint x;") == "/w/a.c"
    )
    assert output_file("Traceback (most recent call last):") is None


def test_a_swe_agent_observation_showing_a_file_is_that_file_in_the_user_region() -> None:
    shown = (
        "[File: /repo/app.py (2 lines total)]\n1:import os\n2:print(1)\n(Open file: /repo/app.py)"
    )
    context = Context(
        "openai-chat",
        (Message("assistant", (TextPart("open app.py"),)), Message("user", (TextPart(shown),))),
    )
    attribution = context_items(context, COUNTER)
    assert_exact(attribution, context)
    [file] = found(attribution, kind="file")
    assert (file.name, file.region, file.tokens) == ("/repo/app.py", "user", tokens(shown))


@pytest.mark.parametrize(
    ("name", "arguments", "files"),
    [
        ("Write", {"file_path": "/a.py", "content": "x"}, ("/a.py",)),
        ("NotebookEdit", {"notebook_path": "/n.ipynb"}, ("/n.ipynb",)),
        ("create", {"filename": "reproduce.py"}, ("reproduce.py",)),
        ("open", {"path": "src/fields.py", "line_number": 3}, ("src/fields.py",)),
        ("str_replace_editor", {"command": "view", "path": "/w/a.c"}, ("/w/a.c",)),
        ("execute_bash", {"command": "cat /w/a.c /w/b.c"}, ("/w/a.c", "/w/b.c")),
        ("Grep", {"pattern": "x", "path": "/repo/src"}, ()),
        ("LS", {"path": "/repo"}, ()),
    ],
)
def test_paths_come_from_each_agents_arguments(
    name: str, arguments: dict[str, object], files: tuple[str, ...]
) -> None:
    assert call_files(name, json.dumps(arguments)) == files


def test_a_call_naming_two_files_stays_with_its_tool() -> None:
    call = Message("assistant", (ToolCallPart("c", "execute_bash", '{"command": "cat a.c b.c"}'),))
    result = Message("tool", (ToolResultPart("c", (TextPart("int a;\nint b;"),)),))
    attribution = context_items(Context("openai-chat", (call, result)), COUNTER)
    assert [(i.kind, i.name) for i in attribution.items if i.kind != "unattributed"] == [
        ("tool_call", "execute_bash"),
        ("tool_output", "execute_bash"),
    ]


# --- instruction blocks ------------------------------------------------------------------------

GLOBAL_MD = (
    "Contents of /home/u/.claude/CLAUDE.md (user's private global instructions for all projects):\n"
    "\n"
    "# Rules\n"
    "- Always use egrep."
)
PROJECT_MD = (
    "Contents of /repo/CLAUDE.md (project instructions, checked into the codebase):\n"
    "\n"
    "# Package structure\n"
    "- src/ holds the code.\n"
    "- Run make test."
)
REMINDER = (
    "<system-reminder>\nAs you answer the user's questions, you can use the following context:\n"
    "# claudeMd\nCodebase and user instructions are shown below.\n\n"
    f"{GLOBAL_MD}\n\n{PROJECT_MD}\n\n"
    "# important-instruction-reminders\nDo what has been asked; nothing more, nothing less.\n"
    "</system-reminder>"
)


def test_a_system_prompt_with_a_reminder_and_claude_md_files_splits_exactly() -> None:
    prompt = "You are a coding agent. Be brief.\n"
    context = Context(
        "anthropic-messages",
        (Message("user", (TextPart("hi"),)),),
        system=(TextPart(prompt + REMINDER),),
    )
    attribution = context_items(context, COUNTER)
    assert_exact(attribution, context)
    system = found(attribution, region="system")
    assert [(i.kind, i.name, i.detail) for i in system] == [
        ("unattributed", "unattributed", ""),
        (
            "instruction",
            "<system-reminder>",
            "As you answer the user's questions, you can use the following context:"[:80],
        ),
        ("instruction", "CLAUDE.md", "/home/u/.claude/CLAUDE.md"),
        ("instruction", "CLAUDE.md", "/repo/CLAUDE.md"),
        ("system_prompt", "system prompt", ""),
        ("unattributed", "unattributed", ""),
    ]
    request, reminder, global_md, project_md, rest, wrapper = (i.tokens for i in system)
    assert (request, wrapper) == (REQUEST_OVERHEAD, MESSAGE_OVERHEAD)
    assert global_md == tokens(GLOBAL_MD)
    assert project_md == tokens(PROJECT_MD)
    assert reminder == tokens(REMINDER) - global_md - project_md
    assert rest == tokens(prompt + REMINDER) - tokens(REMINDER)


def test_reminders_in_user_messages_and_tool_outputs_are_their_own_items() -> None:
    todo = (
        "<system-reminder>This is a reminder that your todo list is currently empty."
        "</system-reminder>"
    )
    malware = (
        "<system-reminder>\n"
        "Whenever you read a file, you should consider whether it looks malicious.\n"
        "</system-reminder>"
    )
    hook = "<system-reminder>\nUserPromptSubmit hook success: branch is main\n</system-reminder>"
    messages = (
        Message("user", (TextPart("Fix the bug." + todo + hook),)),
        Message("assistant", (ToolCallPart("r", "Read", '{"file_path": "/a.py"}'),)),
        Message("user", (ToolResultPart("r", (TextPart(SOURCE + malware),)),)),
    )
    context = Context("anthropic-messages", messages)
    attribution = context_items(context, COUNTER)
    assert_exact(attribution, context)
    assert [
        (i.name, i.group, i.region, i.detail, i.tokens)
        for i in found(attribution, kind="instruction")
    ] == [
        (
            "<system-reminder>",
            "<system-reminder>",
            "user",
            "This is a reminder that your todo list is currently empty.",
            tokens(todo),
        ),
        ("hook output", "hook output", "user", "UserPromptSubmit", tokens(hook)),
        (
            "<system-reminder>",
            "Read",
            "tool_results",
            "Whenever you read a file, you should consider whether it looks malicious.",
            tokens(malware),
        ),
    ]
    [text] = found(attribution, kind="message_text", region="user")
    assert text.tokens == tokens("Fix the bug." + todo + hook) - tokens(todo) - tokens(hook)
    [file] = found(attribution, kind="file", region="tool_results")
    assert file.tokens == tokens(SOURCE + malware) - tokens(malware)


def test_codex_agents_md_and_environment_context_are_instruction_blocks() -> None:
    agents = (
        "# AGENTS.md instructions for /repo\n"
        "\n"
        "<INSTRUCTIONS>\n"
        "Run make check before committing.\n"
        "</INSTRUCTIONS>"
    )
    environment = (
        "<environment_context>\n  <cwd>/repo</cwd>\n  <shell>zsh</shell>\n</environment_context>"
    )
    old = "<user_instructions>\nUse tabs.\n</user_instructions>"
    request = {
        "model": "gpt-5-codex",
        "instructions": "You are Codex.",
        "input": [
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": agents}],
            },
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": environment}],
            },
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": old}]},
        ],
    }
    context = parse("openai-responses", request)
    attribution = context_items(context, COUNTER)
    assert_exact(attribution, context)
    assert [(i.name, i.detail, i.tokens) for i in found(attribution, kind="instruction")] == [
        ("AGENTS.md", "/repo", tokens(agents)),
        ("<environment_context>", "<cwd>/repo</cwd>", tokens(environment)),
        ("AGENTS.md", "", tokens(old)),
    ]


def test_skills_and_agent_lists_in_tool_descriptions_are_carved_out() -> None:
    skills = (
        "<available_skills>\n"
        "<skill>\n"
        "<name>pdf</name>\n"
        "<description>Read PDFs</description>\n"
        "</skill>\n"
        "</available_skills>"
    )
    agents = (
        "Available agent types and the tools they have access to:\n"
        "- general-purpose: everything (Tools: *)\n"
        "- Explore: reads code (Tools: Read, Grep)"
    )
    tools = (
        tool("Skill", "Run a skill.\n" + skills + "\nUse it well."),
        tool(
            "Task",
            "Launch an agent.\n\n" + agents + "\n\nWhen using the Task tool, name the agent.",
        ),
    )
    context = Context("anthropic-messages", (Message("user", (TextPart("hi"),)),), tools=tools)
    attribution = context_items(context, COUNTER)
    assert_exact(attribution, context)
    listed = [(i.name, i.group, i.tokens) for i in found(attribution, kind="instruction")]
    escaped = [json.dumps(s)[1:-1] for s in (skills, agents)]
    assert listed == [
        ("skills list", "Skill", tokens(escaped[0])),
        ("agents list", "Task", tokens(escaped[1])),
    ]
    for definition in tools:
        whole = tokens(tool_definition_json(definition))
        assert sum(i.tokens for i in found(attribution, group=definition.name)) == whole


def test_a_skills_reminder_and_slash_commands_are_named() -> None:
    skills = (
        "<system-reminder>\n"
        "The following skills are available for use with the Skill tool:\n"
        "\n"
        "- pdf: Read PDFs\n"
        "</system-reminder>"
    )
    command = (
        "<command-name>/clear</command-name>\n"
        "<command-message>clear</command-message>\n"
        "<command-args></command-args>"
    )
    assert [b.name for b in instruction_blocks(skills + command)] == [
        "skills list",
        "<command-name>",
        "<command-message>",
        "<command-args>",
    ]


def test_blocks_past_the_bound_stay_with_their_text_and_the_sum_holds() -> None:
    text = "Do this.\n\n<system-reminder>x</system-reminder>\n\n" * (MAX_BLOCKS + 10)
    assert len(instruction_blocks(text)) == MAX_BLOCKS
    context = Context("openai-chat", (Message("user", (TextPart(text),)),))
    attribution = context_items(context, COUNTER)
    assert_exact(attribution, context)
    assert len(found(attribution, kind="instruction")) == MAX_BLOCKS
    assert found(attribution, kind="message_text")  # the ten left over


def test_an_unclosed_reminder_is_no_block() -> None:
    assert instruction_blocks("<system-reminder>never closed") == ()


# --- other kinds, summaries, reported usage --------------------------------------------------


def test_images_in_messages_and_tool_outputs_are_media_items() -> None:
    image = MediaPart("image", "image/png", data="AAAA", width=800, height=600)
    messages = (
        Message("user", (TextPart("look"), image)),
        Message("assistant", (ToolCallPart("s", "screenshot", "{}"),)),
        Message("user", (ToolResultPart("s", (TextPart("taken"), image)),)),
    )
    context = Context("anthropic-messages", messages)
    attribution = context_items(context, COUNTER)
    assert_exact(attribution, context)
    assert [(i.kind, i.group, i.tokens) for i in found(attribution, region="media")] == [
        ("image", "user", media_tokens(image)),
        ("image", "screenshot", media_tokens(image)),
    ]


def test_a_summary_inside_a_system_message_is_split_as_the_regions_split_it() -> None:
    summary = PICOCLAW_SUMMARY_PREFIX + "We fixed the parser."
    context = Context("openai-chat", (Message("system", (TextPart("You help.\n\n" + summary),)),))
    attribution = context_items(context, COUNTER)
    assert_exact(attribution, context)
    [item] = found(attribution, kind="summary")
    assert item.tokens == tokens(summary)


def test_reported_usage_beyond_the_count_is_the_providers_unattributed() -> None:
    context = Context("openai-chat", (Message("user", (TextPart("hello there"),)),))
    counted = context_regions(context, COUNTER).counted
    attribution = context_items(context, COUNTER, reported_input_tokens=counted + 40)
    assert_exact(attribution, context, reported=counted + 40)
    [provider] = found(attribution, region="unattributed")
    assert (provider.name, provider.tokens, provider.where) == (
        "unattributed (provider)",
        40,
        "provider",
    )
    below = context_items(context, COUNTER, reported_input_tokens=counted - 1)
    assert not found(below, region="unattributed")


def test_message_items_summed_per_message_equal_the_contexts() -> None:
    """A store that keeps each message's items and adds them up gets the context's items."""
    call = Message("assistant", (ToolCallPart("r", "Read", '{"file_path": "/a.py"}'),))
    result = Message("user", (ToolResultPart("r", (TextPart(SOURCE),)),))
    context = Context("anthropic-messages", (call, result))
    attribution = context_items(context, COUNTER)
    calls = compaction.attribution.call_targets(call)
    per_message = [
        *message_items(call, COUNTER, where=0),
        *message_items(result, COUNTER, where=1, calls=calls),
    ]
    assert per_message == [i for i in attribution.items if isinstance(i.where, int)]


def test_sum_items_adds_by_identity_largest_first() -> None:
    items = [
        Item("tool_output", "Bash", "Bash", "tool_results", 5, 1),
        Item("file", "/a.py", "Read", "tool_results", 9, 3),
        Item("tool_output", "Bash", "Bash", "tool_results", 6, 5),
    ]
    totals = sum_items(items)
    assert [(t.name, t.tokens, t.count, t.where) for t in totals] == [
        ("Bash", 11, 2, (1, 5)),
        ("/a.py", 9, 1, (3,)),
    ]


def test_tool_server_reads_names_and_definitions() -> None:
    assert tool_server("mcp__ide__getDiagnostics") == "ide"
    assert tool_server("mcp__my_server__do_it") == "my_server"
    assert tool_server("Read") is None
    assert tool_server("x", {"mcp_server_name": "files"}) == "files"


# --- generated requests ----------------------------------------------------------------------

_fragments = st.sampled_from(
    [
        "<system-reminder>",
        "</system-reminder>",
        "Contents of /a/CLAUDE.md (project):\n",
        "# important-instruction-reminders\n",
        "<environment_context>",
        "</environment_context>",
        "# AGENTS.md instructions for /r\n\n<INSTRUCTIONS>",
        "</INSTRUCTIONS>",
        "[File: /a.py (3 lines total)]\n",
        "*** Begin Patch\n*** Add File: x\n",
        " words ",
        "\n",
        "É",
    ]
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_generated_requests_attribute_every_token_to_its_region(data: st.DataObject) -> None:
    fmt = data.draw(st.sampled_from(sorted(REQUESTS)))
    context = parse(fmt, data.draw(REQUESTS[fmt]))
    attribution = context_items(context, COUNTER)
    assert_exact(attribution, context)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(_fragments, max_size=30).map("".join), st.lists(_fragments, max_size=10).map("".join)
)
def test_texts_full_of_wrappers_still_add_up(text: str, output: str) -> None:
    arguments = json.dumps({"command": ["bash", "-lc", text], "file_path": output})
    messages = (
        Message("system", (TextPart(text),)),
        Message("user", (TextPart(text + output),)),
        Message("assistant", (ToolCallPart("c", "shell", arguments),)),
        Message("tool", (ToolResultPart("c", (TextPart(output + text),)),)),
    )
    context = Context("openai-chat", messages, tools=(tool("t", text),))
    assert_exact(context_items(context, COUNTER), context)


# --- the real transcripts --------------------------------------------------------------------


def sessions(transcripts: Path, folder: str) -> list[tuple[str, list[Context]]]:
    found: list[tuple[str, list[Context]]] = []
    for path in sorted((transcripts / folder).iterdir()):
        for session in parse_transcript(path.read_bytes(), name=path.name)[:3]:
            found.append((path.name, [turn.context for turn in session.turns]))
    return found


def last_items(transcripts: Path, folder: str) -> list[Item]:
    items: list[Item] = []
    for _, contexts in sessions(transcripts, folder):
        if contexts:
            items += context_items(contexts[-1], COUNTER).items
    return items


def test_a_prefix_memo_over_real_turns_gives_each_turn_its_own_items(transcripts: Path) -> None:
    """Consecutive turns of real sessions, their messages shared as one object each (as the turn
    page reads them), attributed each after the next with one memo: each its items alone."""
    compared = 0
    for folder in ("claude-code", "codex", "openai-chat"):
        for _, contexts in sessions(transcripts, folder):
            one: dict[str, Message] = {}
            shared = [
                dataclasses.replace(
                    c, messages=tuple(one.setdefault(message_hash(m), m) for m in c.messages)
                )
                for c in contexts[-6:]
            ]
            memo = PrefixMemo()
            for later, earlier in zip(shared[1:], shared, strict=False):
                for context in (later, earlier):
                    alone = context_items(context, COUNTER)
                    assert context_items(context, COUNTER, prefix=memo) == alone
                    compared += 1
    assert compared > 20


@pytest.mark.parametrize(
    "folder",
    ["claude-code", "codex", "swe-agent", "openhands", "anthropic-messages", "openai-chat"],
)
def test_every_turn_of_the_real_transcripts_adds_up(transcripts: Path, folder: str) -> None:
    turns = 0
    for _, contexts in sessions(transcripts, folder):
        for context in contexts[-12:]:
            assert_exact(context_items(context, COUNTER), context)
            turns += 1
    assert turns > 0


def test_claude_trace_holds_mcp_tools_claude_md_and_reminders(transcripts: Path) -> None:
    items = last_items(transcripts, "anthropic-messages")
    mcp = {(i.name, i.group) for i in items if i.kind == "tool_definition" and i.group != i.name}
    assert mcp == {("mcp__ide__getDiagnostics", "ide"), ("mcp__ide__executeCode", "ide")}
    memory = {i.detail for i in items if i.name == "CLAUDE.md"}
    assert memory == {
        "/Users/badlogic/.claude/CLAUDE.md",
        "/Users/badlogic/workspaces/lemmy/CLAUDE.md",
    }
    reminders = {i.region for i in items if i.name == "<system-reminder>"}
    assert reminders == {"user", "tool_results"}


def test_claude_code_sessions_hold_read_files_reminders_commands_and_images(
    transcripts: Path,
) -> None:
    items = last_items(transcripts, "claude-code")
    read = [
        i for i in items if i.kind == "file" and i.group == "Read" and i.region == "tool_results"
    ]
    assert read
    assert all(i.name.startswith("/") for i in read)
    assert any(i.name == "<system-reminder>" and i.group == "Read" for i in items)
    assert {"<command-name>", "<local-command-stdout>"} <= {i.name for i in items}
    assert any(i.kind == "image" for i in items)


def test_codex_rollouts_hold_shell_files_patched_files_and_environment(transcripts: Path) -> None:
    items = last_items(transcripts, "codex")
    files = [i for i in items if i.kind == "file"]
    assert any(i.region == "tool_results" and i.group == "shell" for i in files)
    # reads after a ``cd`` are joined to it; patches sent without a workdir stay relative
    assert any(i.name.startswith("/Users/jnarowski/Dev/spectora/") for i in files)
    patched = {i.name for i in files if i.region == "tool_calls"}
    assert any(name.endswith("TeamSheet.tsx") for name in patched)
    assert any(i.name == "<environment_context>" for i in items)
    assert any(i.kind == "reasoning" for i in items)


def test_swe_agent_and_openhands_runs_hold_their_files(transcripts: Path) -> None:
    swe = last_items(transcripts, "swe-agent")
    assert any(i.kind == "file" and i.region == "user" for i in swe)  # observations
    assert any(i.kind == "file" and i.group == "open" for i in swe)  # function calling
    openhands = last_items(transcripts, "openhands")
    edited = [i for i in openhands if i.kind == "file" and i.group == "str_replace_editor"]
    assert edited
    assert all(i.name.startswith("/workspace/") for i in edited)


# --- hostile text: linear, a hang detector rather than a timing assertion ---------------------

SIZE = 1_000_000
#: Far above the seconds linear work takes on a megabyte; a quadratic step takes hours.
WATCHDOG_SECONDS = 120
HOSTILE = {
    "unclosed-tags": "<system-reminder>x <environment_context>",
    "unclosed-agents-md": "# AGENTS.md instructions for /r\n\n<INSTRUCTIONS>x",
    "agents-lists": "Available agent types and the tools they have access to:\n- a\n",
    "memory-newlines": "\n",
    "memory-parentheses": " (",
    "memory-headers": "Contents of /a (b):\n",
    "file-headers": "[File: a (1 lines total",
}


def hostile_text(kind: str) -> str:
    unit = HOSTILE[kind]
    body = (unit * (SIZE // len(unit) + 1))[:SIZE]
    if kind.startswith("memory"):
        return f"<system-reminder>Contents of /a/CLAUDE.md (x):\n{body}</system-reminder>"
    return body


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_a_megabyte_of_hostile_text_is_attributed_in_linear_time(kind: str) -> None:
    text = hostile_text(kind)
    arguments = json.dumps({"command": ["bash", "-lc", text[:100_000]], "file_path": "/a"})
    context = Context(
        "anthropic-messages",
        (
            Message("user", (TextPart(text),)),
            Message("assistant", (ToolCallPart("c", "shell", arguments),)),
            Message("user", (ToolResultPart("c", (TextPart(text),)),)),
        ),
        system=(TextPart(text),),
        tools=(tool("t", text),),
    )
    with hang_detector(WATCHDOG_SECONDS, f"attribution of {kind}"):
        attribution = context_items(context, COUNTER)
    assert_exact(attribution, context)


def test_names_from_the_request_are_cut_at_the_bound() -> None:
    path = "/" + "a" * 5_000
    call = Message("assistant", (ToolCallPart("r", "Read", json.dumps({"file_path": path})),))
    result = Message("user", (ToolResultPart("r", (TextPart(SOURCE),)),))
    context = Context("anthropic-messages", (call, result), tools=(tool("T" * 2_000),))
    attribution = context_items(context, COUNTER)
    assert_exact(attribution, context)
    names = [i.name for i in attribution.items if i.kind in ("file", "tool_definition")]
    assert len(names) == 3
    assert all(len(name) == MAX_NAME_CHARS and name.endswith("…") for name in names)
    assert names[0].startswith("T")
    assert names[1] == names[2]  # the call's file and its output's: still one item


def test_a_reused_call_id_names_the_latest_call() -> None:
    """SWE-agent reuses call ids: each output belongs to the call just before it."""
    messages = (
        Message("assistant", (ToolCallPart("c", "open", '{"path": "a.py"}'),)),
        Message("tool", (ToolResultPart("c", (TextPart("1:import os"),)),)),
        Message("assistant", (ToolCallPart("c", "bash", '{"command": "ls -F"}'),)),
        Message("tool", (ToolResultPart("c", (TextPart("a.py setup.py"),)),)),
    )
    context = Context("openai-chat", messages)
    attribution = context_items(context, COUNTER)
    assert_exact(attribution, context)
    named = [(i.where, i.kind, i.name) for i in attribution.items if i.kind != "unattributed"]
    assert named == [
        (0, "file", "a.py"),
        (1, "file", "a.py"),
        (2, "tool_call", "bash"),
        (3, "tool_output", "bash"),
    ]
    calls = compaction.attribution.call_targets(messages[0])
    standalone = message_items(messages[2], COUNTER, where=2, calls=calls)
    assert [(i.kind, i.name) for i in standalone if i.kind != "unattributed"] == [
        ("tool_call", "bash")
    ]


# --- the overview's top lists ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("region", "kind", "name", "group", "labels"),
    [
        ("tool_calls", "tool_call", "Read", "Read", [("tools", "Read")]),
        ("tool_results", "tool_output", "Bash", "Bash", [("tools", "Bash")]),
        (
            "tool_results",
            "file",
            "/src/app.py",
            "Read",
            [("tools", "Read"), ("files", "/src/app.py")],
        ),
        ("user", "file", "/src/app.py", "str_replace_editor", [("files", "/src/app.py")]),
        ("tool_results", "unattributed", "", "", []),
        ("tools", "tool_definition", "Read", "Read", []),
        (
            "tools",
            "tool_definition",
            "mcp__github__get_issue",
            "github",
            [("mcp_servers", "github")],
        ),
        (
            "tool_calls",
            "tool_call",
            "mcp__github__get_issue",
            "github",
            [("tools", "github"), ("mcp_servers", "github")],
        ),
        ("system", "instruction", "CLAUDE.md", "", [("instructions", "CLAUDE.md")]),
        (
            "tool_results",
            "instruction",
            "system-reminder",
            "Read",
            [("tools", "Read"), ("instructions", "system-reminder")],
        ),
        ("user", "message_text", "user", "", []),
        ("system", "system_prompt", "system", "", []),
    ],
)
def test_an_item_counts_in_the_top_lists_of_its_kind_region_and_group(
    region: str, kind: str, name: str, group: str, labels: list[tuple[str, str]]
) -> None:
    assert item_labels(region, kind, name, group) == labels


def test_the_top_lists_are_the_rules_categories_once_each() -> None:
    assert TOP_LISTS == ("tools", "mcp_servers", "files", "instructions")
    assert [rule.category for rule in LABEL_RULES] == list(TOP_LISTS)
    assert {rule.label_field for rule in LABEL_RULES} <= {"name", "group"}


@given(
    region=st.sampled_from(["system", "tools", "tool_calls", "tool_results", "user", "assistant"]),
    kind=st.sampled_from(KINDS),
    name=st.text(max_size=8),
    group=st.text(max_size=8),
)
def test_an_item_counts_in_a_list_at_most_once_under_its_name_or_group(
    region: str, kind: str, name: str, group: str
) -> None:
    labels = item_labels(region, kind, name, group)
    categories = [category for category, _ in labels]
    assert len(set(categories)) == len(categories)
    assert set(categories) <= set(TOP_LISTS)
    for rule in LABEL_RULES:
        held = (rule.category, name if rule.label_field == "name" else group) in labels
        assert held == rule.holds(region, kind, name, group)
    if kind == "unattributed" or (
        region not in ("tool_calls", "tool_results")
        and kind in ("message_text", "system_prompt", "reasoning", "summary", "image")
    ):
        assert labels == []
