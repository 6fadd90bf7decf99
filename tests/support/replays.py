"""What every replayed column must satisfy, whatever the session: the checks of the replay of every
real transcript (``tests/ctxweb/contexts/test_replays_transcripts.py``), which
``bench/replay_transcripts.py`` runs too."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any


def _trigger(trigger: Mapping[str, Any] | None, usable: int) -> int | None:
    """A column's trigger in tokens at a turn whose usable limit is ``usable`` (as
    :func:`compaction.regions.budget` computes it), None for as recorded."""
    if not trigger:
        return None
    if "tokens" in trigger:
        return int(trigger["tokens"])
    return int(Fraction(usable) * Fraction(repr(float(trigger["fraction"]))))


def column_problems(column: Mapping[str, Any], *, indexes: Sequence[int]) -> list[str]:
    """Everything wrong with one replayed column (``ReplayResult.to_dict()``) of a session whose
    turns are ``indexes``: an empty list when it reached the last turn, made no error, and its
    numbers hold together (cache reads within the input, costs not negative, compactions only
    where its policy compacts and its trigger was passed, totals, peak fill and turns over the
    window as its turns give them, facts lost counted by kind)."""
    label = column.get("label")
    problems: list[str] = []

    def wrong(what: str) -> None:
        problems.append(f"{label}: {what}")

    turns = column["turns"]
    if [t["index"] for t in turns] != list(indexes):
        wrong(f"walked turns {[t['index'] for t in turns][-3:]}..., not to {indexes[-1:]}")
        return problems
    if column["errors"]:
        wrong(f"errors {column['errors'][:3]}")
    totals = column["totals"]
    recorded = column["strategy"] is None
    priced = any(t["cost"] is not None for t in turns)
    cost = 0.0
    for t in turns:
        at = f"turn {t['index']}"
        if not 0 <= t["cache_read"] <= t["total"]:
            wrong(f"{at}: cache read {t['cache_read']} of {t['total']} input tokens")
        if t["cache_write"] < 0 or t["uncached"] < 0:
            wrong(f"{at}: negative cache write {t['cache_write']} or uncached {t['uncached']}")
        if t["cache_read"] + t["cache_write"] + t["uncached"] != t["total"]:
            wrong(f"{at}: read + write + uncached is not the total {t['total']}")
        if (t["cost"] is None) == priced:
            wrong(f"{at}: a cost of {t['cost']} in a column priced {priced}")
        elif t["cost"] is not None:
            if t["cost"] < 0:
                wrong(f"{at}: negative cost {t['cost']}")
            cost += t["cost"]
        if t["over_window"] != (t["window"] > 0 and t["total"] > t["usable"]):
            wrong(f"{at}: over_window {t['over_window']} for {t['total']} of {t['usable']}")
        if sum(t["regions"].values()) != t["total"]:
            wrong(f"{at}: regions add up to {sum(t['regions'].values())}, not {t['total']}")
    by_turn = {t["index"]: t for t in turns}
    compacted = [t["index"] for t in turns if t["compacted"]]
    if [c["turn"] for c in column["compactions"]] != compacted:
        wrong(f"compactions at {[c['turn'] for c in column['compactions']]}, flagged {compacted}")
    if recorded and (compacted or column["compactions"]):
        wrong("as recorded compacted")
    for c in column["compactions"]:
        turn = by_turn.get(c["turn"])
        if turn is None or c["before"] != turn["total"]:
            wrong(f"compaction at {c['turn']} starts from {c['before']}, not the call's total")
            continue
        trigger = _trigger(column["trigger"], turn["usable"])
        if trigger is None or turn["window"] <= 0 or c["before"] <= trigger:
            wrong(f"compaction at {c['turn']} from {c['before']} under its trigger {trigger}")
        if c["after"] < 0 or c["artifacts"] < 0:
            wrong(f"compaction at {c['turn']}: after {c['after']}, {c['artifacts']} artifacts")
    fills = [t["total"] / t["usable"] for t in turns if t["usable"] > 0]
    expected = {
        "input_tokens": sum(t["total"] for t in turns),
        "cache_read": sum(t["cache_read"] for t in turns),
        "cache_write": sum(t["cache_write"] for t in turns),
        "uncached": sum(t["uncached"] for t in turns),
        "compactions": len(compacted),
        "peak_tokens": max(t["total"] for t in turns),
        "peak_fill": round(max(fills, default=0), 4),
        "turns_over_window": sum(1 for t in turns if t["over_window"]),
    }
    for key, value in expected.items():
        if totals[key] != value:
            wrong(f"totals[{key!r}] is {totals[key]}, its turns give {value}")
    if priced and (totals["cost"] is None or abs(totals["cost"] - cost) > 1e-5):
        wrong(f"total cost {totals['cost']}, its turns add up to {cost}")
    facts = column["facts_lost"]
    if facts["count"] != totals["facts_lost"] or facts["count"] != sum(facts["by_kind"].values()):
        wrong(f"facts lost {facts['count']}, by kind {facts['by_kind']}")
    if facts["count"] and not column["compactions"]:
        wrong(f"{facts['count']} facts lost without a compaction")
    if len(facts["examples"]) > facts["count"]:
        wrong("more examples of facts lost than facts lost")
    return problems
