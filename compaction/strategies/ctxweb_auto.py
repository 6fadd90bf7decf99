"""ctxweb's own strategy, ``ctxweb-auto``: escalate from lossless to lossy until under a target.

Steps, each run only while the counted total is still above the target:

1. externalize tool outputs above ``externalize_bytes``: the text moves to an artifact and the
   output becomes ``[EXTERNALIZED:<id>]`` plus a one-line description;
2. compact medium outputs (above ``compact_bytes``): head and tail kept around a pointer to the
   full text's artifact;
3. prune: every remaining older tool output becomes its pointer;
4. summarize: the oldest whole user turns are replaced by one ``[CTXWEB_SUMMARY]`` user message
   (incremental over a previous one) that keeps their facts: paths, commands, errors, tests,
   URLs, identifiers and numbers, and ends with a pointer to one artifact holding the full text
   of the summarized messages (a previous summary's pointers are carried over), so every fact of
   what it removes stays reachable, not only those the summary has room for.

By default the latest user turn is never touched (``latest_turn="verbatim"``). With
``latest_turn="outputs"`` the output steps (1-3) may also reach the tool outputs inside it, all but
its last ``keep_recent_outputs``: in an agent session one user request often drives every tool
call, and the latest turn is then nearly the whole context. Its messages are never dropped or
summarized either way. Cuts fall only at user-turn starts and never orphan a tool call or result;
whatever leaves the context is kept as an artifact, and the context points at it.
"""

from __future__ import annotations

import re
from typing import Any

from compaction.messages.model import Message, TextPart
from compaction.regions import CTXWEB_SUMMARY_MARKER
from compaction.strategies.base import Draft, Param, Strategy, make_artifact, render_message
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


_POINTER = re.compile(r"\[EXTERNALIZED:[0-9a-f]{64}\]")
_FULL_TEXT = "Full text of the summarized messages:"


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
        Param(
            "latest_turn",
            "str",
            "verbatim",
            choices=("verbatim", "outputs"),
            help="verbatim: never touch the latest user turn; outputs: let steps 1-3 reach its"
            " older tool outputs too (agent sessions where one request drives every call)",
        ),
        Param(
            "keep_recent_outputs",
            "int",
            3,
            min=0,
            max=1000,
            help="with latest_turn=outputs, the latest turn's last tool outputs kept verbatim",
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
        outputs_from = protected_from
        if params["latest_turn"] == "outputs":
            outputs_from = _recent_outputs_start(
                draft.messages, protected_from, params["keep_recent_outputs"]
            )
        for step in allowed:
            if total <= target:
                return
            if step == "summarize":
                total = self._summarize(draft, total, target, protected_from, summarizer)
            else:
                total = self._shrink_outputs(draft, step, params, total, target, outputs_from)
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
            if not text or text.startswith("[EXTERNALIZED:"):
                continue
            if "[EXTERNALIZED:" in text:
                # compacted by step 2: pruning leaves only its pointer
                found = _POINTER.search(text)
                kept = draft.artifacts.get(found.group(0)[14:-1]) if found else None
                if step == "prune" and found is not None and kept is not None:
                    before = draft.tokens(draft.messages[position])
                    draft.replace_message(
                        position,
                        with_result_text(
                            draft.messages[position], part_index, f"{found.group(0)} {kept.summary}"
                        ),
                        "clear",
                        f"prune: tool output {part.tool_call_id}",
                        part_index=part_index,
                        artifact_id=kept.id,
                    )
                    total += draft.tokens(draft.messages[position]) - before
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
        # prefix[i]: tokens of messages[first:first + i], so each candidate cut costs O(1)
        prefix = [0]
        for m in messages[first:limit]:
            prefix.append(prefix[-1] + draft.tokens(m))
        for _attempt in range(4):
            need = total + allowance - target
            removed = 0
            cut = first
            for start in starts:
                if removed >= need and start > first:
                    break
                cut = start
                removed = prefix[cut - first]
            cut += find_legal_start(messages[cut:limit]) if cut < limit else 0
            while cut < limit and not orphans(messages[cut:]).ok and cut in starts:
                break
            if cut <= first:
                return total
            body = [m for m in messages[first:cut] if not m.text.startswith(SUMMARY_HEADER)]
            summary = summarizer.summarize(body, previous=previous, prompt=SUMMARY_PROMPT)
            # + the trailer that points at the full text (about 25 tokens a pointer)
            size = draft.text_tokens(SUMMARY_HEADER + summary) + 8 + 60
            if size <= allowance or total - removed + size <= target or cut >= limit:
                break
            allowance = size
        if not orphans(messages[cut:]).ok:
            draft.warn("ctxweb-auto: the kept messages already had orphaned tool pairs")
        removed = (
            prefix[cut - first] if cut <= limit else sum(map(draft.tokens, messages[first:cut]))
        )
        # The artifact holds the messages as they came in, before steps 1-3 shrank their
        # outputs, so one hop reaches every original.
        summarized = [
            m if origin is None else draft.context.messages[origin]
            for m, origin in zip(messages[first:cut], draft.origin[first:cut], strict=True)
            if not m.text.startswith(SUMMARY_HEADER)
        ]
        # Built directly rather than with draft.keep: its tokens are the messages' (already
        # counted), not a second tokenization of the whole range.
        full = make_artifact(
            "summarized_messages",
            "\n\n".join(f"[{m.role}]\n{render_message(m)}" for m in summarized),
            tokens=sum(map(draft.tokens, summarized)),
            summary=f"{len(summarized)} messages summarized by ctxweb-auto",
        )
        draft.artifacts.setdefault(full.id, full)
        pointers = [*_POINTER.findall(previous or ""), pointer(full.id)]
        summary = _POINTER.sub("", summary).replace(_FULL_TEXT, "").rstrip()
        summary += f"\n\n{_FULL_TEXT} {' '.join(dict.fromkeys(pointers))}"
        draft.drop(range(first, cut), "summarize-range", "summarized into the ctxweb summary")
        message = Message("user", (TextPart(SUMMARY_HEADER + summary),))
        draft.insert(first, message, "ctxweb summary")
        return total - removed + draft.tokens(message)


def _recent_outputs_start(messages: list[Message], turn_start: int, keep: int) -> int:
    """Where the latest turn's last ``keep`` tool outputs begin (the output steps stop there)."""
    positions = [i for i, _, _ in tool_outputs(messages) if i >= turn_start]
    positions = list(dict.fromkeys(positions))
    if keep == 0:
        return len(messages)
    if len(positions) <= keep:
        return positions[0] if positions else len(messages)
    return positions[-keep]


def _total(draft: Draft) -> int:
    counter = draft.counter
    total = int(getattr(counter, "REQUEST_OVERHEAD", REQUEST_OVERHEAD))
    if draft.system:
        total += counter.count_system(draft.system)
    if draft.context.tools:
        total += counter.count_tools(draft.context.tools)
    return total + sum(draft.tokens(m) for m in draft.messages)
