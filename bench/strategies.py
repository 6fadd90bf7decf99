"""Strategy benchmark: facts kept at the same budget, and preview time on a 200K-token context.

Usage: ``.venv/bin/python bench/strategies.py [--fraction 0.5] [--runs 5] [--no-write]
[--only facts|preview] [--profile STRATEGY]``

1. **Facts kept.** For every session of every real transcript under ``../shared/data/transcripts``
   (or ``$CTXWEB_TRANSCRIPTS``), the context of its largest turn (skipped under 2,000 tokens) is
   planned by ``ctxweb-auto``, ``baseagent-compact``, ``llm4s-pipeline``, ``copaw-compact`` and
   ``nanobot-trim`` at the same target, ``--fraction`` of the context's tokens (cl100k, counted
   as :func:`compaction.regions.context_regions` counts them), each with the deterministic
   :class:`~compaction.summarizers.FactSummarizer`. How each is aimed at the target is in
   :func:`aim`. Removed content is every text of the input (system text, message text, a tool
   call's name and arguments, a tool result) that is no longer present verbatim in the result;
   its facts are what :func:`compaction.summarizers.extract_facts` finds in it (paths, commands,
   error lines, tests, URLs, identifiers, numbers). A fact is kept when it is still visible in
   the result or inside an artifact the result points at (its id, ``content_<id>`` or
   ``tool_result/<id>.txt`` appears in the result).
2. **Preview time.** Every strategy's ``plan`` (which includes the region totals before and
   after) on the last context of ``coding_session(400, seed=1, target_tokens=200000)``, median of
   ``--runs`` runs, with a fresh token counter each run (cold: every text is tokenized) and with
   one that has already counted the context (warm: the case after ingest, where the counter's
   cache holds every stored message).

Results go to ``docs/benchmarks.md`` under the two ``## Strategies: ...`` sections (the other
sections are kept).
"""

from __future__ import annotations

import argparse
import cProfile
import datetime
import math
import os
import pstats
import re
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from record import DOCS, machine, write_section  # noqa: E402

from compaction.messages import parse  # noqa: E402
from compaction.messages.model import Context, Message, TextPart  # noqa: E402
from compaction.regions import context_regions  # noqa: E402
from compaction.strategies import Plan, get_strategy, list_strategies  # noqa: E402
from compaction.summarizers import FactSummarizer, extract_facts  # noqa: E402
from compaction.tokens import REQUEST_OVERHEAD, TokenCounter, get_tokenizer  # noqa: E402
from compaction.tokens.estimators import baseagent_message_tokens  # noqa: E402
from compaction.transcripts import parse_transcript  # noqa: E402
from compaction.turns import is_user_turn_start  # noqa: E402
from tests.support.transcripts import find_transcripts  # noqa: E402

FACTS_SECTION = "## Strategies: facts kept at the same budget"
PREVIEW_SECTION = "## Strategies: preview time on a 200K-token context"
COMPARED = (
    "ctxweb-auto",
    "ctxweb-auto verbatim",
    "baseagent-compact",
    "llm4s-pipeline",
    "copaw-compact",
    "nanobot-trim",
)
#: Variants: a label, the strategy and the parameters added to its aim.
VARIANTS = {"ctxweb-auto verbatim": ("ctxweb-auto", {"latest_turn": "verbatim"})}
MIN_TOKENS = 2_000
PREVIEW_TARGET_MS = 250
#: How long a fact ``extract_facts`` clipped is (197 characters and ``...``).
FACT_CLIP = 200
TOKEN = re.compile(r"[^\s\"'<>`()\[\]{},;|]+")


class Counter(TokenCounter):
    """cl100k with the request overhead :func:`context_regions` reads from the counter."""

    REQUEST_OVERHEAD = REQUEST_OVERHEAD


def new_counter() -> Counter:
    return Counter(get_tokenizer("cl100k_base"))


# --- the transcripts --------------------------------------------------------------------------


@dataclass
class Case:
    """One session's largest context."""

    source: str  # the transcript format (its folder)
    name: str
    context: Context
    tokens: int


def _size(context: Context) -> int:
    return sum(len(m.text) + sum(len(p.text) for p in m.tool_results) for m in context.messages)


