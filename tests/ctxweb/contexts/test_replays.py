"""Replays through their services: presets, validation, the run (inline: ``CTXWEB_TASKS_INLINE``),
limits, pruning, reaping, applying a column, and the cache rule of Anthropic sessions (every real
transcript under every preset: ``test_replays_transcripts.py``)."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.db.models import F
from django.utils import timezone

from compaction.errors import StrategyError
from compaction.strategies import get_strategy
from ctxweb.contexts.models import AuditEvent, Replay, Session, Turn
from ctxweb.contexts.services import replays, session_get_or_create
from tests.support.builders import body, history
from tests.support.world import World

pytestmark = pytest.mark.django_db

#: How many turns the hand-made session has: turn i sends ``history(i + 1)``.
TURNS = 6


@pytest.fixture(autouse=True)
def inline_tasks(settings: Any) -> None:
    settings.CTXWEB_TASKS_INLINE = True


@pytest.fixture
def commit(django_capture_on_commit_callbacks: Any) -> Any:
    """Run what the block left for after commit (the replay, its events)."""

    def run(call: Any) -> Any:
        with django_capture_on_commit_callbacks(execute=True):
            return call()

    return run


def post_turn(world: World, external_id: str, messages: list[dict[str, Any]]) -> None:
    response = world.api(world.ingest_key).post(
        f"/api/v1/sessions/{external_id}/turns",
        data=json.dumps(body(messages)),
        content_type="application/json",
    )
    assert response.status_code == 201, response.content


@pytest.fixture
def session(world: World) -> Session:
    """Six turns of a growing history: each adds a read whose output is some 5,000 tokens."""
    for step in range(TURNS):
        post_turn(world, "s1", history(step + 1))
    return Session.objects.get(external_id="s1")


def recorded(session: Session) -> list[int]:
    return list(
        Turn.objects.filter(session=session)
        .order_by("index")
        .values_list("total_tokens", flat=True)
    )


# --- presets ------------------------------------------------------------------------------------


def test_every_seed_agent_has_a_preset_that_validates(session: Session) -> None:
    presets = replays.replay_presets(session=session)
    labels = [p["label"] for p in presets]
    for seed in ("BaseAgent", "picoclaw", "LLM4S", "nanobot", "CoPaw", "Codex", "OpenCode"):
        assert seed in labels
    assert any("Claude Code" in label for label in labels)
    assert [p["params"]["target_fraction"] for p in presets if p["strategy"] == "ctxweb-auto"] == [
        0.3,
        0.5,
        0.7,
    ]
    for preset in presets:
        get_strategy(preset["strategy"]).validate(preset["params"])
    checked = replays.replay_policies_validate(presets[:6])
    assert [c["label"] for c in checked] == labels[:6]


def test_preset_triggers_follow_the_session_window(session: Session) -> None:
    window = session.context_window
    presets = {p["label"]: p for p in replays.replay_presets(session=session)}
    # CoPaw compacts at int(0.75 x window) (>=), picoclaw above 75% of the window.
    assert presets["CoPaw"]["trigger"] == {"tokens": int(window * 0.75) - 1}
    assert presets["picoclaw"]["trigger"] == {"tokens": window * 75 // 100}
    assert presets["CoPaw"]["params"]["max_input_length"] == window
    assert presets["BaseAgent"]["params"]["context_limit"] == window


def test_a_preset_that_cannot_fit_the_session_is_left_out(session: Session) -> None:
    # An output reserve as large as the window: BaseAgent has nothing to plan for.
    Session.objects.filter(pk=session.pk).update(output_reserve=session.context_window)
    session.refresh_from_db()
    labels = [p["label"] for p in replays.replay_presets(session=session)]
    assert "BaseAgent" not in labels
    assert "CoPaw" in labels


# --- validation ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policies", "path"),
    [
        ([], "policies"),
        ([{"strategy": "nanobot-trim"}] * 7, "policies"),
        ("nanobot-trim", "policies"),
        ([7], "policies[0]"),
        ([{"strategy": "no-such-thing"}], "policies[0].strategy"),
        ([{}], "policies[0].strategy"),
        ([{"strategy": "nanobot-trim", "colour": "red"}], "policies[0].colour"),
        ([{"strategy": "nanobot-trim", "params": {"budget": "big"}}], "policies[0].params.budget"),
        ([{"strategy": "nanobot-trim", "params": []}], "policies[0].params"),
        (
            [
                {"strategy": "nanobot-trim"},
                {"strategy": "codex-compact", "trigger": {"fraction": 2}},
            ],
            "policies[1].trigger.fraction",
        ),
        ([{"strategy": "nanobot-trim", "trigger": {"tokens": 0}}], "policies[0].trigger.tokens"),
        (
            [{"strategy": "nanobot-trim", "trigger": {"tokens": 10**9}}],
            "policies[0].trigger.tokens",
        ),
        ([{"strategy": "nanobot-trim", "trigger": {"when": 1}}], "policies[0].trigger.when"),
        ([{"strategy": "nanobot-trim", "label": "x" * 101}], "policies[0].label"),
        ([{"strategy": "nanobot-trim", "label": 5}], "policies[0].label"),
        # Valid alone, not with the session's window (gpt-4o: 128K) that the run will take.
        (
            [
                {"strategy": "nanobot-trim"},
                {"strategy": "baseagent-compact", "params": {"output_reserve": 150_000}},
            ],
            "policies[1].params.output_reserve",
        ),
    ],
)
def test_a_bad_policy_is_refused_naming_its_field(
    session: Session, policies: Any, path: str
) -> None:
    with pytest.raises(StrategyError) as caught:
        replays.replay_create(session=session, policies=policies)
    assert caught.value.path == path
    assert not Replay.objects.exists()


def test_policies_get_a_default_trigger_and_unique_labels() -> None:
    checked = replays.replay_policies_validate(
        [
            {"strategy": "nanobot-trim", "params": {"budget": 8000}},
            {"strategy": "nanobot-trim", "label": "as recorded"},
            {"strategy": "nanobot-trim", "label": "as recorded"},
        ]
    )
    assert checked[0] == {
        "label": "nanobot-trim above 80% of usable",
        "strategy": "nanobot-trim",
        "params": {"budget": 8000},
        "trigger": {"fraction": 0.8},
    }
    assert [c["label"] for c in checked[1:]] == ["as recorded (2)", "as recorded (3)"]


def test_a_session_without_turns_cannot_be_replayed(world: World) -> None:
    empty = session_get_or_create(
        project=world.project, external_id="empty", format="openai-chat", model="gpt-4o"
    )
    with pytest.raises(replays.ReplayUnavailable) as caught:
        replays.replay_create(session=empty, policies=[{"strategy": "nanobot-trim"}])
    assert caught.value.fields() == {"session": caught.value.reason}


# --- the run ------------------------------------------------------------------------------------


def test_a_replay_reproduces_the_recording_and_compacts_where_the_trigger_says(
    session: Session, commit: Any
) -> None:
    totals = recorded(session)
    threshold = (totals[1] + totals[2]) // 2  # turn 2 is the first call above it
    first_over = next(i for i, total in enumerate(totals) if total > threshold)
    replay = commit(
        lambda: replays.replay_create(
            session=session,
            policies=[
                {
                    "label": "truncate outputs",
                    "strategy": "baseagent-middle-out",
                    "trigger": {"tokens": threshold},
                },
                {"strategy": "nanobot-trim", "trigger": {"tokens": 10**8}},
            ],
        )
    )
    replay.refresh_from_db()
    assert replay.status == "succeeded", replay.error
    assert replay.done == replay.total == TURNS * 3
    assert replay.started_at is not None
    assert replay.finished_at is not None
    as_recorded, truncated, never = replay.results
    assert [c["label"] for c in replay.results] == [
        "as recorded",
        "truncate outputs",
        never["label"],
    ]

    # As recorded: the stored totals, turn by turn, and nothing compacted.
    assert [t["total"] for t in as_recorded["turns"]] == totals
    assert as_recorded["compactions"] == []
    assert as_recorded["totals"]["input_tokens"] == sum(totals)

    # The trigger fires at the first call above it; the calls after it send less.
    compaction = truncated["compactions"][0]
    assert compaction["turn"] == first_over
    assert compaction["after"] < compaction["before"]
    sent = [t["total"] for t in truncated["turns"]]
    assert sent[: first_over + 1] == totals[: first_over + 1]
    assert all(s < r for s, r in zip(sent[first_over + 1 :], totals[first_over + 1 :], strict=True))
    assert truncated["totals"]["input_tokens"] < as_recorded["totals"]["input_tokens"]

    # A trigger never reached changes nothing.
    assert [t["total"] for t in never["turns"]] == totals
    assert never["totals"]["compactions"] == 0

    # gpt-4o is priced: the recorded calls cost something, under OpenAI's cache rule.
    assert as_recorded["totals"]["cost"] > 0
    assert as_recorded["totals"]["cache_write"] == 0


def test_a_column_that_cannot_run_fails_the_replay_saying_which(
    session: Session, commit: Any
) -> None:
    # A trigger past the engine's bound, stored behind the validation's back.
    def create() -> Replay:
        replay = replays.replay_create(session=session, policies=[{"strategy": "nanobot-trim"}])
        policies = list(replay.policies)
        policies[1] = {**policies[1], "trigger": {"tokens": 10**10}}
        Replay.objects.filter(pk=replay.pk).update(policies=policies)
        return replay

    replay = commit(create)
    replay.refresh_from_db()
    assert replay.status == "failed"
    assert replay.error.startswith("column 1 (nanobot-trim above 80% of usable):")
    assert replay.results[0] is not None  # the column before it landed
    assert replay.results[1] is None
    assert replay.finished_at is not None


def test_the_column_tasks_finish_the_replay_when_the_last_one_lands(
    session: Session, commit: Any
) -> None:
    """The production shape's fan-out, with the column tasks run here in reverse order."""
    replay = replays.replay_create(
        session=session,
        policies=[{"strategy": "nanobot-trim"}, {"strategy": "codex-compact"}],
    )
    sent: list[tuple[int, int]] = []
    replays.replay_run(replay_id=replay.pk, fan_out=lambda pk, column: sent.append((pk, column)))
    assert sent == [(replay.pk, 0), (replay.pk, 1), (replay.pk, 2)]
    for pk, column in reversed(sent):
        commit(lambda pk=pk, column=column: replays.replay_run_column(replay_id=pk, column=column))
        replay.refresh_from_db()
        expected = "succeeded" if column == 0 else "running"
        assert replay.status == expected
    # A redelivered column task finds its column stored and the replay finished.
    replays.replay_run_column(replay_id=replay.pk, column=1)
    replay.refresh_from_db()
    assert replay.status == "succeeded"
    assert replay.done == replay.total == TURNS * 3
    assert all(r is not None for r in replay.results)


