"""``ctxweb-auto``'s step digest: in the latest user turn (in an agent session often the whole
context: one request driving every tool call), the oldest steps (an assistant message and the
tool results answering it) become one digest that points at their full text, so the request and
the most recent steps stay verbatim. The cut falls between steps, so no tool call or result is
orphaned; the digest's facts are written by the plan's fact pass."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from compaction.messages.model import Message, TextPart
from compaction.regions import CTXWEB_SUMMARY_MARKER
from compaction.strategies.base import Draft, make_artifact, render_message
from compaction.strategies.ctxweb_auto._texts import DIGEST_QUOTE, clip, pointer
from compaction.summarizers import extract_facts, messages_text
from compaction.turns import orphans

__all__ = ["STEPS_HEADER", "Sources", "digest_steps"]

#: Each message this plan inserted (a digest or summary), by ``id``: the message itself (held,
#: so its ``id`` is not reused) and the messages it replaced.
Sources = dict[int, tuple[Message, Sequence[Message]]]

#: How a step digest begins (a summary marker, so the regions count it as summary).
STEPS_HEADER = CTXWEB_SUMMARY_MARKER + " digest of earlier steps of this turn"


def _boundaries(messages: list[Message], lo: int, hi: int) -> list[int]:
    """Positions in ``(lo, hi]`` where a cut leaves no tool pair split: before an assistant
    message, with every call before it answered before it."""
    cuts = []
    for i in range(lo + 1, hi + 1):
        if (i == hi or messages[i].role == "assistant") and orphans(messages[lo:i]).ok:
            cuts.append(i)
    return cuts


def steps_text(steps: list[Message], full_text_id: str, *, brief: bool = False) -> str:
    """The digest of ``steps``: the tools called, the last error lines, the last thing the
    assistant said (not when ``brief``), and a pointer to their full text."""
    calls = Counter(c.name for m in steps for c in m.tool_calls)
    said = next((m.text for m in reversed(steps) if m.role == "assistant" and m.text.strip()), "")
    errors = [] if brief else extract_facts(messages_text(steps)).errors
    lines = [f"{STEPS_HEADER} ({len(steps)} messages)"]
    if calls:
        lines.append("tools: " + ", ".join(f"{name} ×{n}" for name, n in calls.items()))
    if brief:
        said = ""
    if errors:
        lines.append("errors: " + " | ".join(clip(e, 160) for e in errors[-3:]))
    if said:
        lines.append(f"assistant: {clip(said, DIGEST_QUOTE, tail=True)}")
    lines.append(f"full steps: {pointer(full_text_id)}")
    return "\n".join(lines)


def digest_steps(draft: Draft, total: int, aim: int, lo: int, hi: int, sources: Sources) -> int:
    """Replace the oldest steps in ``messages[lo:hi]`` with one digest: the fewest that bring
    the total within ``aim``, else all of them. Nothing when that would not save tokens."""
    messages = draft.messages
    if hi - lo < 2:
        return total
    cuts = _boundaries(messages, lo, hi)
    if not cuts:
        return total
    removed = 0
    prefix = {lo: 0}
    position = lo
    for cut in cuts:
        while position < cut:
            removed += draft.tokens(messages[position])
            position += 1
        prefix[cut] = removed
    cost = 80  # what a digest costs before its facts; corrected by what one did cost
    for _ in range(3):
        chosen = next((cut for cut in cuts if total - prefix[cut] + cost <= aim), cuts[-1])
        steps = [
            m if origin is None else draft.context.messages[origin]
            for m, origin in zip(messages[lo:chosen], draft.origin[lo:chosen], strict=True)
        ]
        full = make_artifact(
            "turn_steps",
            "\n\n".join(f"[{m.role}]\n{render_message(m)}" for m in steps),
            tokens=prefix[chosen],
            summary=f"{len(steps)} earlier steps of a user turn",
        )
        message = Message("user", (TextPart(steps_text(steps, full.id)),))
        added = draft.tokens(message)
        if added <= cost or chosen == cuts[-1]:
            break
        cost = added
    if total - prefix[chosen] + added > aim:
        # even every step digested misses the aim: the digest without its quotes (its errors
        # and the assistant's last words stay in the full text; the plan carries their facts)
        brief = Message("user", (TextPart(steps_text(steps, full.id, brief=True)),))
        if draft.tokens(brief) < added:
            message, added = brief, draft.tokens(brief)
    if added >= prefix[chosen]:
        return total
    draft.artifacts.setdefault(full.id, full)
    draft.drop(range(lo, chosen), "summarize-range", "earlier steps digested by ctxweb-auto")
    draft.insert(lo, message, "ctxweb step digest")
    sources[id(message)] = (message, steps)
    return total - prefix[chosen] + added
