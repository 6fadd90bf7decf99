"""Strategy benchmark: facts kept visible at 30% of each session, and preview time on a 200K-token
context.

Usage: ``.venv/bin/python bench/strategies.py [--fraction 0.3] [--runs 9] [--no-write]
[--only facts|preview] [--half tuning|held-out] [--profile STRATEGY]``

1. **Facts kept.** For every session of every real transcript under ``../shared/data/transcripts``
   (or ``$CTXWEB_TRANSCRIPTS``), the context of its largest turn (skipped under 2,000 tokens),
   counted with its model's own encoding (o200k for GPT-4o and later, cl100k otherwise, as ctxweb
   counts a session), is planned by ``ctxweb-auto``, ``baseagent-compact``, ``llm4s-pipeline``,
   ``copaw-compact`` and ``nanobot-trim`` at the same target, ``--fraction`` of its tokens, each
   with the deterministic :class:`~compaction.summarizers.FactSummarizer`; how each is aimed is in
   :func:`aiming.aim`. Facts (paths, URLs, exception names, identifiers) are found by
   ``bench/facts.py``, written apart from the library's extractor; a fact of the input is kept
   when it is **visible in the planned context**, not when an artifact holds it. Every figure is
   given for each half of the fixed split in ``bench/heldout.py``: ctxweb-auto is tuned on the
   tuning half only.
2. **Preview time.** Every strategy's ``plan`` (which includes the region totals before and
   after) on the last context of ``coding_session(400, seed=1, target_tokens=200000)``, median of
   ``--runs`` runs, with a fresh token counter each run (cold: every text is tokenized) and with
   one that has already counted the context (warm: the case after ingest, where the counter's
   cache holds every stored message); then ``ctxweb-auto`` and ``baseagent-prune`` through
   HTTP, ``POST /api/v1/preview`` to a live uvicorn, what a user pays.

Results go to ``docs/benchmarks.md`` under the two ``## Strategies: ...`` sections (the other
sections are kept).

Before and after a change to ctxweb-auto, in one sitting: from a checkout of the code before it
(``git archive <rev> compaction bench tests/support ctxweb | tar -x -C <dir>``, this script and
``bench/facts.py`` copied in), ``python bench/strategies.py --only facts --save before.json
--strategies ctxweb-auto``; then here, ``--only facts --before before.json --change "<what>"``:
the facts section shows ctxweb-auto's sessions at 95% and facts by kind for both.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime
import json
import math
import os
import pstats
import statistics
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from aiming import Counter, _lead, _tokens, aim, new_counter  # noqa: E402
from facts import (  # noqa: E402
    KINDS,
    context_facts,
    context_texts,
    kept_by_kind,
    urls_written_short,
    visible_share,
)
from heldout import HALVES, half_of, transcript_files  # noqa: E402
from record import DOCS, machine, write_section  # noqa: E402

from compaction.cache import cache_impact  # noqa: E402
from compaction.messages import parse  # noqa: E402
from compaction.messages.model import Context, Message, TextPart  # noqa: E402
from compaction.regions import context_regions  # noqa: E402
from compaction.strategies import get_strategy, list_strategies  # noqa: E402
from compaction.strategies.ctxweb_auto import SUMMARY_HEADER, pointer  # noqa: E402
from compaction.strategies.ctxweb_auto._facts import fact_line  # noqa: E402
from compaction.strategies.ctxweb_auto._summaries import bare_summary  # noqa: E402
from compaction.strategies.ctxweb_auto._texts import FULL_TEXT  # noqa: E402
from compaction.summarizers import FactSummarizer  # noqa: E402
from compaction.tokens import encoding_for_model, get_tokenizer  # noqa: E402
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
MIN_TOKENS = 2_000
PREVIEW_TARGET_MS = 250
#: ctxweb-auto's landing band, as a share of the target, and the facts it must keep.
LAND_LOW, LAND_HIGH, KEEP = 0.9, 1.0, 0.95


# --- the transcripts --------------------------------------------------------------------------


@dataclass
class Case:
    """One session's largest context."""

    half: str  # tuning or held-out (bench/heldout.py)
    source: str  # the transcript format (its folder)
    name: str
    context: Context
    encoding: str
    tokens: int


def _size(context: Context) -> int:
    return sum(len(m.text) + sum(len(p.text) for p in m.tool_results) for m in context.messages)