def test_a_turn_posted_after_the_replay_was_asked_for_is_not_in_it(
    world: World, session: Session
) -> None:
    replay = replays.replay_create(session=session, policies=[{"strategy": "nanobot-trim"}])
    post_turn(world, "s1", history(TURNS + 1))
    replays.replay_run(replay_id=replay.pk)
    replay.refresh_from_db()
    assert replay.status == "succeeded", replay.error
    assert replay.done == replay.total == TURNS * 2
    assert [len(column["turns"]) for column in replay.results] == [TURNS, TURNS]


def test_as_recorded_keeps_what_was_stored_when_the_context_reads_back_smaller(
    session: Session, commit: Any
) -> None:
    # A context read back from the database can count fewer tokens than ingest counted
    # (PostgreSQL's jsonb reorders a tool schema's keys): the stored totals are what the calls
    # cost, and every column keeps the difference, as it keeps what the provider reported beyond.
    counted = recorded(session)
    Turn.objects.filter(session=session).update(
        counted_tokens=F("counted_tokens") + 4, total_tokens=F("total_tokens") + 4
    )
    stored = recorded(session)
    assert stored == [total + 4 for total in counted]
    replay = commit(
        lambda: replays.replay_create(
            session=session, policies=[{"strategy": "nanobot-trim", "trigger": {"tokens": 10**8}}]
        )
    )
    replay.refresh_from_db()
    as_recorded, never = replay.results
    assert [t["total"] for t in as_recorded["turns"]] == stored
    assert as_recorded["totals"]["input_tokens"] == sum(stored)
    assert [t["total"] for t in never["turns"]] == stored  # never fires: the same calls
    assert all(t["regions"]["unattributed"] >= 4 for t in as_recorded["turns"])


