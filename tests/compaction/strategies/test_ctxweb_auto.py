"""ctxweb-auto: escalation, user-turn cuts, tool-pair integrity and fact keeping."""

from __future__ import annotations

import hashlib
import json
import re

import pytest

from compaction.regions import context_regions, is_summary
from compaction.strategies import get_strategy
from compaction.strategies.base import render_message
from compaction.strategies.ctxweb_auto import DIGEST_HEADER, SUMMARY_HEADER, pointer
from compaction.turns import orphans
from tests.support.messages import a, atc, ctx, sys, t, u


def _context(turns=20, size=3000):
    messages = [sys("You are an agent.")]
    for i in range(turns):
        messages += [
            u(f"step {i}: edit src/mod{i}.py"),
            atc(f"c{i}", name="bash"),
            t(f"c{i}", f"ERROR: failure {i} in tests/test_{i}.py\n" + "z" * size),
            a(f"fixed {i}"),
        ]
    return ctx(*messages)


def test_it_stops_after_the_lossless_step_when_that_suffices(counter):
    context = _context(size=20_000)
    before = get_strategy("ctxweb-auto").plan(context, {"target_tokens": 10**7}, counter=counter)
    assert before.edits == ()
    plan = get_strategy("ctxweb-auto").plan(context, {"target_tokens": 80_000}, counter=counter)
    # externalized, and what the target leaves room for given back around the pointer
    assert {e.kind for e in plan.edits} <= {"externalize", "compact-inline"}
    assert "externalize" in {e.kind for e in plan.edits}
    assert 0.9 * 80_000 <= plan.after.total <= 80_000
    for edit in plan.edits:
        assert any(x.id == edit.artifact_id for x in plan.artifacts)


def test_it_summarizes_old_turns_keeping_facts_and_the_latest_turn(counter):
    context = _context()
    plan = get_strategy("ctxweb-auto").plan(context, {"target_tokens": 1500}, counter=counter)
    messages = plan.context.messages
    assert messages[0] == context.messages[0]
    assert messages[1].text.startswith(SUMMARY_HEADER)
    assert "src/mod0.py" in messages[1].text
    assert messages[-4:] == context.messages[-4:]
    assert orphans(messages).ok


def _reachable(plan):
    """The result's text plus every artifact the result points at."""
    text = "\n".join(
        [m.text for m in plan.context.messages]
        + [p.text for m in plan.context.messages for p in m.tool_results]
    )
    pointed = [a.content for a in plan.artifacts if pointer(a.id) in text]
    return text + "\n" + "\n".join(pointed)


def test_every_fact_of_what_it_removes_stays_reachable(counter):
    context = _context(turns=60, size=200)
    plan = get_strategy("ctxweb-auto").plan(context, {"target_tokens": 1200}, counter=counter)
    assert any(e.kind == "summarize-range" for e in plan.edits)
    reachable = _reachable(plan)
    # more paths than the summary has room for (40): the full text behind its pointer keeps them
    for i in range(60):
        assert f"src/mod{i}.py" in reachable
        assert f"ERROR: failure {i} in tests/test_{i}.py" in reachable


def test_the_summary_points_at_the_full_text_of_what_it_summarized(counter):
    context = _context(turns=10, size=200)
    plan = get_strategy("ctxweb-auto").plan(context, {"target_tokens": 700}, counter=counter)
    summary = plan.context.messages[1].text
    [full] = [a for a in plan.artifacts if a.kind == "summarized_messages"]
    assert summary.endswith(pointer(full.id))
    assert "step 0: edit src/mod0.py" in full.content
    assert full.id == hashlib.sha256(full.content.encode()).hexdigest()


def test_a_second_summary_keeps_the_pointers_of_the_first(counter):
    strategy = get_strategy("ctxweb-auto")
    first = strategy.plan(_context(turns=10, size=200), {"target_tokens": 700}, counter=counter)
    [old] = [a for a in first.artifacts if a.kind == "summarized_messages"]
    grown = ctx(*first.context.messages, *_context(turns=10, size=200).messages[1:])
    second = strategy.plan(grown, {"target_tokens": 700}, counter=counter)
    summary = second.context.messages[1].text
    [new] = [a for a in second.artifacts if a.kind == "summarized_messages"]
    assert summary.count("[EXTERNALIZED:") >= 2
    assert pointer(old.id) in summary
    assert pointer(new.id) in summary
    assert orphans(second.context.messages).ok


def _agent_turn(calls=12, size=6000):
    messages = [sys("You are an agent."), u("fix the failing tests in src/")]
    for i in range(calls):
        messages += [
            atc(f"c{i}", name="bash"),
            t(f"c{i}", f"ERROR: out {i} src/f{i}.py\n" + "y" * size),
        ]
    return ctx(*messages)


def test_with_latest_turn_verbatim_it_never_touches_the_latest_user_turn(counter):
    context = _agent_turn()
    params = {"target_tokens": 5000, "latest_turn": "verbatim"}
    plan = get_strategy("ctxweb-auto").plan(context, params, counter=counter)
    assert plan.context.messages == context.messages
    assert any("above the target" in w for w in plan.warnings)