def load_cases(counter: Counter) -> list[Case]:
    root = find_transcripts()
    if root is None or not root.is_dir():
        raise SystemExit("real transcripts not found (set CTXWEB_TRANSCRIPTS)")
    cases = []
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path.name == "README.md":
            continue
        for session in parse_transcript(path.read_bytes(), name=path.name):
            if not session.turns:
                continue
            context = max((t.context for t in session.turns), key=_size)
            tokens = int(context_regions(context, counter).total)
            if tokens >= MIN_TOKENS:
                name = f"{path.name}:{session.external_id}"
                cases.append(Case(path.parent.name, name, context, tokens))
    return cases


# --- aiming each strategy at the target -------------------------------------------------------


def _tokens(context: Context, counter: Counter, messages: list[Message]) -> int:
    return int(context_regions(replace(context, messages=tuple(messages)), counter).total)


def _lead(messages: tuple[Message, ...]) -> int:
    lead = 0
    while lead < len(messages) and messages[lead].role in ("system", "developer"):
        lead += 1
    return lead


@dataclass
class Run:
    plan: Plan
    params: dict[str, Any]
    tries: int = 1
    notes: list[str] = field(default_factory=list)


def _calibrated(
    strategy_id: str,
    context: Context,
    counter: Counter,
    target: int,
    knob: int,
    params: Callable[[int], dict[str, Any]],
    floor: int,
) -> Run:
    """Plan with ``params(knob)``; while the result is over the target, lower the knob by the
    overshoot and plan again (up to 4 tries): the strategy's own budget, aimed at the target."""
    strategy = get_strategy(strategy_id)
    run = None
    for attempt in range(1, 5):
        chosen = params(max(knob, floor))
        plan = strategy.plan(context, chosen, counter=counter, summarizer=FactSummarizer())
        run = Run(plan, chosen, attempt)
        over = int(plan.after.total) - target
        if over <= 0 or knob <= floor:
            break
        knob -= over
    assert run is not None
    return run


def aim(strategy_id: str, context: Context, counter: Counter, target: int) -> Run:
    """Plan ``strategy_id`` on ``context`` with the parameters that aim it at ``target``.

    - ``ctxweb-auto``: ``target_tokens`` = the target.
    - ``llm4s-pipeline``: ``budget`` = the target minus what its conversation does not hold
      (top-level system prompt, tools, leading system messages), lowered by the overshoot if it
      lands above.
    - ``nanobot-trim``: ``budget`` (old-history tokens) = the target minus the system message and
      the current user turn, which nanobot never trims; lowered by the overshoot if it lands above.
    - ``copaw-compact``: no target; ``compact_ratio`` 0.3 and ``reserve_ratio`` 0.3 (their limits)
      with ``max_input_length`` sized so the recent tokens kept verbatim are the target minus the
      system prompt and a summary allowance; lowered by the overshoot if it lands above.
    - ``baseagent-compact``: no target; it summarizes everything once over its trigger, so
      ``context_limit`` = its own estimate of the context, ``output_reserve`` 0 and ``threshold``
      = the fraction make the trigger the target (prune at its defaults).
    """
    messages = context.messages
    lead = _lead(messages)
    fixed = _tokens(context, counter, list(messages[:lead]))
    if strategy_id in VARIANTS:
        base, extra = VARIANTS[strategy_id]
        params = {"target_tokens": target, **extra}
        plan = get_strategy(base).plan(
            context, params, counter=counter, summarizer=FactSummarizer()
        )
        return Run(plan, params)
    if strategy_id == "ctxweb-auto":
        params = {"target_tokens": target}
        plan = get_strategy(strategy_id).plan(
            context, params, counter=counter, summarizer=FactSummarizer()
        )
        return Run(plan, params)
    if strategy_id == "baseagent-compact":
        estimate = sum(baseagent_message_tokens(m) for m in messages)
        if context.system:
            estimate += baseagent_message_tokens(Message("system", context.system))
        total = int(context_regions(context, counter).total)
        params = {
            "context_limit": max(estimate, 1000),
            "output_reserve": 0,
            "threshold": max(min(target / total, 1.0), 0.01),
        }
        plan = get_strategy(strategy_id).plan(
            context, params, counter=counter, summarizer=FactSummarizer()
        )
        return Run(plan, params)
    if strategy_id == "llm4s-pipeline":
        return _calibrated(
            strategy_id, context, counter, target, target - fixed, lambda k: {"budget": k}, 1
        )
    if strategy_id == "nanobot-trim":
        starts = [i for i, m in enumerate(messages) if is_user_turn_start(m)]
        current = list(messages[starts[-1] :]) if starts else []
        head = [] if context.system else list(messages[:1])
        kept = _tokens(context, counter, head + current)
        run = _calibrated(
            strategy_id, context, counter, target, target - kept, lambda k: {"budget": k}, 500
        )
        if target - kept < 500:
            run.notes.append("current turn alone is over the target")
        return run
    if strategy_id == "copaw-compact":
        from compaction.tokens.estimators import copaw_message_tokens, copaw_text_tokens

        body = [m for m in messages if m.role not in ("system", "developer")]
        body_est = sum(copaw_message_tokens(m) for m in body)
        system_est = copaw_text_tokens(
            "\n".join(
                [p.text for p in context.system if isinstance(p, TextPart)]
                + [m.text for m in messages if m.role in ("system", "developer")]
            )
        )
        ratio = body_est / max(_tokens(context, counter, body), 1)

        def params(reserve: int) -> dict[str, Any]:
            # reserve (cl100k) -> copaw's bytes/3.75 units; the window is sized so the reserve
            # is at most 30% of it and the threshold (compact_ratio × window) sits just under
            # the context's own estimate, above the system prompt, so it fires.
            wanted = max(reserve * ratio, 1)
            window = max(math.ceil(wanted / 0.3), math.ceil(system_est / 0.9) + 1, 1000)
            window = min(window, 10_000_000)
            fire = (system_est + body_est * 0.98) / window
            return {
                "max_input_length": window,
                "compact_ratio": round(min(max(fire, 0.3), 0.9), 4),
                "reserve_ratio": round(min(max(wanted / window, 0.05), 0.3), 4),
            }

        return _calibrated(strategy_id, context, counter, target, target - fixed - 1500, params, 1)
    raise ValueError(strategy_id)