_COUNTERS: dict[str, Counter] = {}


def counter_for(encoding: str) -> Counter:
    if encoding not in _COUNTERS:
        _COUNTERS[encoding] = new_counter(encoding)
    return _COUNTERS[encoding]


def load_cases(halves: tuple[str, ...]) -> list[Case]:
    root = find_transcripts()
    if root is None or not root.is_dir():
        raise SystemExit("real transcripts not found (set CTXWEB_TRANSCRIPTS)")
    cases = []
    for relative, data in transcript_files(root):
        half = half_of(relative)
        if half not in halves:
            continue
        path = Path(relative)
        for session in parse_transcript(data, name=path.name):
            if not session.turns:
                continue
            context = max((t.context for t in session.turns), key=_size)
            model = context.extra.get("model") or session.model
            encoding = encoding_for_model(model if isinstance(model, str) else None).encoding
            tokens = int(context_regions(context, counter_for(encoding)).total)
            if tokens >= MIN_TOKENS:
                name = f"{path.name}:{session.external_id}"
                cases.append(Case(half, path.parent.name, name, context, encoding, tokens))
    return cases


# --- facts ------------------------------------------------------------------------------------


def bench_facts(
    fraction: float, halves: tuple[str, ...], compared: tuple[str, ...] = COMPARED
) -> dict[str, Any]:
    cases = load_cases(halves)
    rows = []
    for case in cases:
        counter = counter_for(case.encoding)
        target = int(case.tokens * fraction)
        row: dict[str, Any] = {
            "half": case.half,
            "source": case.source,
            "name": case.name,
            "encoding": case.encoding,
            "before": case.tokens,
            "target": target,
        }
        row["floor"] = honest_floor(case.context, counter)
        row["fact_floor"] = fact_floor(case.context, counter)
        row["carrier_floor"] = carrier_floor(case.context, counter, row["fact_floor"])
        row["auto_floor"] = auto_floor(case.context, counter)
        for strategy_id in compared:
            run = aim(strategy_id, case.context, counter, target)
            kept, facts = visible_share(case.context, run.plan.context)
            row[strategy_id] = {
                "after": int(run.plan.after.total),
                "facts": facts,
                "kept": kept,
                "kinds": kept_by_kind(case.context, run.plan.context),
                "urls_short": urls_written_short(case.context, run.plan.context),
                "tries": run.tries,
                "notes": run.notes,
            }
        print(
            f"{case.half[:4]} {case.source:18} {case.name[:34]:34} {case.tokens:>7}"
            + "".join(
                f" | {s[:8]} {row[s]['after'] / target:4.2f} {_share(row[s]):4.0%}"
                for s in compared
            ),
            file=sys.stderr,
        )
        rows.append(row)
    return {"fraction": fraction, "rows": rows}


def _floor_messages(context: Context) -> list[Message]:
    """The messages no strategy may remove (see :func:`honest_floor`)."""
    messages = context.messages
    keep = set(range(_lead(messages)))
    starts = [i for i, m in enumerate(messages) if is_user_turn_start(m)]
    if starts:
        keep.add(starts[-1])
    if messages and messages[-1].tool_results:
        last_call = max(
            (i for i, m in enumerate(messages) if m.tool_calls), default=len(messages) - 1
        )
        keep.update(range(last_call, len(messages)))
    return [messages[i] for i in sorted(keep)]


def honest_floor(context: Context, counter: Counter) -> int:
    """The tokens no strategy may remove, whatever it is: the request overhead, the system
    prompt, the tool definitions, the leading system messages, the latest user message (the
    request being served) and, when the context ends in tool results, the call they answer and
    the results (what the model reads next)."""
    return _tokens(context, counter, _floor_messages(context))


#: bench/facts.py's kinds -> the kinds of ctxweb-auto's fact lines.
_LINE_KINDS = {"path": "files", "error": "errors", "url": "urls", "id": "names"}