def test_by_default_it_reaches_into_the_latest_turn_only_when_the_target_needs_it(counter):
    context = _agent_turn()
    plan = get_strategy("ctxweb-auto").plan(context, {"target_tokens": 6000}, counter=counter)
    messages = plan.context.messages
    assert plan.after.total <= 6000
    # the user's request and the last three tool calls with their outputs stay verbatim
    assert messages[:2] == context.messages[:2]
    assert messages[-6:] == context.messages[-6:]
    assert any("the target needed the latest user turn" in w for w in plan.warnings)
    assert orphans(messages).ok
    reachable = _reachable(plan)
    for i in range(12):
        assert f"ERROR: out {i} src/f{i}.py" in reachable


@pytest.mark.parametrize("fraction", [0.3, 0.6, 0.8])
def test_the_latest_turn_warning_says_what_the_finished_plan_took(counter, fraction):
    # said after what was given back: the messages changed and the tokens the turn lost
    context = _agent_turn(size=3000)
    strategy = get_strategy("ctxweb-auto")
    total = strategy.plan(context, {"target_tokens": 10**7}, counter=counter).after.total
    plan = strategy.plan(context, {"target_tokens": int(total * fraction)}, counter=counter)
    [warning] = [w for w in plan.warnings if "the target needed the latest user turn" in w]
    changed = [m for m in context.messages[1:] if m not in plan.context.messages]
    saved = sum(counter.count_message(m).total for m in context.messages[1:]) - sum(
        counter.count_message(m).total for m in plan.context.messages[1:]
    )
    assert f": {len(changed)} of its messages" in warning
    assert f"({saved} tokens)" in warning


def test_a_pointer_names_its_artifact_by_a_short_id(counter):
    context = _context(turns=10, size=3000)
    plan = get_strategy("ctxweb-auto").plan(context, {"target_tokens": 900}, counter=counter)
    text = "\n".join(render_message(m) for m in plan.context.messages)
    ids = re.findall(r"\[EXTERNALIZED:([0-9a-f]+)\]", text)
    assert ids
    for short in ids:
        # 16 hex characters, about 15 tokens fewer than the whole sha256
        assert len(short) == 16
        [named] = [x for x in plan.artifacts if x.id.startswith(short)]
        assert named.id == hashlib.sha256(named.content.encode()).hexdigest()


def test_by_default_the_latest_turn_stays_verbatim_when_older_turns_suffice(counter):
    context = ctx(*_context(turns=10, size=3000).messages, *_agent_turn().messages[1:])
    plan = get_strategy("ctxweb-auto").plan(context, {"target_tokens": 40_000}, counter=counter)
    latest = len(context.messages) - 25
    assert plan.after.total <= 40_000
    assert plan.context.messages[-25:] == context.messages[latest:]
    assert not any("latest user turn" in w for w in plan.warnings)


def test_with_latest_turn_outputs_it_externalizes_older_outputs_of_the_latest_turn(counter):
    context = _agent_turn()
    params = {"target_tokens": 6000, "latest_turn": "outputs", "keep_recent_outputs": 3}
    plan = get_strategy("ctxweb-auto").plan(context, params, counter=counter)
    messages = plan.context.messages
    assert len(messages) == len(context.messages)
    assert messages[:2] == context.messages[:2]
    assert messages[-6:] == context.messages[-6:]
    assert {e.kind for e in plan.edits} <= {"externalize", "compact-inline", "clear"}
    assert plan.after.total <= 6000
    reachable = _reachable(plan)
    for i in range(12):
        assert f"ERROR: out {i} src/f{i}.py" in reachable
    assert orphans(messages).ok


def test_the_digest_step_replaces_old_turns_one_by_one_with_pointing_digests(counter):
    context = _talkative()
    params = {"target_tokens": 4000, "max_step": "digest"}
    plan = get_strategy("ctxweb-auto").plan(context, params, counter=counter)
    digests = [m for m in plan.context.messages if m.text.startswith(DIGEST_HEADER)]
    assert 1 <= len(digests) <= 9
    assert plan.context.messages[-4:] == context.messages[-4:]
    assert orphans(plan.context.messages).ok
    first = digests[0].text
    assert "user: step 0: edit src/mod0.py" in first
    assert "tools: bash ×1" in first
    assert "ERROR: failure 0 in tests/test_0.py" in first
    assert "reply: …" in first
    assert "as follows. fixed 0" in first
    [full] = [x for x in plan.artifacts if pointer(x.id) in first]
    assert full.kind == "turn"
    assert "z" * 3000 in full.content  # the turn as it came in, before steps 1-3
    assert is_summary(digests[0])
    regions = context_regions(plan.context, counter)
    assert regions.regions.get("summary", 0) > 0