# --- facts ------------------------------------------------------------------------------------


def _texts(context: Context) -> list[str]:
    """Every text of a context facts can come from, one per part."""
    texts = [p.text for p in context.system if isinstance(p, TextPart)]
    for message in context.messages:
        for part in message.parts:
            if part.kind == "text":
                texts.append(part.text)
            elif part.kind == "tool_call":
                texts.append(f"{part.name} {part.arguments}")
            elif part.kind == "tool_result":
                texts.append(part.text)
    return [t for t in texts if t.strip()]


class Haystack:
    """Text a fact is looked up in: whole tokens for one-word facts, substrings otherwise.

    Facts are compared as ``extract_facts`` wrote them: a fact it clipped (200 characters ending
    in ``...``) is found by what it kept, and a command it took from JSON (``\\"`` unescaped) is
    also looked up in the JSON-unescaped text.
    """

    def __init__(self, texts: list[str]) -> None:
        self.blob = "\n".join(texts)
        self.unescaped = self.blob.replace('\\"', '"')
        self.words: set[str] = set()
        for token in TOKEN.findall(self.blob):
            self.words.add(token)
            self.words.add(token.rstrip(".:!?"))

    def __contains__(self, fact: object) -> bool:
        assert isinstance(fact, str)
        if TOKEN.fullmatch(fact):
            return fact in self.words
        if len(fact) == FACT_CLIP and fact.endswith("..."):
            fact = fact[:-3]
        return fact in self.blob or fact in self.unescaped


@dataclass
class FactScore:
    removed: int
    kept: int
    kept_any_artifact: int
    referenced_artifacts: int
    artifacts: int

    @property
    def share(self) -> float:
        return self.kept / self.removed if self.removed else 1.0