def fact_floor(context: Context, counter: Counter) -> int:
    """The honest floor plus the cheapest rendering of the facts it lacks for 95% of the
    session's facts to be visible: the shortest facts (by tokens) that the floor's own messages
    do not show, written as one ctxweb-auto fact line in its compact form (``facts: files a b;
    names c``) with no message around it. Below this, no strategy that keeps facts visible can
    keep 95% of them."""
    messages = _floor_messages(context)
    wanted = context_facts(context)
    shown = context_facts(replace(context, messages=tuple(messages)), shown=True)
    need = math.ceil(KEEP * len(wanted)) - len(wanted & shown)
    floor = _tokens(context, counter, messages)
    if need <= 0:
        return floor
    missing = [tuple(f.split(":", 1)) for f in wanted - shown]
    cheapest = sorted(missing, key=lambda f: (counter.count_text(f[1]), f))[:need]
    line = fact_line(((_LINE_KINDS[kind], text) for kind, text in cheapest), compact=True)
    return floor + int(counter.count_text("\n" + line))


#: The least a ctxweb carrier costs (a summary holding only its marker and its pointer to the
#: full text); its id is a real artifact id's first characters, hex as every id is.
_BARE_CARRIER = Message(
    "user",
    (TextPart(f"{SUMMARY_HEADER}\n\n{FULL_TEXT} {pointer('e3b0c44298fc1c149afbf4c8996fb924')}"),),
)


def carrier_floor(context: Context, counter: Counter, floor: int) -> int:
    """``floor`` (the fact floor, :func:`fact_floor`) plus what ctxweb must leave where it
    removes text: for each run of messages the floor leaves out, one carrier (at least its
    marker and its pointer to the full text, :data:`_BARE_CARRIER`). Nothing a user sent is
    lost, so a ctxweb plan that removes a run writes where it went. A diagnostic, not a proof:
    it prices the plan that removes every message the floor leaves out (the way down to the
    floor); a plan keeping a short message verbatim instead may join two runs and need one
    carrier fewer."""
    kept = {id(m) for m in _floor_messages(context)}
    runs = 0
    inside = False
    for message in context.messages:
        out = id(message) not in kept
        runs += out and not inside
        inside = out
    return floor + runs * int(counter.count_message(_BARE_CARRIER).total)


def auto_floor(context: Context, counter: Counter) -> int:
    """What ctxweb-auto itself cannot go below: planned with a target of 1 token (everything
    it may touch shrunk, digested or summarized), its summary then counted in its bare form
    (the header and the pointer to the full text, which it is cut to when only that fits)."""
    plan = get_strategy("ctxweb-auto").plan(
        context, {"target_tokens": 1}, counter=counter, summarizer=FactSummarizer()
    )
    total = int(plan.after.total)
    for message in plan.context.messages:
        if message.text.startswith(SUMMARY_HEADER):
            bare = bare_summary(message)
            total -= int(counter.count_message(message).total - counter.count_message(bare).total)
    return total


# --- preview time -----------------------------------------------------------------------------


def preview_context() -> Context:
    from ctxweb.contexts.demo import coding_session

    body = coding_session(400, seed=1, target_tokens=200_000)[-1]
    return parse(body["format"], body["request"])


#: Strategies previewed through a live server too: ctxweb-auto, and a seed strategy beside it.
HTTP_STRATEGIES = ("ctxweb-auto", "baseagent-prune")


