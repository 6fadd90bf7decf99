"""ctxweb-auto spends the room a target leaves on facts in a fixed order: error names, then paths
and names (identifiers such as a reservation or flight id among them, the cheapest first), and
the long URLs last (written short when they no longer fit whole); and every place it writes
facts keeps its line, two outputs of one message included."""

from __future__ import annotations

from compaction.messages.model import Context, Message, TextPart, ToolResultPart
from compaction.strategies import get_strategy
from compaction.strategies.ctxweb_auto._facts import message_facts, short_url
from tests.support.messages import atc, ctx, sys, t, u

FILLER = "words. " * 300


def _facts(messages):
    found = set()
    for message in messages:
        found |= message_facts(message)
    return found


def _plan(context, counter, target, max_step="prune"):
    return get_strategy("ctxweb-auto").plan(
        context, {"target_tokens": target, "max_step": max_step}, counter=counter
    )


def test_two_outputs_of_one_message_each_keep_the_facts_they_carry(counter):
    # Anthropic's shape: one user message answers two tool calls; both outputs are pruned, and
    # each carries its own facts line (the second must not be written over the first)
    outputs = (
        ToolResultPart("c1", (TextPart(f"read\n{FILLER}src/alpha.py load_alpha\n{FILLER}"),)),
        ToolResultPart("c2", (TextPart(f"read\n{FILLER}src/beta.py load_beta\n{FILLER}"),)),
    )
    context = Context(
        "anthropic-messages",
        (
            u("read both"),
            atc("c1", "c2", name="read"),
            Message("user", outputs),
            u("now fix alpha"),
        ),
    )
    wanted = {
        ("files", "src/alpha.py"),
        ("names", "load_alpha"),
        ("files", "src/beta.py"),
        ("names", "load_beta"),
    }
    kept_all = 0
    for target in range(150, 500, 25):
        plan = _plan(context, counter, target)
        if plan.after.total > target:
            continue
        carried = sum("carries" in e.detail for e in plan.edits)
        visible = _facts(plan.context.messages)
        if carried == 2:
            assert wanted <= visible, target
            kept_all += 1
    assert kept_all


#: A long URL (its query can go) that costs fewer tokens than the path beside it: the room
#: still buys the path first.
URL = "https://ci.example.com/runs/{i}?page=2&sort=asc"
PATH = "build/artifacts/integration_reports/nightly_{i}/coverage_summary_{i}.json"


def _mixed(n=6):
    """``n`` old turns, each with an output holding a path, an error name, two names and a long
    URL amid filler (none in its first line), then a latest turn."""
    messages = [sys("You are an agent.")]
    for i in range(n):
        output = (
            f"log\n{FILLER}fetched {URL.format(i=i)} into {PATH.format(i=i)};"
            f" Step{i}Error raised by run_step_{i} and check_step_{i}\n{FILLER}"
        )
        messages += [u(f"step {i}"), atc(f"c{i}", name="fetch"), t(f"c{i}", output)]
    messages.append(u("what failed?"))
    return ctx(*messages)


def test_when_room_is_short_long_urls_go_before_paths_errors_and_names(counter):
    context = _mixed()
    wanted = _facts(context.messages)
    urls = {f for f in wanted if f[0] == "urls"}
    others = wanted - urls
    assert urls
    assert {k for k, _ in others} == {"files", "errors", "names"}
    assert all(short_url(url) for _, url in urls)
    assert counter.count_text(URL) < counter.count_text(PATH)
    seen = {"some facts lost": 0, "urls whole": 0, "urls short": 0}
    for target in range(300, 1400, 40):
        plan = _plan(context, counter, target)
        if plan.after.total > target:
            continue
        visible = _facts(plan.context.messages)
        if not wanted <= visible:
            seen["some facts lost"] += 1
        whole = urls & visible
        short = {u for u in urls if ("urls", short_url(u[1])) in visible}
        seen["urls whole"] += bool(whole)
        seen["urls short"] += bool(short)
        if whole or short:
            # a long URL, whole or short, is written only once every other fact is
            assert others <= visible, target
    assert all(seen.values()), seen


def test_identifiers_such_as_reservation_and_flight_ids_are_carried_when_room_allows(counter):
    messages = [sys("You are an airline agent.")]
    ids = []
    for i in range(5):
        reservation, flight, user = f"ZFA{i}4Y", f"HAT{i:03d}", f"mia_li_{3660 + i}"
        ids += [reservation, flight, user]
        record = (
            f'{{"reservation_id": "{reservation}", "user_id": "{user}", "flights":'
            f' [{{"flight_number": "{flight}", "origin": "JFK", "destination": "SEA"}}],'
            f' "notes": "{FILLER}"}}'
        )
        messages += [
            u(f"look up reservation {i}"),
            atc(f"c{i}", name="get_reservation_details"),
            t(f"c{i}", record),
        ]
    messages.append(u("cancel the last one"))
    context = ctx(*messages)
    wanted = {("names", text) for text in ids}
    assert wanted <= _facts(context.messages)
    carried = 0
    for target in range(400, 2000, 100):
        plan = _plan(context, counter, target, max_step="summarize")
        if plan.after.total > target:
            continue
        visible = _facts(plan.context.messages)
        if any("carries" in e.detail for e in plan.edits):
            assert wanted <= visible, target
            carried += 1
    assert carried