def score(context: Context, plan: Plan) -> FactScore:
    output_texts = _texts(plan.context)
    blob = "\n".join(output_texts)
    removed_texts = [t for t in dict.fromkeys(_texts(context)) if t not in blob]
    facts: set[str] = set()
    for text in removed_texts:
        facts.update(extract_facts(text).all())
    # An artifact is reachable when the result or a reachable artifact points at it.
    referenced: list[Any] = []
    pending = list(plan.artifacts)
    reach = blob
    while True:
        found = [a for a in pending if a.id in reach]
        if not found:
            break
        referenced += found
        pending = [a for a in pending if a not in found]
        reach = "\n".join(a.content for a in found)
    visible = Haystack(output_texts + [a.content for a in referenced])
    everything = Haystack(output_texts + [a.content for a in plan.artifacts])
    return FactScore(
        removed=len(facts),
        kept=sum(1 for f in facts if f in visible),
        kept_any_artifact=sum(1 for f in facts if f in everything),
        referenced_artifacts=len(referenced),
        artifacts=len(plan.artifacts),
    )


def bench_facts(fraction: float) -> dict[str, Any]:
    counter = new_counter()
    cases = load_cases(counter)
    rows = []
    for case in cases:
        fixed = _tokens(
            case.context, counter, list(case.context.messages[: _lead(case.context.messages)])
        )
        target = fixed + int((case.tokens - fixed) * fraction)
        row: dict[str, Any] = {
            "source": case.source,
            "name": case.name,
            "before": case.tokens,
            "target": target,
        }
        # what ctxweb-auto cannot go below: everything it may touch shrunk or summarized
        floor = get_strategy("ctxweb-auto").plan(
            case.context, {"target_tokens": 1}, counter=counter, summarizer=FactSummarizer()
        )
        row["auto_floor"] = int(floor.after.total)
        for strategy_id in COMPARED:
            run = aim(strategy_id, case.context, counter, target)
            facts = score(case.context, run.plan)
            row[strategy_id] = {
                "after": int(run.plan.after.total),
                "removed": facts.removed,
                "kept": facts.kept,
                "kept_any": facts.kept_any_artifact,
                "tries": run.tries,
                "params": run.params,
                "notes": run.notes,
            }
        print(
            f"{case.source:20} {case.name[:40]:40} {case.tokens:>7}"
            + "".join(
                f" | {s[:8]} {row[s]['after']:>6} {row[s]['kept']:>4}/{row[s]['removed']:<4}"
                for s in COMPARED
            ),
            file=sys.stderr,
        )
        rows.append(row)
    return {"fraction": fraction, "rows": rows}


# --- preview time -----------------------------------------------------------------------------


def preview_context() -> Context:
    from ctxweb.contexts.demo import coding_session

    body = coding_session(400, seed=1, target_tokens=200_000)[-1]
    return parse(body["format"], body["request"])


def _preview_params(strategy_id: str) -> dict[str, Any]:
    # Defaults, except where a default never fires on this context: the timing is of real work.
    if strategy_id == "nanobot-trim":
        return {}
    return {}


def bench_preview(runs: int, profile: str | None) -> dict[str, Any]:
    context = preview_context()
    tokens = int(context_regions(context, new_counter()).total)
    rows = []
    for strategy in list_strategies():
        params = _preview_params(strategy.id)
        cold = []
        for _ in range(runs):
            counter = new_counter()
            started = time.perf_counter()
            plan = strategy.plan(context, params, counter=counter)
            cold.append((time.perf_counter() - started) * 1000)
        warm_counter = new_counter()
        context_regions(context, warm_counter)
        strategy.plan(context, params, counter=warm_counter)
        warm = []
        for _ in range(runs):
            started = time.perf_counter()
            plan = strategy.plan(context, params, counter=warm_counter)
            warm.append((time.perf_counter() - started) * 1000)
        rows.append(
            {
                "id": strategy.id,
                "cold": statistics.median(cold),
                "warm": statistics.median(warm),
                "after": int(plan.after.total),
                "edits": len(plan.edits),
            }
        )
        print(f"{strategy.id:28} cold {rows[-1]['cold']:7.1f} ms warm {rows[-1]['warm']:7.1f} ms")
        if profile == strategy.id:
            profiler = cProfile.Profile()
            profiler.enable()
            strategy.plan(context, params, counter=new_counter())
            profiler.disable()
            pstats.Stats(profiler).sort_stats("cumulative").print_stats(30)
    return {"tokens": tokens, "messages": len(context.messages), "runs": runs, "rows": rows}


