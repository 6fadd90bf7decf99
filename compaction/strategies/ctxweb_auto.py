"""ctxweb's own strategy, ``ctxweb-auto``: escalate from lossless to lossy until under a target.

Steps, each run only while the counted total is still above the target:

1. externalize tool outputs above ``externalize_bytes``: the text moves to an artifact and the
   output becomes ``[EXTERNALIZED:<id>]`` plus a one-line description;
2. compact medium outputs (above ``compact_bytes``): head and tail kept around a pointer to the
   full text's artifact;
3. prune: every remaining older tool output becomes its pointer;
4. summarize: the oldest whole user turns are replaced by one ``[CTXWEB_SUMMARY]`` user message
   (incremental over a previous one) that keeps their facts: paths, commands, errors, tests,
   URLs, identifiers and numbers.

The latest user turn is never touched; cuts fall only at user-turn starts and never orphan a tool
call or result; whatever leaves the context is kept as an artifact.
"""

from __future__ import annotations

from typing import Any

from compaction.messages.model import Message, TextPart
from compaction.regions import CTXWEB_SUMMARY_MARKER
from compaction.strategies.base import Draft, Param, Strategy
from compaction.strategies.outputs import tool_outputs, with_result_text
from compaction.summarizers import FactSummarizer, Summarizer
from compaction.tokens import REQUEST_OVERHEAD
from compaction.turns import find_legal_start, is_user_turn_start, orphans

__all__ = ["SUMMARY_HEADER", "CtxwebAuto", "pointer"]

SUMMARY_HEADER = CTXWEB_SUMMARY_MARKER + "\n"
SUMMARY_PROMPT = (
    "Summarize the removed conversation into the sections Goal, Constraints & Preferences,"
    " Progress (Done, In Progress, Blocked), Key Decisions, Next Steps and Critical Context."
    " Keep every file path, command, error line, test name, URL, identifier and number."
)


def pointer(artifact_id: str) -> str:
    """The pointer ctxweb leaves for externalized content."""
    return f"[EXTERNALIZED:{artifact_id}]"


def _describe(text: str) -> str:
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    lines = text.count("\n") + 1
    return f"{len(text.encode('utf-8'))} bytes, {lines} lines; starts: {first[:120]}"


