"""Replay a recorded session under a policy: what the model would have received at each call, what
the prompt cache would have saved, and which facts the compactions would have lost for good.

A recorded session is a list of turns, each the whole context the agent sent at one model call
(:class:`ReplayTurn`). :func:`replay` walks them as the agent would have run behind ctxweb's
managed mode under a :class:`ReplayPolicy` (a strategy, its parameters and a trigger):

- The state is a rewrite: the agent's messages at the last compaction (``original``) and what
  replaced them. A call whose messages start with ``original`` (the same objects, else messages
  that say the same: :func:`~compaction.messages.message_identity`, which sets cache breakpoints
  aside, as managed mode's prefix match does) sends the replacement followed by the agent's
  newer messages, with the call's own tools and extra keys; its system prompt too, unless the
  plan changed it (a summary put into the system prompt) and the agent's is still the one the
  plan saw. A call that no longer starts with ``original`` (the agent compacted itself, or
  branched) is sent as it was, and the rewrite is dropped.
- Each sent context is counted as ingest counts a turn: the request overhead, the system prompt,
  the tools and each message's regions (:func:`compaction.regions.context_regions`). When a
  turn gives the provider's ``reported_input_tokens``, what it reported beyond the count of the
  agent's own context is ``unattributed`` (as ingest stores it) and is added to what the policy
  sends at that call too: it is mostly what the record lacks (a transcript's system prompt and
  tools) or another tokenizer's difference, which no strategy removes; for the prompt cache it
  sits at the head of the request.
- The trigger is ``trigger_tokens``, or ``trigger_fraction`` of the usable limit (window minus
  reserve): when a call's total is strictly above it, the strategy plans on what was sent (the
  call was already made) and the next calls build on the plan's context, its ``cache_control``
  breakpoints removed (the agent's own, on its newer messages, are the only ones sent, as the
  proxy does). A plan that makes no edit changes nothing; a plan that raises a library error is
  recorded in ``errors`` and the replay goes on; a plan that leaves the context above the
  trigger still counts, and the policy fires again at the next call above it.
- "As recorded" is ``strategy=None``: never compacts; its totals are the recorded turns'
  (given their reported input tokens, a stored turn's ``total_tokens`` exactly).

**The prompt cache of each call** compares what it sends with what the previous call sent: the
shared prefix is the request overhead, the tools and the system prompt (all of it only when
both are unchanged; the tools alone when only the system prompt changed, the tools coming first in
Anthropic's order; nothing when the tools changed), then the leading messages both sent (compared
as above: a breakpoint that moved from one message to a later one keeps the prefix). The first
call reads nothing. Two rules:

- ``openai`` (automatic caching): read = the shared prefix when it is at least 1,024 tokens,
  counted in 128-token steps past 1,024 (``1024 + (p - 1024) // 128 * 128``), else 0. OpenAI
  bills no write: write = 0, uncached = total - read.
- ``anthropic`` (explicit ``cache_control`` breakpoints, on tools, system blocks or messages):
  read = the longest prefix the previous call cached (through one of its breakpoints) that lies
  within the shared prefix and not past this call's last breakpoint (whose lookback finds it);
  write = the tokens through this call's last breakpoint minus read (never negative); uncached =
  total - read - write. A call with no breakpoint reads and writes nothing.
- ``anthropic-end``: the same, with a breakpoint taken at the end of every request (Claude Code
  marks its last message on every call): for records that kept no ``cache_control``, such as
  Claude Code's session files, where the ``anthropic`` rule would read nothing.

What is approximated: a breakpoint inside a message counts through the whole message; Anthropic's
lookback of 20 blocks is taken as unlimited; only the previous call's cache entries are looked for
(an older one that the previous call did not refresh is not); the minimum cacheable length per
model (1,024 or 2,048 tokens for Anthropic) and the cache's time to live (5 minutes, refreshed by
each hit) are ignored: every call is taken to come within it. Cost, with a
:class:`~compaction.cache.ModelPrice`: ``(uncached × input + write × cache_write + read ×
cache_read) / 1e6`` USD.

**Facts lost for good.** Facts are paths, error names, URLs and names (:mod:`compaction.facts`).
At each compaction, the removed facts are those of the context sent before the plan that neither
the plan's context shows nor an artifact holds that the plan's context points at
(``[EXTERNALIZED:...]``; an artifact no pointer names is out of the model's reach). A fact is
lost for good when a compaction removed it and the last call's context does not show it; its
turn is that of the last compaction that removed it.

**The result** (:meth:`ReplayResult.to_dict`)::

    {"label", "strategy", "params", "trigger": {"fraction": f} | {"tokens": n} | None,
     "turns": [{"index", "total", "regions": {region: n}, "usable", "window", "over_window",
                "compacted", "cache_read", "cache_write", "uncached", "cost"}],
     "compactions": [{"turn", "before", "after", "artifacts"}],
     "errors": [{"turn", "error"}],
     "totals": {"input_tokens", "cache_read", "cache_write", "uncached", "cost", "compactions",
                "peak_tokens", "peak_fill", "turns_over_window", "facts_lost"},
     "facts_lost": {"count", "by_kind": {kind: n}, "examples": [{"kind", "text", "turn"}]}}

``regions`` lists the regions with tokens; ``over_window`` is a total above the usable limit (a
known window); ``compacted`` marks the call after which the policy compacted; ``artifacts`` is how
many artifacts a compaction's plan kept; ``peak_fill`` is the largest total over the usable limit
(4 places), costs are rounded to 6 places and ``None`` without a price.

Example:
    >>> from compaction.messages.model import Context, Message, TextPart
    >>> from compaction.tokens import TokenCounter, get_tokenizer
    >>> counter = TokenCounter(get_tokenizer("cl100k_base"))
    >>> hi = Message("user", (TextPart("hello world"),))
    >>> turns = [ReplayTurn(0, Context("openai-chat", (hi,)), window=1000, reserve=100)]
    >>> result = replay(turns, policy=ReplayPolicy("as recorded"), counter=counter)
    >>> result.to_dict()["turns"][0]["total"]
    8
"""

from __future__ import annotations

from compaction.replay._cache import CACHE_RULES, CacheRule, anthropic_cached, openai_cached
from compaction.replay._engine import MAX_TRIGGER_TOKENS, replay
from compaction.replay._model import (
    MAX_FACT_EXAMPLES,
    Compaction,
    FactsLost,
    LostFact,
    PlanFailure,
    ReplayPolicy,
    ReplayResult,
    ReplayTurn,
    TurnReplay,
)

__all__ = [
    "CACHE_RULES",
    "MAX_FACT_EXAMPLES",
    "MAX_TRIGGER_TOKENS",
    "CacheRule",
    "Compaction",
    "FactsLost",
    "LostFact",
    "PlanFailure",
    "ReplayPolicy",
    "ReplayResult",
    "ReplayTurn",
    "TurnReplay",
    "anthropic_cached",
    "openai_cached",
    "replay",
]