# --- the report -------------------------------------------------------------------------------


def _machine() -> str:
    import tiktoken

    return machine(f"tiktoken {tiktoken.__version__}")


def _pct(kept: int, removed: int) -> str:
    return f"{100 * kept / removed:.0f}%" if removed else "–"


def render_facts(result: dict[str, Any], when: str) -> str:
    rows = result["rows"]
    fraction = result["fraction"]
    lines = [
        FACTS_SECTION,
        "",
        f"Run {when} with `bench/strategies.py` on {_machine()}.",
        "",
        f"**Contexts**: the largest turn of every real transcript session ({len(rows)} sessions of"
        f" {MIN_TOKENS:,} tokens or more, cl100k). **Target**: the context's fixed part (system"
        f" prompt, tools, leading system messages, which no strategy removes) plus {fraction:.0%}"
        " of the rest, the same for every strategy; summaries by the deterministic"
        " `FactSummarizer`. The `ctxweb-auto` column uses its defaults. **Facts kept** = facts"
        " (paths, commands, error lines, tests, URLs, identifiers,"
        " numbers, by `extract_facts`) of the input texts no longer present verbatim in the"
        " result, that are still visible in the result or inside an artifact the result points"
        " at. Cells: median tokens after / facts kept over all sessions of the format (facts"
        " pooled: kept ÷ removed). Tokens in **bold** are above the target.",
        "",
        "| format | sessions | median tokens before | "
        + " | ".join(f"{s}: after / facts kept" for s in COMPARED)
        + " |",
        "|---|---|---|" + "---|" * len(COMPARED),
    ]
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(row["source"], []).append(row)
    groups["**all**"] = rows
    for source, members in groups.items():
        cells = []
        for s in COMPARED:
            after = statistics.median(r[s]["after"] for r in members)
            ratio = statistics.median(r[s]["after"] / r["target"] for r in members)
            over = sum(1 for r in members if r[s]["after"] > r["target"])
            kept = sum(r[s]["kept"] for r in members)
            removed = sum(r[s]["removed"] for r in members)
            text = f"{after:,.0f} ({ratio:.2f}× target)"
            if over:
                text = f"**{text}, {over} over**"
            cells.append(f"{text} / {_pct(kept, removed)}")
        before = statistics.median(r["before"] for r in members)
        lines.append(f"| {source} | {len(members)} | {before:,.0f} | " + " | ".join(cells) + " |")
    per_session = []
    for s in COMPARED:
        shares = [r[s]["kept"] / r[s]["removed"] for r in rows if r[s]["removed"]]
        wins = sum(
            1
            for r in rows
            if r[s]["removed"]
            and r[s]["kept"] / r[s]["removed"]
            >= max(r[o]["kept"] / r[o]["removed"] if r[o]["removed"] else 1.0 for o in COMPARED)
        )
        any_artifact = sum(r[s]["kept_any"] for r in rows)
        removed = sum(r[s]["removed"] for r in rows)
        per_session.append(
            f"| {s} | {statistics.median(shares):.0%} | {min(shares):.0%} | {wins} |"
            f" {_pct(any_artifact, removed)} |"
        )
    lines += [
        "",
        "Per session (all formats): median and worst share of facts kept, sessions where the"
        " strategy keeps the most facts (ties count for each), and the share if every stored"
        " artifact counted, referenced or not (ctxweb keeps whatever a plan drops as an artifact,"
        " so every strategy reaches ~100% that way; only a pointer in the context makes it"
        " reachable for the model):",
        "",
        "| strategy | median | worst | keeps the most | with unreferenced artifacts |",
        "|---|---|---|---|---|",
        *per_session,
        "",
        "How each strategy is aimed at the target (`aim` in `bench/strategies.py`):"
        " `ctxweb-auto` takes `target_tokens`; `llm4s-pipeline` takes `budget` (the target minus"
        " the system prompt, tools and leading system messages, which its conversation does not"
        " hold); `nanobot-trim` takes `budget` for the old history (the target minus the system"
        " message and the current user turn, which it never trims; clamped to 500); those two"
        " are re-planned with the budget lowered by the overshoot when they land above the"
        " target (up to 4 tries). `copaw-compact` cannot take a target: `max_input_length`,"
        " `reserve_ratio` (≤ 0.3) and `compact_ratio` (≤ 0.9) are set so that it fires and the"
        " recent tokens it keeps verbatim are the target minus the system prompt and 1,500 for"
        " the summary (in its bytes/3.75 units), re-planned the same way; where its ranges"
        " cannot express that (a small context under a big system prompt) it lands above."
        " `ctxweb-auto verbatim` is `ctxweb-auto` with `latest_turn=verbatim`: it never touches"
        " the latest user turn, which in agent sessions holds most of the context; by default"
        " (`auto`) ctxweb-auto reaches the latest turn's older tool outputs and arguments only"
        " when the target cannot be met without them."
        " `baseagent-compact` cannot take one either: `context_limit` = its own chars/4 estimate"
        " of the context, `output_reserve` 0 and `threshold` = the fraction put its trigger at the"
        " target; once over it summarizes the whole history into one message, so it always lands"
        " far below the target.",
    ]
    over = [r for r in rows if r["ctxweb-auto"]["after"] > r["target"]]
    floored = [r for r in over if r["auto_floor"] > r["target"]]
    lines += [
        "",
        f"`ctxweb-auto` lands above the target on {len(over)} of {len(rows)} sessions. On"
        f" {len(floored)} of them even its floor is above the target (planned with a target of 1"
        " token: every older turn summarized, every tool output and big argument it may touch"
        " behind a pointer): what it always keeps verbatim, the system prompt and tools, the"
        " latest user message, the assistant text and the last 3 tool calls with their outputs,"
        " is above the target alone.",
    ]
    unreachable = [
        r["name"]
        for r in rows
        if "current turn alone is over the target" in r["nanobot-trim"]["notes"]
    ]
    if unreachable:
        lines += [
            "",
            f"`nanobot-trim` cannot reach the target on {len(unreachable)} of {len(rows)} sessions:"
            " their current user turn alone is above it (agent sessions where one user request"
            " drives every tool call).",
        ]
    return "\n".join(lines) + "\n"