def preview_over_http(runs: int) -> list[dict[str, Any]]:
    """``POST /api/v1/preview`` of a 200K-token context to a live ``python -m
    ctxweb.server`` (the embedded shape: SQLite, the in-process token cache), each
    request's latency at the client, whole: cold = ``runs`` contexts (``coding_session`` with
    other seeds, texts the server has never counted) posted once each; warm = the first again
    (its texts now in the server's token cache, as after ingest)."""
    import http.client
    import shutil
    import tempfile

    from ctxweb.contexts.demo import coding_session
    from tests.support.servers import create_key, embedded_env, live_server

    data = Path(tempfile.mkdtemp(prefix="ctxweb-preview-"))
    env = embedded_env(data, CTXWEB_RATE_LIMIT="")
    key = create_key(env, role="viewer")
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    rows = []
    try:
        with live_server(env) as server:
            conn = http.client.HTTPConnection("127.0.0.1", int(server.url.rsplit(":", 1)[1]))

            def post(payload: bytes) -> float:
                started = time.perf_counter()
                conn.request("POST", "/api/v1/preview", body=payload, headers=headers)
                answer = conn.getresponse()
                reply = answer.read()
                elapsed = (time.perf_counter() - started) * 1000
                if answer.status != 200:
                    raise RuntimeError(f"preview: {answer.status} {reply[:300]!r}")
                return elapsed

            for k, strategy_id in enumerate(HTTP_STRATEGIES):
                payloads = []
                for seed in range(1 + k * runs, 1 + (k + 1) * runs):
                    body = coding_session(400, seed=seed, target_tokens=200_000)[-1]
                    payload = {
                        "format": body["format"],
                        "request": body["request"],
                        "strategy": strategy_id,
                    }
                    payloads.append(json.dumps(payload).encode())
                # the server's first preview loads its encodings: not counted
                first = json.loads(payloads[0])
                first["request"] = {
                    **first["request"],
                    "messages": first["request"]["messages"][:1],
                }
                post(json.dumps(first).encode())
                cold = [post(payload) for payload in payloads]
                warm = [post(payloads[0]) for _ in range(runs)]
                rows.append(
                    {
                        "id": strategy_id,
                        "body_mb": statistics.median(len(p) for p in payloads) / 1e6,
                        "cold": statistics.median(cold),
                        "warm": statistics.median(warm),
                    }
                )
                print(
                    f"{strategy_id:28} HTTP cold {rows[-1]['cold']:7.1f} ms"
                    f" warm {rows[-1]['warm']:7.1f} ms"
                )
            conn.close()
    finally:
        shutil.rmtree(data, ignore_errors=True)
    return rows


def _preview_params(strategy_id: str) -> dict[str, Any]:
    # Defaults, except where a default never fires on this context: the timing is of real work.
    if strategy_id == "nanobot-trim":
        return {}
    return {}


def _forget() -> None:
    """Empty the process's memos of what a plan reads, so a cold run is cold: a fresh token
    counter is not enough, ctxweb-auto's fact finder and the summarizer's facts keep their own."""
    from compaction import summarizers
    from compaction.strategies import nanobot
    from compaction.strategies.ctxweb_auto import _facts

    _facts.forget()
    summarizers._extract.cache_clear()
    nanobot._cl100k_estimate.cache_clear()


def bench_preview(runs: int, profile: str | None) -> dict[str, Any]:
    import gc

    from ctxweb.serving import GC_THRESHOLDS

    # the garbage collector as a web process runs it (ctxweb.asgi), where previews are served
    gc.set_threshold(*GC_THRESHOLDS)
    context = preview_context()
    # counted as ctxweb counts the session: with its model's own encoding
    encoding = encoding_for_model(context.extra.get("model")).encoding
    tokens = int(context_regions(context, new_counter(encoding)).total)
    # The machine's speed during the run (it varies by 2x within minutes here): tiktoken encoding
    # the context's whole text once, in one thread, uncached, before each strategy's runs.
    tokenizer = get_tokenizer(encoding)
    whole = "\n".join(context_texts(context))
    yardstick = []
    rows = []
    for strategy in list_strategies():
        started = time.perf_counter()
        tokenizer.count(whole)
        yardstick.append((time.perf_counter() - started) * 1000)
        params = _preview_params(strategy.id)
        cold = []
        for _ in range(runs):
            counter = new_counter(encoding)
            _forget()
            started = time.perf_counter()
            plan = strategy.plan(context, params, counter=counter)
            cache_impact(context, plan.context, counter)  # every preview shows it
            cold.append((time.perf_counter() - started) * 1000)
        warm_counter = new_counter(encoding)
        context_regions(context, warm_counter)
        strategy.plan(context, params, counter=warm_counter)
        warm = []
        for _ in range(runs):
            started = time.perf_counter()
            plan = strategy.plan(context, params, counter=warm_counter)
            cache_impact(context, plan.context, warm_counter)
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
            _forget()
            profiler.enable()
            strategy.plan(context, params, counter=new_counter(encoding))
            profiler.disable()
            pstats.Stats(profiler).sort_stats("cumulative").print_stats(30)
    http = preview_over_http(runs)
    return {
        "tokens": tokens,
        "encoding": encoding,
        "messages": len(context.messages),
        "runs": runs,
        "rows": rows,
        "http": http,
        "yardstick": yardstick,
    }


# --- the report -------------------------------------------------------------------------------


def _machine() -> str:
    import tiktoken

    return machine(f"tiktoken {tiktoken.__version__}")


def _share(cell: dict[str, Any]) -> float:
    return cell["kept"] / cell["facts"] if cell["facts"] else 1.0