class CtxwebAuto(Strategy):
    """``ctxweb-auto``: externalize, compact, prune, then summarize, until under the target."""

    id = "ctxweb-auto"
    description = (
        "Escalate from lossless to lossy until under a target: externalize big tool outputs,"
        " compact medium ones, prune old ones, summarize the oldest user turns; never orphans a"
        " tool pair, keeps the latest user turn verbatim and keeps removed facts in the summary or"
        " behind artifacts."
    )
    source = "ctxweb"
    params = (
        Param(
            "target_tokens",
            "int",
            None,
            min=1,
            max=10_000_000,
            help="target total tokens; default target_fraction of usable",
        ),
        Param(
            "target_fraction",
            "float",
            0.5,
            min=0.05,
            max=1.0,
            help="target as a fraction of usable (window minus output reserve)",
        ),
        Param(
            "context_window",
            "int",
            200_000,
            min=1000,
            max=10_000_000,
            help="the model's context window",
        ),
        Param(
            "output_reserve",
            "int",
            None,
            min=0,
            max=1_000_000,
            help="output tokens reserved; default the context's max output tokens, else 32,000",
        ),
        Param(
            "externalize_bytes",
            "int",
            8192,
            min=256,
            max=100_000_000,
            help="tool outputs above this many bytes are externalized",
        ),
        Param(
            "compact_bytes",
            "int",
            2048,
            min=128,
            max=100_000_000,
            help="tool outputs above this many bytes are compacted around a pointer",
        ),
        Param(
            "max_step",
            "str",
            "summarize",
            choices=("externalize", "compact", "prune", "summarize"),
            help="the most lossy step allowed",
        ),
    )

    def run(self, draft: Draft, params: dict[str, Any], summarizer: Summarizer | None) -> None:
        target = params["target_tokens"]
        if target is None:
            reserve = params["output_reserve"]
            if reserve is None:
                reserve = draft.context.max_output_tokens or 32_000
            target = int(max(params["context_window"] - reserve, 1) * params["target_fraction"])
        total = _total(draft)
        steps = ("externalize", "compact", "prune", "summarize")
        allowed = steps[: steps.index(params["max_step"]) + 1]
        starts = [i for i, m in enumerate(draft.messages) if is_user_turn_start(m)]
        protected_from = starts[-1] if starts else len(draft.messages)
        for step in allowed:
            if total <= target:
                return
            if step == "summarize":
                total = self._summarize(draft, total, target, protected_from, summarizer)
            else:
                total = self._shrink_outputs(draft, step, params, total, target, protected_from)
        if total > target:
            draft.warn(f"ctxweb-auto: {total} tokens remain above the target of {target}")

    def _shrink_outputs(
        self, draft: Draft, step: str, params: dict[str, Any], total: int, target: int, limit: int
    ) -> int:
        for position, part_index, part in list(tool_outputs(draft.messages[:limit])):
            if total <= target:
                break
            text = part.text
            size = len(text.encode("utf-8"))
            if "[EXTERNALIZED:" in text or not text:
                continue
            if step == "externalize" and size <= params["externalize_bytes"]:
                continue
            if step == "compact" and size <= params["compact_bytes"]:
                continue
            artifact = draft.keep("tool_result", text, _describe(text))
            if step == "compact":
                head, tail = text[:600], text[-400:]
                omitted = len(text) - len(head) - len(tail)
                if omitted <= 0:
                    continue
                note = f"[... {omitted} chars omitted; full output: {pointer(artifact.id)}]"
                new = f"{head}\n{note}\n{tail}"
                kind = "compact-inline"
            else:
                new = f"{pointer(artifact.id)} {_describe(text)}"
                kind = "externalize" if step == "externalize" else "clear"
            before = draft.tokens(draft.messages[position])
            draft.replace_message(
                position,
                with_result_text(draft.messages[position], part_index, new),
                kind,  # type: ignore[arg-type]
                f"{step}: tool output {part.tool_call_id}",
                part_index=part_index,
                artifact_id=artifact.id,
            )
            total += draft.tokens(draft.messages[position]) - before
        return total

    def _summarize(
        self,
        draft: Draft,
        total: int,
        target: int,
        limit: int,
        summarizer: Summarizer | None,
    ) -> int:
        messages = draft.messages
        first = 0
        while first < len(messages) and messages[first].role in ("system", "developer"):
            first += 1
        previous: str | None = None
        if first < limit and messages[first].text.startswith(SUMMARY_HEADER):
            previous = messages[first].text[len(SUMMARY_HEADER) :]
        starts = [
            i for i in range(first, limit + 1) if i == limit or is_user_turn_start(messages[i])
        ]
        summarizer = summarizer or FactSummarizer()
        allowance = 0
        summary = ""
        cut = first
        for _attempt in range(4):
            need = total + allowance - target
            removed = 0
            cut = first
            for start in starts:
                if removed >= need and start > first:
                    break
                cut = start
                removed = sum(draft.tokens(m) for m in messages[first:cut])
            cut += find_legal_start(messages[cut:limit]) if cut < limit else 0
            while cut < limit and not orphans(messages[cut:]).ok and cut in starts:
                break
            if cut <= first:
                return total
            body = [m for m in messages[first:cut] if not m.text.startswith(SUMMARY_HEADER)]
            summary = summarizer.summarize(body, previous=previous, prompt=SUMMARY_PROMPT)
            size = draft.text_tokens(SUMMARY_HEADER + summary) + 8
            if size <= allowance or total - removed + size <= target or cut >= limit:
                break
            allowance = size
        if not orphans(messages[cut:]).ok:
            draft.warn("ctxweb-auto: the kept messages already had orphaned tool pairs")
        removed = sum(draft.tokens(m) for m in messages[first:cut])
        draft.drop(range(first, cut), "summarize-range", "summarized into the ctxweb summary")
        message = Message("user", (TextPart(SUMMARY_HEADER + summary),))
        draft.insert(first, message, "ctxweb summary")
        return total - removed + draft.tokens(message)


def _total(draft: Draft) -> int:
    counter = draft.counter
    total = int(getattr(counter, "REQUEST_OVERHEAD", REQUEST_OVERHEAD))
    if draft.system:
        total += counter.count_system(draft.system)
    if draft.context.tools:
        total += counter.count_tools(draft.context.tools)
    return total + sum(draft.tokens(m) for m in draft.messages)
