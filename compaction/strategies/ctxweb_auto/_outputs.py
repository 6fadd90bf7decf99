"""Steps 1-3 of ``ctxweb-auto`` (externalize, compact, prune) on tool outputs and the string
values of tool-call arguments: each text moves into an artifact and leaves a pointer, alone or
between the text's head and tail."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from compaction.messages.model import ToolCallPart, ToolResultPart
from compaction.strategies.base import Artifact, Draft, make_artifact
from compaction.strategies.ctxweb_auto._texts import POINTER, describe, pointer, shrink_arguments
from compaction.strategies.outputs import with_result_text

__all__ = ["OUTPUT_STEPS", "shrink"]

OUTPUT_STEPS = ("externalize", "compact", "prune")
#: Argument strings above this many bytes become their pointer in the prune step.
PRUNE_ARGUMENT_BYTES = 512
#: Characters kept before and after the pointer when a text is compacted.
HEAD, TAIL = 600, 400


def shrink(
    draft: Draft,
    step: str,
    params: dict[str, Any],
    total: int,
    target: int,
    lo: int,
    hi: int,
) -> int:
    """Step ``step`` on the tool outputs and call arguments of ``messages[lo:hi]``, oldest
    first, until the total is within the target. An edit that would not make its message
    smaller is skipped, and so is its artifact."""
    for position in range(lo, min(hi, len(draft.messages))):
        for part_index, part in enumerate(draft.messages[position].parts):
            if total <= target:
                return total
            if isinstance(part, ToolResultPart):
                over = _thresholds(params)[step]
                shrunk = _shrunk_text(draft, step, part.text, over, "tool_result")
                if shrunk is None:
                    continue
                text, artifacts, kind = shrunk
                message = with_result_text(draft.messages[position], part_index, text)
                detail = f"{step}: tool output {part.tool_call_id}"
            elif isinstance(part, ToolCallPart):
                shrunk = _shrunk_arguments(draft, step, params, part.arguments)
                if shrunk is None:
                    continue
                arguments, artifacts, kind = shrunk
                parts = list(draft.messages[position].parts)
                parts[part_index] = replace(part, arguments=arguments)
                message = replace(draft.messages[position], parts=tuple(parts))
                detail = f"{step}: tool input {part.id}"
            else:
                continue
            before = draft.tokens(draft.messages[position])
            after = draft.tokens(message)
            if after >= before:
                continue
            for artifact in artifacts:
                draft.artifacts.setdefault(artifact.id, artifact)
            draft.replace_message(
                position,
                message,
                kind,  # type: ignore[arg-type]
                detail,
                part_index=part_index,
                artifact_id=artifacts[0].id,
            )
            total += after - before
    return total


def _thresholds(params: dict[str, Any]) -> dict[str, int]:
    """The size (bytes) above which each output step takes a text."""
    return {
        "externalize": params["externalize_bytes"],
        "compact": params["compact_bytes"],
        "prune": 0,
    }


def _shrunk_text(
    draft: Draft, step: str, text: str, over: int, kind: str
) -> tuple[str, list[Artifact], str] | None:
    """``text`` after ``step`` when it is above ``over`` bytes, as (new text, artifacts, edit
    kind); a text compacted by step 2 is pruned to its pointer whatever its size. Artifacts are
    built, not stored: the caller stores them once it keeps the edit."""
    if not text or text.startswith("[EXTERNALIZED:"):
        return None
    found = POINTER.search(text)
    if found is not None:
        short = found.group(0)[14:-1]
        kept = next((a for key, a in draft.artifacts.items() if key.startswith(short)), None)
        if step != "prune" or kept is None:
            return None
        return f"{found.group(0)} {kept.summary}", [kept], "clear"
    size = len(text.encode("utf-8"))
    if size <= over:
        return None
    if step == "compact":
        omitted = len(text) - HEAD - TAIL
        if omitted <= 0:
            return None
        artifact = _artifact(draft, kind, text)
        note = f"[... {omitted} chars omitted; full text: {pointer(artifact.id)}]"
        return f"{text[:HEAD]}\n{note}\n{text[-TAIL:]}", [artifact], "compact-inline"
    # Not worth it for a text no longer than what would stand in its place.
    if size <= len(pointer(_STAND_IN)) + 1 + len(describe(text).encode("utf-8")):
        return None
    artifact = _artifact(draft, kind, text)
    edit = "externalize" if step == "externalize" else "clear"
    return f"{pointer(artifact.id)} {describe(text)}", [artifact], edit


#: An artifact id of full length, to size a pointer before the artifact is made.
_STAND_IN = "0" * 64


def _shrunk_arguments(
    draft: Draft, step: str, params: dict[str, Any], arguments: str
) -> tuple[str, list[Artifact], str] | None:
    """A tool call's argument JSON after ``step``: each string value it takes becomes a pointer
    (or is compacted around one), every key kept."""
    over = {**_thresholds(params), "prune": PRUNE_ARGUMENT_BYTES}[step]
    if len(arguments.encode("utf-8")) <= min(over, PRUNE_ARGUMENT_BYTES):
        return None
    artifacts: list[Artifact] = []
    kinds: list[str] = []

    def shrink(value: str) -> str | None:
        shrunk = _shrunk_text(draft, step, value, over, "tool_input")
        if shrunk is None:
            return None
        artifacts.extend(shrunk[1])
        kinds.append(shrunk[2])
        return shrunk[0]

    new = shrink_arguments(arguments, shrink)
    if new is None or not artifacts:
        return None
    return new, artifacts, kinds[0]


def _artifact(draft: Draft, kind: str, text: str) -> Artifact:
    return make_artifact(kind, text, tokens=draft.text_tokens(text), summary=describe(text))
