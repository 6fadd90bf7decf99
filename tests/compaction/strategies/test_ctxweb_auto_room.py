"""ctxweb-auto spends the room a target leaves on facts in a fixed order: error names, then paths
and names (identifiers such as a reservation or flight id among them, the cheapest first), and
the long URLs last (written short when they no longer fit whole); and every place it writes
facts keeps its line, two outputs of one message included."""

from __future__ import annotations

from compaction.messages.model import Context, Message, TextPart, ToolResultPart
from compaction.regions import context_regions
from compaction.strategies import get_strategy
from compaction.strategies.ctxweb_auto._facts import message_facts, short_url
from tests.support.messages import a, atc, ctx, sys, t, u

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


def _one_prompt(steps=8, names=60):
    """One request (with ``names`` identifiers of its own, so a few facts lost are under 5% of
    the context's) driving ``steps`` tool calls, each output listing directories, a scoped
    package and ``node_modules/`` amid filler."""
    request = "set up the web app build: " + " ".join(f"setting_name_{k}" for k in range(names))
    messages = [sys("You are an agent."), u(request)]
    filler = "words. " * 300
    for i in range(steps):
        output = f"ls\n{filler} node_modules/ dist_{i}/ .cache_{i}/ @scope{i}/pkg{i} {filler}"
        messages += [atc(f"c{i}", name="bash", text=f"step {i}"), t(f"c{i}", output)]
    messages.append(a("done"))
    return ctx(*messages)


def test_verbatim_outputs_give_way_to_the_facts_a_plan_landing_at_its_target_lost(counter):
    # a plan whose digest of earlier steps lands at the target has no room left for the
    # directories and packages it took out; aimed lower, a whole step more is digested and
    # the plan lands far under the target. Neither: the oldest output left verbatim is
    # compacted around a pointer by what the facts' lines need, and the plan keeps them all
    context = _one_prompt()
    wanted = _facts(context.messages)
    tokens = int(context_regions(context, counter).total)
    gave_way = 0
    for percent in range(30, 80):
        target = tokens * percent // 100
        plan = _plan(context, counter, target, max_step="summarize")
        assert plan.after.total <= target, percent
        visible = _facts(plan.context.messages)
        assert wanted <= visible, (percent, sorted(wanted - visible))
        if any("gave way to facts:" in e.detail for e in plan.edits):
            gave_way += 1
            # text gave way only as far as the facts needed: the plan lands near its target
            assert plan.after.total >= 0.9 * target, percent
    assert gave_way


def test_with_latest_turn_verbatim_no_output_of_the_latest_turn_gives_way(counter):
    context = _one_prompt()
    tokens = int(context_regions(context, counter).total)
    for percent in range(30, 80, 4):
        plan = get_strategy("ctxweb-auto").plan(
            context,
            {"target_tokens": tokens * percent // 100, "latest_turn": "verbatim"},
            counter=counter,
        )
        assert not any("gave way to facts:" in e.detail for e in plan.edits), percent
        assert plan.context.messages[1:] == context.messages[1:], percent