def _talkative(turns=10):
    messages = [sys("You are an agent.")]
    for i in range(turns):
        messages += [
            u(f"step {i}: edit src/mod{i}.py " + "and explain the change in detail. " * 20),
            atc(f"c{i}", name="bash"),
            t(f"c{i}", f"ERROR: failure {i} in tests/test_{i}.py\n" + "z" * 3000),
            a("I changed the module as follows. " * 40 + f"fixed {i}"),
        ]
    return ctx(*messages)


def test_a_summary_over_digests_reads_the_turns_and_holds_no_ids(counter):
    plan = get_strategy("ctxweb-auto").plan(_talkative(), {"target_tokens": 1500}, counter=counter)
    summary = plan.context.messages[1].text
    assert summary.startswith(SUMMARY_HEADER)
    body, _, trailer = summary.partition("Full text of the summarized messages:")
    assert "step 0: edit src/mod0.py" in body
    assert "digest of a user turn" not in body
    assert "[EXTERNALIZED:" not in body
    assert not re.search(r"[0-9a-f]{64}", body)
    [full] = [x for x in plan.artifacts if pointer(x.id) in trailer]
    assert "z" * 3000 in full.content  # the originals, not the digests


def test_no_summary_when_it_would_cost_more_than_it_replaces(counter):
    context = ctx(sys("s"), u("a"), a("b"), u("c"), a("d"), u("now"), a("ok"))
    plan = get_strategy("ctxweb-auto").plan(context, {"target_tokens": 1}, counter=counter)
    assert plan.context.messages == context.messages
    assert plan.after.total == plan.before.total


def test_a_turn_whose_digest_would_not_save_enough_is_left_for_the_summary(counter):
    context = ctx(sys("s"), *(m for i in range(8) for m in (u(f"hi {i}"), a(f"ok {i}"))))
    params = {"target_tokens": 20, "max_step": "digest"}
    plan = get_strategy("ctxweb-auto").plan(context, params, counter=counter)
    assert plan.context.messages == context.messages


def test_big_tool_arguments_are_externalized_as_valid_json_keeping_every_key(counter):
    content = "def f():\n    return 1\n" * 800
    args = json.dumps({"path": "src/big.py", "content": content})
    context = ctx(
        sys("s"),
        u("write it"),
        atc("w1", name="write", args=args),
        t("w1", "ok"),
        u("thanks"),
        a("done"),
    )
    plan = get_strategy("ctxweb-auto").plan(context, {"target_tokens": 500}, counter=counter)
    [call] = plan.context.messages[2].tool_calls
    data = json.loads(call.arguments)
    assert data["path"] == "src/big.py"
    assert data["content"].startswith("[EXTERNALIZED:")
    [edit] = [e for e in plan.edits if e.detail == "externalize: tool input w1"]
    [kept] = [x for x in plan.artifacts if x.id == edit.artifact_id]
    assert kept.content == content
    assert kept.kind == "tool_input"


def test_it_never_makes_a_message_bigger_or_keeps_an_artifact_it_does_not_use(counter):
    messages = [sys("s"), u("go")]
    for i in range(40):
        messages += [atc(f"c{i}", name="ls"), t(f"c{i}", f"f{i}.py")]
    messages += [u("again"), a("ok")]
    context = ctx(*messages)
    params = {"target_tokens": 200, "max_step": "prune"}
    plan = get_strategy("ctxweb-auto").plan(context, params, counter=counter)
    assert all(e.tokens_after < e.tokens_before for e in plan.edits)
    assert plan.after.total <= plan.before.total
    used = {e.artifact_id for e in plan.edits}
    assert {x.id for x in plan.artifacts} <= used


def test_the_summary_is_shortened_only_when_that_meets_the_target(counter):
    context = _context(turns=30, size=200)
    strategy = get_strategy("ctxweb-auto")
    full = strategy.plan(context, {"target_tokens": 10**7, "target_fraction": 1.0}, counter=counter)
    assert full.edits == ()
    plan = strategy.plan(context, {"target_tokens": 250}, counter=counter)
    summary = plan.context.messages[1].text
    assert plan.after.total <= 250
    # cut with a note, or to its bare form (header, facts, pointer) when the note does not fit
    assert "shortened to fit" in summary or summary.startswith(SUMMARY_HEADER + "\n")
    assert any("summary was shortened" in w for w in plan.warnings)
    [kept] = [x for x in plan.artifacts if x.kind == "summarized_messages"]
    assert summary.endswith(pointer(kept.id))
    [edit] = [e for e in plan.edits if e.kind == "insert-summary"]
    assert edit.tokens_after == counter.count_message(plan.context.messages[1]).total


def test_the_package_exports_its_public_names():
    import compaction.strategies.ctxweb_auto as package

    assert set(package.__all__) == {
        "DIGEST_HEADER",
        "STEPS",
        "SUMMARY_HEADER",
        "CtxwebAuto",
        "pointer",
    }
    assert package.STEPS == ("externalize", "compact", "prune", "digest", "summarize")