def test_progress_never_passes_the_total(session: Session) -> None:
    """A column redelivered after its worker died walks its turns again: ``done`` stays within
    ``total``."""
    replay = replays.replay_create(session=session, policies=[{"strategy": "nanobot-trim"}])
    replays.replay_run(replay_id=replay.pk, fan_out=lambda pk, column: None)
    Replay.objects.filter(pk=replay.pk).update(done=replay.total - 1)
    replays.replay_run_column(replay_id=replay.pk, column=0)
    replay.refresh_from_db()
    assert replay.status == "running"  # column 1 has not landed
    assert replay.done == replay.total


# --- limits, pruning, reaping ---------------------------------------------------------------------


def test_a_project_runs_a_bounded_number_of_replays_at_once(
    session: Session, settings: Any
) -> None:
    settings.CTXWEB_REPLAYS_ACTIVE_PER_PROJECT = 2
    policies = [{"strategy": "nanobot-trim"}]
    replays.replay_create(session=session, policies=policies)  # queued: nothing commits here
    replays.replay_create(session=session, policies=policies)
    with pytest.raises(replays.ReplayBusy, match="CTXWEB_REPLAYS_ACTIVE_PER_PROJECT=2"):
        replays.replay_create(session=session, policies=policies)
    assert Replay.objects.count() == 2
    Replay.objects.update(status="succeeded")
    replays.replay_create(session=session, policies=policies)
    assert Replay.objects.count() == 3


