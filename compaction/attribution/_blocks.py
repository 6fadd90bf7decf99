"""Instruction blocks inside a text: what an agent injects into system prompts, user messages and
tool outputs (``<system-reminder>``, CLAUDE.md and AGENTS.md contents, skills and agent lists,
Codex's environment context), found by the wrappers the agents use (:func:`instruction_blocks`).

The wrappers are the agents' own, as their transcripts show them:

- Claude Code wraps injected context in ``<system-reminder>`` tags; the one that carries the
  memory files says ``Contents of <path> (<what it is>):`` before each CLAUDE.md's content, and
  a hook's output starts ``<Event> hook success:`` or ``... hook additional context:``; a slash
  command's invocation and output are ``<command-name>``, ``<command-message>``,
  ``<command-args>`` and ``<local-command-stdout>`` blocks; the Skill tool's description lists
  ``<available_skills>`` and the Task tool's lists ``Available agent types``;
- Claude Code's newer releases (2.1.19x) send the agents list, the skills list and hooks'
  outputs untagged, as sections of a ``system`` message inside ``messages``: each starts a line
  with the header above and runs to the next blank line;
- Codex puts AGENTS.md in ``# AGENTS.md instructions for <dir>`` followed by an
  ``<INSTRUCTIONS>`` block (older releases: ``<user_instructions>``), the session's environment
  in ``<environment_context>``, a skill in ``<skill>`` and a user's shell command in
  ``<user_shell_command>``.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

__all__ = ["MAX_BLOCKS", "Block", "instruction_blocks"]

#: The most blocks taken from one text; the rest stays with the text's own item.
MAX_BLOCKS = 256

#: How much of a block's first line names it (``detail``).
DETAIL_CHARS = 80

#: Tags whose whole block is one item, named by the tag (the ``<system-reminder>`` is looked into).
_TAGS = (
    "system-reminder",
    "user_instructions",
    "environment_context",
    "user_shell_command",
    "skill",
    "available_skills",
    "command-name",
    "command-message",
    "command-args",
    "local-command-stdout",
    "local-command-stderr",
    "user-prompt-submit-hook",
)
_OPENING = re.compile(r"<(?P<tag>" + "|".join(re.escape(t) for t in _TAGS) + r")>")
_AGENTS_MD = re.compile(r"# AGENTS\.md instructions for (?P<dir>[^\n]{0,1000})\n+<INSTRUCTIONS>")
_AGENTS_MD_END = "</INSTRUCTIONS>"
#: A memory file inside Claude Code's claudeMd reminder: it runs to the next one, to Claude
#: Code's closing reminder section, or to the end of the reminder. Its path and description are
#: bounded (and the description has no parenthesis), so that no line makes the search quadratic.
_MEMORY_HEAD = r"Contents of (?P<path>[^\n]{1,1000}?) \((?P<what>[^\n()]{0,300})\):\n"
_MEMORY_FILE = re.compile(
    _MEMORY_HEAD
    + r"(?P<body>.*?)"
    + r"(?=\nContents of [^\n]{1,1000}? \([^\n()]{0,300}\):\n"
    + r"|\n# important-instruction-reminders|\Z)",
    re.S,
)
_HOOK = re.compile(r"\s*(?P<event>\w+) hook (?:success|additional context|blocking error)\b")
_SKILLS_REMINDER = re.compile(r"\s*The following skills are available for use with the Skill tool")
#: The Task tool's list of subagents runs to the first blank line after it (older releases in
#: the tool's description, newer ones in a system message of their own).
_AGENTS_LISTS = (
    "Available agent types and the tools they have access to:\n",
    "Available agent types for the Agent tool:\n",
)
#: Claude Code's newer releases send their reminders untagged, each a section of a system
#: message inside ``messages``: the skills list (a blank line after its header, entries to the
#: next blank line) and each hook's output (to the next blank line).
_SECTION = re.compile(
    r"^(?:(?P<skills>The following skills are available for use with the Skill tool)"
    r"|(?P<event>\w+) hook (?:success|additional context|blocking error)\b)",
    re.M,
)


@dataclass(frozen=True)
class Block:
    """One instruction block: its ``name`` (the label: ``CLAUDE.md``, ``AGENTS.md``,
    ``<system-reminder>``, ``skills list``...), a ``detail`` (the file's path, the reminder's
    first line) and where it is in the text (``start``, ``end``)."""

    name: str
    detail: str
    start: int
    end: int


def _first_line(text: str) -> str:
    for line in text.splitlines():
        line = line.strip()
        if line:
            return line[:DETAIL_CHARS]
    return ""


def _memory_name(path: str) -> str:
    """A memory file's label: its file name (``CLAUDE.md``, ``CLAUDE.local.md``, ``AGENTS.md``)."""
    return path.rstrip("/").rsplit("/", 1)[-1] or path