def render_preview(result: dict[str, Any], when: str) -> str:
    lines = [
        PREVIEW_SECTION,
        "",
        f"Run {when} with `bench/strategies.py` on {_machine()}.",
        "",
        f"**Context**: the last turn of `coding_session(400, seed=1, target_tokens=200000)`,"
        f" {result['tokens']:,} tokens (cl100k), {result['messages']} messages. Time ="
        " `strategy.plan(context, defaults)`, region totals before and after included, median"
        f" of {result['runs']} runs. Cold: a fresh `TokenCounter` each run, so every text is"
        " tokenized; warm: a counter that has already counted the context, as after ingest"
        f" (the app's shared token cache). Target < {PREVIEW_TARGET_MS} ms.",
        "",
        "| strategy | cold median | warm median | tokens after (defaults) | edits |",
        "|---|---|---|---|---|",
    ]
    for row in result["rows"]:
        cold = f"{row['cold']:.0f} ms"
        if row["cold"] >= PREVIEW_TARGET_MS:
            cold = f"**{cold}**"
        warm = f"{row['warm']:.0f} ms"
        if row["warm"] >= PREVIEW_TARGET_MS:
            warm = f"**{warm}**"
        lines.append(f"| {row['id']} | {cold} | {warm} | {row['after']:,} | {row['edits']:,} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fraction", type=float, default=0.5)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--only", choices=("facts", "preview"))
    parser.add_argument("--profile", help="print a cProfile of this strategy's preview")
    parser.add_argument("--no-write", action="store_true", help="print, do not touch docs/")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ctxweb.settings")
    when = datetime.date.today().isoformat()
    sections = []
    if args.only in (None, "facts"):
        sections.append((FACTS_SECTION, render_facts(bench_facts(args.fraction), when)))
    if args.only in (None, "preview"):
        sections.append(
            (PREVIEW_SECTION, render_preview(bench_preview(args.runs, args.profile), when))
        )
    for heading, section in sections:
        print(section)
        if not args.no_write:
            write_section(heading, section)
            print(f"written to {DOCS.relative_to(ROOT)}: {heading}", file=sys.stderr)


if __name__ == "__main__":
    main()
