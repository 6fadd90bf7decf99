"""ctxweb's own strategy, ``ctxweb-auto``: escalate from lossless to lossy until under a target.

Steps, each run only while the counted total is still above the target:

1. **externalize** tool outputs and tool-call argument strings above ``externalize_bytes``: the
   text moves to an artifact and leaves ``[EXTERNALIZED:<id>]`` plus a one-line description
   (arguments stay valid JSON, every key kept);
2. **compact** medium ones (above ``compact_bytes``): head and tail kept around a pointer to the
   full text's artifact;
3. **prune**: every remaining older tool output, and argument strings above 512 bytes, become
   their pointer;
4. **digest**: the oldest user turns, one at a time, each become a short digest (the request,
   the tools called, errors, facts, the last reply) that points at the turn's full text; when a
   whole turn's digest would take far more than the target needs, the finest cut instead: the
   turn's request kept and only its oldest steps digested;
5. **summarize**: the oldest whole user turns (digests included) are replaced by one
   ``[CTXWEB_SUMMARY]`` user message (incremental over a previous one) that keeps their facts:
   paths, commands, errors, tests, URLs, identifiers and numbers, cut to what the target leaves
   room for, and ends with a pointer to one artifact holding the full text of the summarized
   messages (a previous summary's pointers are carried over), so every fact of what it removes
   stays reachable, not only those the summary has room for. A summary that would cost more
   than the digests it replaces has its prose cut rather than being skipped, and its prose gives
   way to the fact lines of what it replaced when both do not fit (facts before prose), and
   so, after it, do the digests' quotes of a turn's last reply.

Then **give back**: the steps are coarse, so when the plan lands under 90% of the target the
most recent shrunk tool outputs are widened again (whole, or head and tail around their pointer)
and digests quote more of their turn, within the target. A summary that cannot fit even cut to
its prose's first lines keeps only its header and pointer, when that meets the target.

The latest user turn (``latest_turn``):

- ``auto`` (default): kept verbatim while the target can be met without it. When steps 1-5 leave
  the total above the target (in an agent session one user request often drives every tool call,
  and the latest turn is then nearly the whole context), steps 1-3 also reach the latest turn's
  tool outputs and arguments, all but its last ``keep_recent_outputs`` tool calls, and a warning
  says so;
- ``verbatim``: never touched, even if the target is then missed;
- ``outputs``: steps 1-3 reach the same tool outputs and arguments from the start.

The latest turn's messages are never dropped, digested or summarized; its user message is never
changed. Cuts fall only at user-turn starts and never orphan a tool call or result; an edit that
would not make a message smaller is skipped; whatever leaves the context is kept as an artifact,
and the context points at it.
"""

from compaction.strategies.ctxweb_auto._strategy import STEPS, CtxwebAuto
from compaction.strategies.ctxweb_auto._texts import DIGEST_HEADER, SUMMARY_HEADER, pointer

__all__ = ["DIGEST_HEADER", "STEPS", "SUMMARY_HEADER", "CtxwebAuto", "pointer"]