def _reminder(text: str, start: int, end: int, body_start: int) -> list[Block]:
    """A ``<system-reminder>``'s blocks: each memory file it quotes, and itself for the rest."""
    body = text[body_start : end - len("</system-reminder>")]
    if _SKILLS_REMINDER.match(body):
        return [Block("skills list", _first_line(body), start, end)]
    hook = _HOOK.match(body)
    if hook:
        return [Block("hook output", hook.group("event"), start, end)]
    files = [
        Block(
            _memory_name(m.group("path")),
            m.group("path"),
            body_start + m.start(),
            # the blank lines before the next file are the reminder's
            body_start + m.start() + len(m.group(0).rstrip("\n")),
        )
        for m in itertools.islice(_MEMORY_FILE.finditer(body), MAX_BLOCKS)
    ]
    return [Block("<system-reminder>", _first_line(body), start, end), *files]


def _tagged(text: str, found: list[Block]) -> None:
    """The tagged blocks of ``text``, each from its opening tag to the first closing tag after
    it, found with one pass of searches: a tag never closed after some point is not looked for
    again after it (a backtracking pattern would rescan the rest of the text for each opening)."""
    unclosed: dict[str, int] = {}
    position = 0
    while len(found) < MAX_BLOCKS:
        match = _OPENING.search(text, position)
        if match is None:
            return
        tag, start = match.group("tag"), match.start()
        position = match.end()
        if unclosed.get(tag, -1) >= 0:
            continue
        closing = text.find(f"</{tag}>", position)
        if closing < 0:
            unclosed[tag] = start
            continue
        end = closing + len(tag) + 3
        body = text[position:closing]
        if tag == "system-reminder":
            found += _reminder(text, start, end, position)
        elif tag == "user_instructions":
            found.append(Block("AGENTS.md", "", start, end))
        elif tag == "available_skills":
            found.append(Block("skills list", "", start, end))
        elif tag == "skill":
            found.append(Block("skill", _first_line(body), start, end))
        else:
            found.append(Block(f"<{tag}>", _first_line(body), start, end))
        position = end


def _agents_md(text: str, found: list[Block]) -> None:
    """Codex's AGENTS.md blocks: the header, ``<INSTRUCTIONS>`` and its closing tag."""
    position = 0
    while len(found) < MAX_BLOCKS:
        match = _AGENTS_MD.search(text, position)
        if match is None:
            return
        closing = text.find(_AGENTS_MD_END, match.end())
        if closing < 0:
            return
        end = closing + len(_AGENTS_MD_END)
        found.append(Block("AGENTS.md", match.group("dir").strip(), match.start(), end))
        position = end


def _agents_lists(text: str, found: list[Block]) -> None:
    """The Task tool's lists of subagents, each up to the first blank line after it."""
    for header in _AGENTS_LISTS:
        position = 0
        while len(found) < MAX_BLOCKS:
            start = text.find(header, position)
            if start < 0:
                break
            blank = text.find("\n\n", start + len(header))
            end = len(text) if blank < 0 else blank
            found.append(Block("agents list", "", start, end))
            position = end


def _sections(text: str, found: list[Block]) -> None:
    """Untagged reminder sections (:data:`_SECTION`) that no block found so far holds."""
    held = [(block.start, block.end) for block in found]
    for match in _SECTION.finditer(text):
        if len(found) >= MAX_BLOCKS:
            return
        start = match.start()
        if any(low <= start < high for low, high in held):
            continue
        after = match.end()
        if match.group("skills"):  # the blank line after the header is the list's own
            after = text.find("\n", after)
            after = len(text) if after < 0 else after
            while text.startswith("\n", after):
                after += 1
        blank = text.find("\n\n", after)
        end = len(text) if blank < 0 else blank
        if match.group("skills"):
            found.append(Block("skills list", _first_line(text[start:end]), start, end))
        else:
            found.append(Block("hook output", match.group("event"), start, end))


def instruction_blocks(text: str) -> tuple[Block, ...]:
    """The instruction blocks of ``text``, in order; a block may hold others (a reminder quoting
    CLAUDE.md files lists the reminder, then each file inside it). At most :data:`MAX_BLOCKS`;
    linear in the text.

    Example:
        >>> text = "hi <system-reminder>Your todo list is empty.</system-reminder>"
        >>> [(b.name, b.detail, text[b.start : b.end][:20]) for b in instruction_blocks(text)]
        [('<system-reminder>', 'Your todo list is empty.', '<system-reminder>You')]
    """
    found: list[Block] = []
    if "<" in text:
        _tagged(text, found)
        _agents_md(text, found)
    if any(header in text for header in _AGENTS_LISTS):
        _agents_lists(text, found)
    if " hook " in text or "skills are available" in text:
        _sections(text, found)
    found.sort(key=lambda b: (b.start, -b.end))
    return tuple(found[:MAX_BLOCKS])
