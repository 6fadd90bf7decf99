"""Which files a tool call reads or writes (:func:`call_files`), which file a tool's output shows
(:func:`output_file`), and which MCP server a tool belongs to (:func:`tool_server`).

Paths come from the call's arguments, per agent: ``file_path`` and ``notebook_path`` (Claude
Code), ``path`` (OpenHands' editor, SWE-agent's ``open``; not for the tools whose ``path`` is a
folder to search), ``filename`` (SWE-agent's ``create``), the headers of a Codex ``apply_patch``
(``*** Update File: <path>``), and the file arguments of ``cat``, ``sed -n``, ``nl``, ``head``
and ``tail`` in a shell command (Codex's ``shell`` runs ``["bash", "-lc", script]``), relative
paths joined to the command's ``cd`` or ``workdir``. Outputs name their file when a tool prints
it first: SWE-agent's ``[File: <path> (N lines total)]`` and OpenHands'
``Here's the result of running `cat -n` on <path>:``.
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

__all__ = [
    "MAX_ARGUMENTS_CHARS",
    "MAX_FILES",
    "MAX_SCRIPT_CHARS",
    "call_files",
    "call_patch",
    "output_file",
    "patch_sections",
    "tool_server",
]

#: Arguments longer than this are not decoded as JSON to find a path (only patch headers are
#: looked for): a write of a large file is still attributed by its patch headers or not at all.
MAX_ARGUMENTS_CHARS = 1_000_000
#: Shell scripts longer than this are not split into commands.
MAX_SCRIPT_CHARS = 16_384
#: Calls whose arguments are at most this long have their files remembered.
REMEMBERED_CHARS = 16_384
#: The most files taken from one call.
MAX_FILES = 64

#: ``mcp__<server>__<tool>`` (Claude Code, Codex), or ``mcp__<server>`` alone: the namespace
#: Codex sends a server's tools in.
_MCP_NAME = re.compile(r"mcp__(?P<server>[^_](?:[^_]|_(?!_))*)(?:__.+)?")
#: Tools whose ``path`` argument is a folder to list or search, not a file.
_FOLDER_TOOLS = frozenset(
    {"ls", "glob", "grep", "search_dir", "find_file", "list_directory", "list_dir", "search"}
)
_PATH_KEYS = ("file_path", "notebook_path", "filename", "path")
_PATCH_HEADER = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (?P<path>[^\n]+)$", re.M)
_PATCH_END = re.compile(r"^\*\*\* End Patch", re.M)
_SHELLS = frozenset({"bash", "sh", "zsh", "dash"})
_READERS = frozenset({"cat", "sed", "nl", "head", "tail"})
_OPERATORS = frozenset({"&&", "||", ";", "|", "&", "(", ")"})
_SWE_FILE = re.compile(r"(?:OBSERVATION:\s*)?\[File: (?P<path>[^\n]+?) \(\d+ lines total[^\n]*\)\]")
_CAT_N = re.compile(
    r"(?:OBSERVATION:\s*)?Here's the result of running `cat -n` on (?P<path>[^\n]+?):\n"
)


def tool_server(name: str, extra: Mapping[str, Any] | None = None) -> str | None:
    """The MCP server of a tool, from its name (``mcp__<server>__<tool>``) or its definition
    (``server_label`` of an OpenAI ``mcp`` tool, ``mcp_server_name`` of Anthropic's toolset),
    else None.

    Example:
        >>> tool_server("mcp__github__create_issue"), tool_server("Read")
        ('github', None)
    """
    found = _MCP_NAME.fullmatch(name)
    if found:
        return found.group("server")
    for source in (extra or {}, (extra or {}).get("ctxweb:raw") or {}):
        if not isinstance(source, Mapping):
            continue
        for key in ("server_label", "mcp_server_name"):
            value = source.get(key)
            if isinstance(value, str) and value:
                return value
    return None


def _joined(path: str, cwd: str | None) -> str:
    path = path.strip()
    if cwd and posixpath.isabs(cwd) and not posixpath.isabs(path):
        return posixpath.normpath(posixpath.join(cwd, path))
    return path


def patch_sections(patch: str) -> tuple[tuple[str, int, int], ...]:
    """The files of an ``apply_patch`` text: each file's path and the span of its section (from
    its header to the next header or the end of the patch).

    Example:
        >>> patch = "*** Begin Patch\\n*** Add File: a.py\\n+x\\n*** End Patch"
        >>> [(p, patch[s:e]) for p, s, e in patch_sections(patch)]
        [('a.py', '*** Add File: a.py\\n+x\\n')]
    """
    headers = list(_PATCH_HEADER.finditer(patch))[:MAX_FILES]
    sections = []
    for k, header in enumerate(headers):
        end = headers[k + 1].start() if k + 1 < len(headers) else len(patch)
        closing = _PATCH_END.search(patch, header.end(), end)
        sections.append(
            (header.group("path").strip(), header.start(), closing.start() if closing else end)
        )
    return tuple(sections)


def _script_files(script: str, cwd: str | None) -> list[str]:
    """Files a shell script reads with ``cat``, ``sed -n``, ``nl``, ``head`` or ``tail``."""
    if len(script) > MAX_SCRIPT_CHARS or "<<" in script:
        return []
    try:
        lexer = shlex.shlex(script, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words = list(lexer)
    except ValueError:
        return []
    files: list[str] = []
    command: list[str] = []
    for word in [*words, ";"]:
        if word not in _OPERATORS:
            command.append(word)
            continue
        if word in ("(", ")") and command:
            return []  # a parenthesis inside a command: bash would refuse the script
        if command:
            name = command[0].rsplit("/", 1)[-1]
            if name == "cd" and len(command) == 2:
                cwd = _joined(command[1], cwd)
            elif name in _READERS:
                files += _reader_files(name, command[1:], cwd)
        command = []
    return files


def _reader_files(name: str, args: list[str], cwd: str | None) -> list[str]:
    """The file arguments of one reading command (options and ``sed``'s script left out)."""
    files = []
    skip = 0
    script_taken = name != "sed"
    for arg in args:
        if skip:
            skip -= 1
            continue
        if arg.startswith("-"):
            if name in ("head", "tail") and arg in ("-n", "-c"):
                skip = 1
            if name == "sed" and arg == "-e":
                skip, script_taken = 1, True
            continue
        if not script_taken:
            script_taken = True
            continue
        files.append(_joined(arg, cwd))
    return files


def _arguments(arguments: str) -> Any:
    if len(arguments) > MAX_ARGUMENTS_CHARS:
        return None
    try:
        return json.loads(arguments)
    except ValueError:
        return None


def call_files(name: str, arguments: str) -> tuple[str, ...]:
    """The files a call to tool ``name`` with ``arguments`` (its JSON text) reads or writes, in
    order, each once (at most :data:`MAX_FILES`). Calls of up to :data:`REMEMBERED_CHARS` are
    remembered (the last 4,096): a turn and the next share most of theirs.

    Example:
        >>> call_files("Read", '{"file_path": "/src/app.py"}')
        ('/src/app.py',)
        >>> script = "cd /repo && sed -n '1,200p' src/app.py"
        >>> call_files("shell", json.dumps({"command": ["bash", "-lc", script]}))
        ('/repo/src/app.py',)
    """
    if len(arguments) <= REMEMBERED_CHARS:
        return _remembered_files(name, arguments)
    return _call_files(name, arguments)


@lru_cache(maxsize=4096)
def _remembered_files(name: str, arguments: str) -> tuple[str, ...]:
    return _call_files(name, arguments)


def _call_files(name: str, arguments: str) -> tuple[str, ...]:
    files: list[str] = []
    patch = call_patch(arguments)
    if patch:
        return tuple(dict.fromkeys(path for path, _ in patch))[:MAX_FILES]
    decoded = _arguments(arguments)
    if not isinstance(decoded, Mapping):
        return ()
    for key in _PATH_KEYS:
        value = decoded.get(key)
        if isinstance(value, str) and value.strip():
            if key == "path" and name.lower() in _FOLDER_TOOLS:
                break
            files.append(value.strip())
            break
    command = decoded.get("command")
    workdir = decoded.get("workdir")
    cwd = workdir if isinstance(workdir, str) else None
    if isinstance(command, list) and all(isinstance(w, str) for w in command) and command:
        if command[0].rsplit("/", 1)[-1] in _SHELLS and len(command) >= 3:
            files += _script_files(command[-1], cwd)
        else:
            files += _script_files(shlex.join(command), cwd)
    elif isinstance(command, str) and not files:
        files += _script_files(command, cwd)
    return tuple(dict.fromkeys(files))[:MAX_FILES]


def call_patch(arguments: str) -> tuple[tuple[str, str], ...]:
    """The files of a call that applies a patch (Codex's ``apply_patch``, as a tool of its own
    or in a shell command): each file's path (joined to the call's ``workdir``) and its section
    of the patch as it appears in ``arguments`` (JSON-escaped when the patch is inside JSON),
    so that counting the section counts what the call sent. Empty for any other call.

    Example:
        >>> patch = "*** Begin Patch\\n*** Add File: a.py\\n+x\\n"
        >>> args = json.dumps({"command": ["apply_patch", patch]})
        >>> call_patch(args)
        (('a.py', '*** Add File: a.py\\\\n+x\\\\n'),)
    """
    if "*** Begin Patch" not in arguments:
        return ()
    decoded = _arguments(arguments)
    if isinstance(decoded, Mapping):
        patch = next((v for v in _strings(decoded) if "*** Begin Patch" in v), None)
        if patch is None:
            return ()
        workdir = decoded.get("workdir")
        cwd = workdir if isinstance(workdir, str) else None
        return tuple(
            (_joined(path, cwd), json.dumps(patch[start:end], ensure_ascii=False)[1:-1])
            for path, start, end in patch_sections(patch)
        )
    return tuple(
        (path.strip(), arguments[start:end]) for path, start, end in patch_sections(arguments)
    )


def _strings(value: Mapping[str, Any]) -> list[str]:
    """The string values of a call's arguments, those inside lists included (one level)."""
    found: list[str] = []
    for item in value.values():
        if isinstance(item, str):
            found.append(item)
        elif isinstance(item, list):
            found += [v for v in item if isinstance(v, str)]
    return found


def output_file(text: str) -> str | None:
    """The file a tool's output shows, when the tool names it first (SWE-agent's and
    OpenHands' editors), else None.

    Example:
        >>> output_file("[File: /repo/app.py (120 lines total)]\\n1:import os")
        '/repo/app.py'
    """
    head = text[:4096].lstrip()
    for pattern in (_SWE_FILE, _CAT_N):
        found = pattern.match(head)
        if found:
            return found.group("path").strip()
    return None