def test_a_session_past_the_turn_bound_is_not_replayed(
    session: Session, settings: Any, commit: Any
) -> None:
    settings.CTXWEB_REPLAY_MAX_TURNS = TURNS - 1
    with pytest.raises(replays.ReplayTooLong) as refused:
        replays.replay_create(session=session, policies=[{"strategy": "nanobot-trim"}])
    assert refused.value.turns == TURNS
    assert refused.value.limit == TURNS - 1
    assert refused.value.fields() == {
        "session": f"has {TURNS} turns: a replay walks at most {TURNS - 1}"
        " (CTXWEB_REPLAY_MAX_TURNS). Replay a shorter session, or ask the server's operator to"
        " raise the bound."
    }
    assert not Replay.objects.exists()
    # At the bound, the whole session is replayed.
    settings.CTXWEB_REPLAY_MAX_TURNS = TURNS
    replay = commit(
        lambda: replays.replay_create(session=session, policies=[{"strategy": "nanobot-trim"}])
    )
    replay.refresh_from_db()
    assert replay.status == "succeeded"
    assert [len(column["turns"]) for column in replay.results] == [TURNS, TURNS]


def test_a_session_keeps_its_newest_replays(session: Session, settings: Any, commit: Any) -> None:
    settings.CTXWEB_REPLAYS_KEPT = 3
    made = [
        commit(
            lambda: replays.replay_create(session=session, policies=[{"strategy": "nanobot-trim"}])
        )
        for _ in range(5)
    ]
    kept = list(Replay.objects.order_by("pk").values_list("pk", flat=True))
    assert kept == [r.pk for r in made[-3:]]


def test_a_replay_whose_worker_died_is_failed_by_the_reaper(session: Session) -> None:
    replay = replays.replay_create(session=session, policies=[{"strategy": "nanobot-trim"}])
    stale = timezone.now() - timedelta(seconds=replays.STALE_SECONDS + 5)
    Replay.objects.filter(pk=replay.pk).update(status="running", heartbeat_at=stale)
    fresh = replays.replay_create(session=session, policies=[{"strategy": "nanobot-trim"}])
    assert replays.replay_reap_stale() == []  # replay_create reaped it already
    replay.refresh_from_db()
    assert replay.status == "failed"
    assert replay.error.startswith("worker lost")
    fresh.refresh_from_db()
    assert fresh.status == "queued"
    old = timezone.now() - timedelta(seconds=replays.QUEUED_STALE_SECONDS + 5)
    Replay.objects.filter(pk=fresh.pk).update(created_at=old)
    assert replays.replay_reap_stale() == [fresh.pk]
    fresh.refresh_from_db()
    assert fresh.error.startswith("never started")


def test_a_sessions_replays_go_with_it(world: World, session: Session) -> None:
    from ctxweb.contexts.services.deletion import session_delete

    replays.replay_create(session=session, policies=[{"strategy": "nanobot-trim"}])
    post_turn(world, "kept", history(1))
    kept = Session.objects.get(external_id="kept")
    other = replays.replay_create(session=kept, policies=[{"strategy": "nanobot-trim"}])
    session_delete(session=session, actor=world.owner)
    assert list(Replay.objects.values_list("pk", flat=True)) == [other.pk]


def test_the_reaping_command_fails_stale_replays_too(session: Session) -> None:
    import io

    from django.core.management import call_command

    replay = replays.replay_create(session=session, policies=[{"strategy": "nanobot-trim"}])
    stale = timezone.now() - timedelta(seconds=replays.STALE_SECONDS + 5)
    Replay.objects.filter(pk=replay.pk).update(status="running", heartbeat_at=stale)
    out = io.StringIO()
    call_command("reap_operations", stdout=out)
    assert f"1 replay(s) marked failed: [{replay.pk}]" in out.getvalue()
    replay.refresh_from_db()
    assert replay.status == "failed"


# --- applying a column --------------------------------------------------------------------------