def _pct(kept: int, total: int) -> str:
    return f"{100 * kept / total:.0f}%" if total else "–"


def _most(row: dict[str, Any], strategy: str) -> bool:
    """Whether ``strategy`` keeps the most facts of the strategies that reach the target (one
    above it keeps facts by not doing the job: it cannot win; ties count for each)."""
    fits = [s for s in COMPARED if row[s]["after"] <= row["target"]]
    if strategy not in fits:
        return False
    return _share(row[strategy]) >= max(_share(row[s]) for s in fits)


def _format_table(rows: list[dict[str, Any]]) -> list[str]:
    lines = [
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
            ratio = statistics.median(r[s]["after"] / r["target"] for r in members)
            over = sum(1 for r in members if r[s]["after"] > r["target"])
            kept = sum(r[s]["kept"] for r in members)
            facts = sum(r[s]["facts"] for r in members)
            text = f"{ratio:.2f}× target"
            if over:
                text = f"**{text}, {over} over**"
            cells.append(f"{text} / {_pct(kept, facts)}")
        before = statistics.median(r["before"] for r in members)
        lines.append(f"| {source} | {len(members)} | {before:,.0f} | " + " | ".join(cells) + " |")
    return lines


def _strategy_table(rows: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| strategy | median facts kept | worst | sessions ≥ 95% | keeps the most facts"
        " | lands at 90–100% of target | over the target |",
        "|---|---|---|---|---|---|---|",
    ]
    n = len(rows)
    for s in COMPARED:
        shares = [_share(r[s]) for r in rows]
        keep = sum(1 for x in shares if x >= KEEP)
        wins = sum(1 for r in rows if _most(r, s))
        band = sum(1 for r in rows if LAND_LOW <= r[s]["after"] / r["target"] <= LAND_HIGH)
        over = sum(1 for r in rows if r[s]["after"] > r["target"])
        lines.append(
            f"| {s} | {statistics.median(shares):.0%} | {min(shares):.0%} | {keep} of {n}"
            f" | {wins} of {n} ({wins / n:.0%}) | {band} of {n} | {over} |"
        )
    return lines


def _auto_summary(rows: list[dict[str, Any]]) -> list[str]:
    allowed = [r for r in rows if r["floor"] <= r["target"]]
    own = [r for r in allowed if r["auto_floor"] > r["target"]]
    landed = [
        r for r in allowed if LAND_LOW <= r["ctxweb-auto"]["after"] / r["target"] <= LAND_HIGH
    ]
    # when the floor is above 90% of the target, landing between the floor and the target counts
    tight = [
        r
        for r in allowed
        if r not in landed
        and max(r["floor"], r["auto_floor"]) > LAND_LOW * r["target"]
        and r["ctxweb-auto"]["after"] <= r["target"]
    ]
    kept = [r for r in allowed if _share(r["ctxweb-auto"]) >= KEEP]
    wins = [r for r in rows if _most(r, "ctxweb-auto")]
    wins_allowed = [r for r in allowed if _most(r, "ctxweb-auto")]
    missed = sorted(
        (r for r in allowed if _share(r["ctxweb-auto"]) < KEEP),
        key=lambda r: _share(r["ctxweb-auto"]),
    )
    n = max(len(allowed), 1)
    reachable = [r for r in allowed if r not in own]
    landed_reachable = [r for r in reachable if r in landed]
    lines = [
        f"- the floor (what no strategy may remove: system prompt, tools, leading system"
        f" messages, the latest user message and the tool exchange the context ends with) allows"
        f" the target on {len(allowed)} of {len(rows)} sessions: it excludes"
        f" {len(rows) - len(allowed)}. On those {len(allowed)}, ctxweb-auto lands at 90–100% of"
        f" the target on {len(landed)}"
        + (f" (and between its own floor and the target on {len(tight)} more)" if tight else "")
        + f", keeps ≥ 95% of the facts visible on {len(kept)} of {len(allowed)}, and its own"
        f" floor (planned with a target of 1 token, its summary counted as its header and"
        f" pointer) is above the target on {len(own)}: where its own floor allows the target"
        f" ({len(reachable)} sessions) it lands at 90–100% on {len(landed_reachable)};",
        f"- it keeps the most facts of every strategy (ties count) on {len(wins)} of {len(rows)}"
        f" sessions ({len(wins) / len(rows):.0%}), {len(wins_allowed)} of the {len(allowed)}"
        f" the floor allows ({len(wins_allowed) / n:.0%}).",
    ]
    # a diagnostic beside the targets, which it does not change
    dense = [r for r in allowed if r["fact_floor"] > r["target"]]
    possible = [r for r in allowed if r not in dense]
    kept_possible = [r for r in possible if r in kept]
    lines.append(
        f"- diagnostic, the **fact floor** (the floor plus the cheapest rendering, as one"
        f" ctxweb-auto fact line, of the facts it lacks for 95% of the session's facts to be"
        f" visible): above the target on {len(dense)} of the {len(allowed)} sessions the floor"
        f" allows, where no strategy that keeps facts visible can keep 95% of them; on the"
        f" other {len(possible)}, ctxweb-auto keeps ≥ 95% on {len(kept_possible)}."
    )
    carried = [r for r in possible if r["carrier_floor"] <= r["target"]]
    kept_carried = [r for r in carried if r in kept]
    lines.append(
        f"- diagnostic, the **carrier floor** (the fact floor plus, for each run of messages the"
        f" floor leaves out, the least a ctxweb carrier costs: the summary marker and a pointer"
        f" to the full text, which a plan that loses nothing leaves where it removes a run; it"
        f" prices removing every such run, so it is an estimate, not a bound): above the target on"
        f" {len(possible) - len(carried)} of those {len(possible)}; on the other {len(carried)},"
        f" ctxweb-auto keeps ≥ 95% on {len(kept_carried)}."
    )
    for label, members in (
        ("under 95% where the carrier floor allows 95%", [r for r in missed if r in carried]),
        (
            "under 95% where only the fact floor allows 95%",
            [r for r in missed if r in possible and r not in carried],
        ),
        ("under 95% where neither does", [r for r in missed if r not in possible]),
    ):
        if members:
            lines.append(
                f"- {label}: "
                + ", ".join(
                    f"`{r['name'][:48]}` {_share(r['ctxweb-auto']):.1%}"
                    f" ({r['ctxweb-auto']['kept']}/{r['ctxweb-auto']['facts']})"
                    for r in members[:8]
                )
                + (f"… ({len(members)} in all)" if len(members) > 8 else "")
            )
    return lines


#: How the kinds of fact are named in the tables.
_KIND_NAMES = {"path": "paths", "error": "errors", "url": "URLs", "id": "names"}


def _kinds_cells(rows: list[dict[str, Any]]) -> list[str]:
    """ctxweb-auto's facts of each kind kept, pooled over ``rows`` (URLs: kept whole, and how
    many more were written short)."""
    cells = []
    for kind in KINDS:
        kept = sum(r["ctxweb-auto"]["kinds"][kind][0] for r in rows)
        facts = sum(r["ctxweb-auto"]["kinds"][kind][1] for r in rows)
        cell = f"{kept:,} of {facts:,}"
        if kind == "url":
            short = sum(r["ctxweb-auto"]["urls_short"] for r in rows)
            cell += f" (+{short} short)"
        cells.append(cell)
    return cells


def _kinds_table(rows: list[dict[str, Any]], before: dict[str, dict[str, Any]] | None) -> list[str]:
    """ctxweb-auto by kind of fact, on every session and on those the floor allows; with
    ``before`` (rows of a run of the code before a change, same sitting, by name), both."""
    runs = [("this code", rows)]
    if before is not None:
        runs.insert(0, ("before", [before[r["name"]] for r in rows if r["name"] in before]))
    lines = [
        "| ctxweb-auto | sessions | floor allows | ≥ 95% there | median facts kept there"
        " | median facts kept (all) | "
        + " | ".join(f"{_KIND_NAMES[k]} kept (all)" for k in KINDS)
        + " |",
        "|---|---|---|---|---|---|" + "---|" * len(KINDS),
    ]
    for label, members in runs:
        allowed = [r for r in members if r["floor"] <= r["target"]]
        kept = sum(1 for r in allowed if _share(r["ctxweb-auto"]) >= KEEP)
        there = statistics.median(_share(r["ctxweb-auto"]) for r in allowed) if allowed else 1.0
        median = statistics.median(_share(r["ctxweb-auto"]) for r in members)
        lines.append(
            f"| {label} | {len(members)} | {len(allowed)} | {kept} of {len(allowed)}"
            f" | {there:.1%} | {median:.1%} | " + " | ".join(_kinds_cells(members)) + " |"
        )
    return lines


def render_facts(result: dict[str, Any], when: str, before: dict[str, Any] | None = None) -> str:
    rows = result["rows"]
    fraction = result["fraction"]
    lines = [
        FACTS_SECTION,
        "",
        f"Run {when} with `bench/strategies.py` on {_machine()}.",
        "",
        f"**Contexts**: the largest turn of every real transcript session ({len(rows)} sessions of"
        f" {MIN_TOKENS:,} tokens or more), counted with its model's own encoding (o200k for"
        " GPT-4o, cl100k otherwise). **Split**: by transcript file, fixed in `bench/heldout.py`;"
        " the shared set has no OpenAI-chat file to tune on, so two real tau-bench retail runs"
        " (other tasks, other runs than the held-out airline file; sources and licence in"
        " `bench/transcripts/README.md`) join the tuning half;"
        " ctxweb-auto is tuned on the tuning half only (its largest turns here, and many more of"
        " its turns at lower targets with `bench/tuning_turns.py`), the held-out half is"
        f" reported as it falls. **Target**: {fraction:.0%} of each context's tokens, the same"
        " for every strategy; summaries by the deterministic `FactSummarizer`. **Facts**: file"
        " paths, URLs, exception names and identifiers found by `bench/facts.py` (regexes written"
        " apart from the library's `extract_facts`, which ctxweb-auto uses), over the whole"
        " input context; a fact is kept only when it is **visible in the planned context**"
        " (an artifact the context points at does not count). Cells: median tokens after as a"
        " share of the target (**bold** with a count where any session lands above it) / facts"
        " kept, pooled over the sessions (kept ÷ facts). **Keeps the most facts** counts only the"
        " strategies that reach the target (ties count for each): one above it keeps facts by"
        " not doing the job.",
    ]
    for half in HALVES:
        members = [r for r in rows if r["half"] == half]
        if not members:
            continue
        lines += [
            "",
            f"### {half} half ({len(members)} sessions)",
            "",
            *_format_table(members),
            "",
            *_strategy_table(members),
            "",
            "`ctxweb-auto` at the targets (90–100% of the target, ≥ 95% of the facts where its"
            " floor allows, the most facts on ≥ 90% of sessions):",
            "",
            *_auto_summary(members),
            "",
            "By kind of fact (pooled kept ÷ facts over every session of the half; a URL counts"
            " as kept only whole, and `+n short` says how many more it wrote short, host and path"
            " or host and last segment, see `bench/facts.py`)"
            + (f", before and after {before['change']}, same sitting" if before else "")
            + ":",
            "",
            *_kinds_table(
                members,
                {r["name"]: r for r in before["rows"] if r["half"] == half} if before else None,
            ),
        ]
    lines += [
        "",
        "How each strategy is aimed at the target (`aim` in `bench/aiming.py`):"
        " `ctxweb-auto` takes `target_tokens`; `llm4s-pipeline` takes `budget` (the target minus"
        " the system prompt, tools and leading system messages, which its conversation does not"
        " hold); `nanobot-trim` takes `budget` for the old history (the target minus the system"
        " message and the current user turn, which it never trims; clamped to 500); those two"
        " are re-planned with the budget lowered by the overshoot when they land above the"
        " target (up to 4 tries). `copaw-compact` cannot take a target: `max_input_length`,"
        " `reserve_ratio` (≤ 0.3) and `compact_ratio` (≤ 0.9) are set so that it fires and the"
        " recent tokens it keeps verbatim are the target minus the system prompt and 1,500 for"
        " the summary (in its bytes/3.75 units), re-planned the same way. `ctxweb-auto"
        " verbatim` is `ctxweb-auto` with `latest_turn=verbatim` (it never touches the latest"
        " user turn). `baseagent-compact` cannot take one either: `context_limit` = its own"
        " chars/4 estimate of the context, `output_reserve` 0 and `threshold` = the fraction"
        " put its trigger at the target; once over it summarizes the whole history into one"
        " message, so it always lands far below the target.",
    ]
    return "\n".join(lines) + "\n"


def render_preview(result: dict[str, Any], when: str) -> str:
    lines = [
        PREVIEW_SECTION,
        "",
        f"Run {when} with `bench/strategies.py` on {_machine()}.",
        "",
        f"**Context**: the last turn of `coding_session(400, seed=1, target_tokens=200000)`,"
        f" {result['tokens']:,} tokens ({result['encoding']}, its model's), {result['messages']}"
        " messages. Time ="
        " `strategy.plan(context, defaults)`, region totals before and after included, and the"
        " prompt-cache numbers every preview shows (`compaction.cache.cache_impact`), median"
        f" of {result['runs']} runs. Cold: a fresh `TokenCounter` each run and the process's"
        " other memos emptied (ctxweb-auto's fact finder, the summarizer's facts), so every"
        " text is tokenized and searched; warm: a counter that has already counted the context,"
        " as after ingest (the app's shared token cache), and the memos as the cold run left"
        " them. The garbage collector runs with a web process's thresholds"
        f" (`ctxweb.serving.GC_THRESHOLDS`). Target < {PREVIEW_TARGET_MS} ms.",
        "",
    ]
    yardstick = result.get("yardstick") or []
    if yardstick:
        lines += [
            "",
            "**Yardstick**, same run: tiktoken encoding the context's whole text once, in one"
            " thread, uncached, before each strategy's runs: median"
            f" {statistics.median(yardstick):.0f} ms ({min(yardstick):.0f}-{max(yardstick):.0f}"
            " ms across the run). This machine's speed varies up to 2x within minutes; the"
            " yardstick tells which phase a run fell in.",
        ]
    lines += [
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
    in_process = {row["id"]: row for row in result["rows"]}
    lines += [
        "",
        "**Through HTTP**, what a user pays: `POST /api/v1/preview` with the context's request"
        " to a live `python -m ctxweb.server` (the embedded shape: SQLite, the"
        " in-process token cache), latency at the client over a keep-alive connection (body"
        " upload, parsing the request, the plan, the cache numbers, the JSON answer). Cold: the"
        f" median of {result['runs']} contexts of the same size (`coding_session` with other"
        " seeds) the server had never counted, each posted once; warm: the first again,"
        " median of as many.",
        "",
        "| strategy | body | cold median | warm median | in process, same run: cold / warm |",
        "|---|---|---|---|---|",
    ]
    for row in result.get("http", []):
        mine = in_process[row["id"]]
        cold = f"{row['cold']:.0f} ms"
        if row["cold"] >= PREVIEW_TARGET_MS:
            cold = f"**{cold}**"
        lines.append(
            f"| {row['id']} | {row['body_mb']:.2f} MB | {cold} | {row['warm']:.0f} ms"
            f" | {mine['cold']:.0f} / {mine['warm']:.0f} ms |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fraction", type=float, default=0.3)
    parser.add_argument("--half", choices=tuple(HALVES), help="only this half (default both)")
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--only", choices=("facts", "preview"))
    parser.add_argument("--profile", help="print a cProfile of this strategy's preview")
    parser.add_argument("--no-write", action="store_true", help="print, do not touch docs/")
    parser.add_argument(
        "--save", type=Path, help="facts: write the rows as JSON here (and only plan --strategies)"
    )
    parser.add_argument(
        "--strategies", default=",".join(COMPARED), help="facts with --save: these strategies"
    )
    parser.add_argument(
        "--before",
        type=Path,
        help="facts: JSON saved by --save from the code before a change (same sitting),"
        " shown beside this run's ctxweb-auto",
    )
    parser.add_argument("--change", default="the change", help="what --before is before")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ctxweb.settings")
    when = datetime.date.today().isoformat()
    halves = (args.half,) if args.half else tuple(HALVES)
    if args.save is not None:
        # a run to compare with later (the code before a change): its rows, no section
        compared = tuple(args.strategies.split(","))
        result = bench_facts(args.fraction, halves, compared)
        args.save.write_text(json.dumps(result))
        print(f"saved {len(result['rows'])} rows to {args.save}", file=sys.stderr)
        return
    sections = []
    if args.only in (None, "facts"):
        before = None
        if args.before is not None:
            before = {**json.loads(args.before.read_text()), "change": args.change}
        result = bench_facts(args.fraction, halves)
        sections.append((FACTS_SECTION, render_facts(result, when, before)))
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