def test_a_column_becomes_the_sessions_automatic_policy(world: World, session: Session) -> None:
    presets = replays.replay_presets(session=session)
    auto = next(p for p in presets if p["label"] == "ctxweb-auto 30%")
    replay = replays.replay_create(session=session, policies=[auto])
    updated = replays.replay_set_session_policy(replay=replay, column=1, actor=world.owner)
    assert updated.policy["auto"]["strategy"] == "ctxweb-auto"
    assert updated.policy["auto"]["enabled"] is True
    assert updated.policy["auto"]["params"]["target_fraction"] == 0.3
    # The window and reserve stay the session's own, resolved when the policy runs.
    assert "context_window" not in updated.policy["auto"]["params"]
    assert updated.policy["trigger"] == {"fraction": 0.8}
    event = AuditEvent.objects.get(action="session.policy")
    assert event.actor == world.owner
    assert event.detail["column"] == 1

    # Column 0, as recorded: no automatic policy; the trigger stays.
    cleared = replays.replay_set_session_policy(replay=replay, column=0)
    assert cleared.policy == {"trigger": {"fraction": 0.8}}

    with pytest.raises(StrategyError) as caught:
        replays.replay_set_session_policy(replay=replay, column=2)
    assert caught.value.path == "column"


def test_a_column_becomes_the_projects_default_and_new_sessions_take_it(
    world: World, session: Session
) -> None:
    replay = replays.replay_create(
        session=session,
        policies=[
            {
                "strategy": "nanobot-trim",
                "params": {"budget": 9000},
                "trigger": {"tokens": 20_000},
            }
        ],
    )
    project = replays.replay_set_project_default(replay=replay, column=1, actor=world.owner)
    expected = {
        "auto": {"strategy": "nanobot-trim", "params": {"budget": 9000}, "enabled": True},
        "trigger": {"tokens": 20_000},
    }
    assert project.default_policy == expected
    assert AuditEvent.objects.filter(action="project.policy").count() == 1

    post_turn(world, "newcomer", history(1))
    assert Session.objects.get(external_id="newcomer").policy == expected
    assert Session.objects.get(external_id="s1").policy == {}  # existing sessions keep theirs


# --- the cache rule of Anthropic sessions -------------------------------------------------------


def anthropic_turns(world: World, external_id: str, *, marked: bool) -> Session:
    """Three calls of a growing Anthropic conversation, each ``marked`` on its last message with
    a cache breakpoint (as Claude Code sends them) or not (as its session files record them)."""
    messages: list[dict[str, Any]] = []
    for step in range(3):
        messages = [
            *messages,
            {"role": "user", "content": f"Step {step}: read file {step}. " + "word " * 1500},
            {"role": "assistant", "content": f"Read file {step}."},
        ]
        sent = [dict(m) for m in messages]
        if marked:
            last = sent[-1]
            sent[-1] = {
                "role": last["role"],
                "content": [
                    {
                        "type": "text",
                        "text": last["content"],
                        "cache_control": {"type": "ephemeral"},
                    }
                ],
            }
        request = {"model": "claude-sonnet-4-5", "max_tokens": 1024, "messages": sent}
        response = world.api(world.ingest_key).post(
            f"/api/v1/sessions/{external_id}/turns",
            data=json.dumps({"format": "anthropic-messages", "request": request}),
            content_type="application/json",
        )
        assert response.status_code == 201, response.content
    return Session.objects.get(external_id=external_id)


@pytest.mark.parametrize("marked", [True, False])
def test_anthropic_calls_read_the_cache_with_or_without_recorded_breakpoints(
    world: World, commit: Any, marked: bool
) -> None:
    """A record that kept its breakpoints is read by Anthropic's rule; one that dropped them
    (Claude Code's session files) takes a breakpoint at each request's end, as Claude Code marks
    it: each call then reads what the previous one sent, and writes the rest."""
    session = anthropic_turns(world, "a1", marked=marked)
    totals = recorded(session)
    replay = commit(
        lambda: replays.replay_create(
            session=session, policies=[{"strategy": "nanobot-trim", "trigger": {"tokens": 10**8}}]
        )
    )
    replay.refresh_from_db()
    assert replay.status == "succeeded", replay.error
    turns = replay.results[0]["turns"]
    assert [t["total"] for t in turns] == totals
    assert turns[0]["cache_read"] == 0
    assert all(t["cache_read"] > 0 for t in turns[1:])
    assert all(t["cache_read"] + t["cache_write"] + t["uncached"] == t["total"] for t in turns)
    if not marked:
        # the end of each request is its breakpoint: the previous call's whole request is read
        assert [t["cache_read"] for t in turns[1:]] == totals[:-1]
        assert all(t["uncached"] == 0 for t in turns)
