"""The replay pages: a session's replays and its form, one replay's progress, charts data and
side-by-side table, and the buttons that set a replayed policy. Replays run inline
(``CTXWEB_TASKS_INLINE``) when the creating request's transaction commits."""

from __future__ import annotations

import json
import re
from html import unescape
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from compaction.errors import StrategyError
from ctxweb.contexts.demo import coding_session
from ctxweb.contexts.models import Replay, Session
from ctxweb.contexts.services import replays
from ctxweb.front.forms import MAX_PARAMS_CHARS, MAX_TRIGGER_CHARS
from tests.support.world import World

pytestmark = pytest.mark.django_db

SESSION = "long-run"
#: A coding session whose last context (about 12K tokens) overflows a 10K window: the policies
#: compact it, the session as recorded goes over.
BODIES = coding_session(14, seed=5, target_tokens=12_000)
WINDOW = 10_000
PRESETS = ("ctxweb-auto 30%", "ctxweb-auto 50%", "BaseAgent")


@pytest.fixture
def inline(settings: Any, django_capture_on_commit_callbacks: Any) -> Any:
    """Run what a request schedules (the replay) when its transaction commits."""
    settings.CTXWEB_TASKS_INLINE = True

    def run(function: Any, *args: Any, **kwargs: Any) -> Any:
        with django_capture_on_commit_callbacks(execute=True):
            return function(*args, **kwargs)

    return run


def ingest(world: World, external_id: str = SESSION, bodies: list[dict[str, Any]] = BODIES) -> None:
    client = world.api(world.ingest_key)
    for body in bodies:
        response = client.post(
            f"/api/v1/sessions/{external_id}/turns",
            data=json.dumps({**body, "context_window": WINDOW}),
            content_type="application/json",
        )
        assert response.status_code == 201, response.content


def logged_in(world: World, user: Any) -> Client:
    return world.login(user)


def replay_now(
    world: World, inline: Any, presets: tuple[str, ...] = PRESETS, **custom: str
) -> tuple[Replay, Any]:
    """POST the form as the owner (inline tasks): the replay, and the response."""
    client = logged_in(world, world.owner)
    response = inline(
        client.post, f"/sessions/{SESSION}/replays/", {"presets": list(presets), **custom}
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    replay = Replay.objects.get()
    assert response["Location"] == f"/sessions/{SESSION}/replays/{replay.pk}/"
    return replay, response


def comparison(html: str) -> dict[str, list[str]]:
    """The side-by-side table as ``{row key: [cell text, ...]}``."""
    table = html.split('<table class="comparison">')[1].split("</table>")[0]
    rows = {}
    for key, cells in re.findall(r'<tr data-row="(\w+)">(.*?)</tr>', table, re.S):
        texts = re.findall(
            r'<td class="num[^"]*" data-column="\d+">(.*?)(?:<details|</td>)', cells, re.S
        )
        texts = [t.replace('<span class="sr-only"> (best)</span>', "") for t in texts]
        rows[key] = [unescape(re.sub(r"<[^>]+>", "", t)).strip() for t in texts]
    return rows


def best_columns(html: str, key: str) -> list[int]:
    table = html.split('<table class="comparison">')[1].split("</table>")[0]
    row = re.search(rf'<tr data-row="{key}">(.*?)</tr>', table, re.S)
    assert row is not None
    return [int(n) for n in re.findall(r'<td class="num best" data-column="(\d+)"', row.group(1))]


# --- who sees what --------------------------------------------------------------------------


def test_the_replay_pages_ask_an_anonymous_visitor_to_log_in(world: World) -> None:
    ingest(world, bodies=BODIES[:2])
    for path in (f"/sessions/{SESSION}/replays/", f"/sessions/{SESSION}/replays/1/"):
        response = Client().get(path)
        assert response.status_code == 302
        assert response["Location"].startswith("/accounts/login/")


def test_an_outsider_finds_no_replay_page(world: World, inline: Any) -> None:
    ingest(world, bodies=BODIES[:4])
    replay, _ = replay_now(world, inline, presets=("BaseAgent",))
    outsider = logged_in(world, world.outsider)
    base = f"/sessions/{SESSION}/replays/"
    assert outsider.get(base).status_code == 404
    assert outsider.post(base, {"presets": ["BaseAgent"]}).status_code == 404
    assert outsider.get(f"{base}{replay.pk}/").status_code == 404
    assert outsider.get(f"{base}{replay.pk}/?format=json").status_code == 404
    apply = outsider.post(f"{base}{replay.pk}/apply/", {"column": "1", "target": "project"})
    assert apply.status_code == 404
    assert Replay.objects.count() == 1


def test_another_sessions_replay_is_not_found(world: World, inline: Any) -> None:
    ingest(world, bodies=BODIES[:4])
    ingest(world, external_id="other", bodies=BODIES[:2])
    replay, _ = replay_now(world, inline, presets=("BaseAgent",))
    owner = logged_in(world, world.owner)
    assert owner.get(f"/sessions/other/replays/{replay.pk}/").status_code == 404
    assert owner.get(f"/sessions/{SESSION}/replays/{replay.pk + 1}/").status_code == 404
    assert owner.get(f"/sessions/{SESSION}/replays/x/").status_code == 404


def test_a_viewer_sees_the_replays_and_results_without_the_form_or_buttons(
    world: World, inline: Any
) -> None:
    ingest(world, bodies=BODIES[:6])
    replay, _ = replay_now(world, inline, presets=("BaseAgent",))
    viewer = logged_in(world, world.teammate)
    listing = viewer.get(f"/sessions/{SESSION}/replays/")
    assert listing.status_code == 200
    html = listing.content.decode()
    assert f'href="/sessions/{SESSION}/replays/{replay.pk}/"' in html
    assert "replay-form" not in html
    assert 'name="presets"' not in html
    page = viewer.get(f"/sessions/{SESSION}/replays/{replay.pk}/").content.decode()
    assert '<table class="comparison">' in page
    assert "data-apply" not in page
    assert "/apply/" not in page


def test_a_viewer_may_not_start_a_replay_nor_set_a_policy(world: World, inline: Any) -> None:
    ingest(world, bodies=BODIES[:4])
    replay, _ = replay_now(world, inline, presets=("BaseAgent",))
    viewer = logged_in(world, world.teammate)
    response = viewer.post(f"/sessions/{SESSION}/replays/", {"presets": ["BaseAgent"]})
    assert response.status_code == 403
    assert Replay.objects.count() == 1
    apply = viewer.post(
        f"/sessions/{SESSION}/replays/{replay.pk}/apply/", {"column": "1", "target": "session"}
    )
    assert apply.status_code == 403
    assert Session.objects.get(external_id=SESSION).policy == {}


def test_the_session_page_links_to_its_replays(world: World) -> None:
    ingest(world, bodies=BODIES[:2])
    html = logged_in(world, world.teammate).get(f"/sessions/{SESSION}/").content.decode()
    assert f'href="/sessions/{SESSION}/replays/"' in html


# --- the form -------------------------------------------------------------------------------


def test_an_operator_sees_every_preset_and_the_custom_row(world: World) -> None:
    ingest(world, bodies=BODIES[:3])
    html = logged_in(world, world.owner).get(f"/sessions/{SESSION}/replays/").content.decode()
    session = Session.objects.get(external_id=SESSION)
    labels = [p["label"] for p in replays.replay_presets(session=session)]
    shown = re.findall(r'<input type="checkbox" name="presets" value="([^"]+)"', html)
    assert [unescape(v) for v in shown] == labels
    assert 'id="replay-strategy"' in html
    assert '<option value="ctxweb-auto"' in html
    assert 'id="replay-params"' in html
    assert 'id="replay-trigger"' in html
    assert f"Pick up to {replays.MAX_POLICIES} policies" in html
    assert "No replays yet." in html


def test_a_session_without_turns_has_nothing_to_replay(world: World) -> None:
    Session.objects.create(
        project=world.project,
        external_id="empty",
        format="openai-chat",
        context_window=128_000,
        encoding="o200k_base",
    )
    owner = logged_in(world, world.owner)
    html = owner.get("/sessions/empty/replays/").content.decode()
    assert 'id="replay-empty"' in html
    assert 'name="presets"' not in html
    response = owner.post("/sessions/empty/replays/", {"strategy": "ctxweb-auto"})
    assert response.status_code == 400
    assert Replay.objects.count() == 0


@pytest.mark.parametrize(
    ("data", "field", "message"),
    [
        ({}, "form", "Pick at least one policy"),
        ({"strategy": "ctxweb-auto", "params": "{not json"}, "params", "must be a JSON object"),
        ({"strategy": "ctxweb-auto", "params": "[1, 2]"}, "params", "JSON object of parameter"),
        ({"strategy": "ctxweb-auto", "params": '{"x": NaN}'}, "params", "must be a JSON object"),
        ({"strategy": "ctxweb-auto", "trigger": "1.5"}, "trigger", "above 0 and at most 1"),
        ({"strategy": "ctxweb-auto", "trigger": "0"}, "trigger", "above 0 and at most 1"),
        (
            {"strategy": "ctxweb-auto", "trigger": "12.5", "trigger_kind": "tokens"},
            "trigger",
            "whole number of tokens",
        ),
        ({"params": '{"target_fraction": 0.5}'}, "strategy", "pick the strategy"),
        ({"strategy": "no-such-strategy"}, "strategy", "Select a valid choice"),
        (
            {"strategy": "ctxweb-auto", "params": '{"target_fraction": 7}'},
            "params",
            "target_fraction",
        ),
        ({"strategy": "ctxweb-auto", "params": '{"nope": 1}'}, "params", "nope"),
    ],
)
def test_the_form_shows_each_error_next_to_its_field(
    world: World, data: dict[str, str], field: str, message: str
) -> None:
    ingest(world, bodies=BODIES[:3])
    response = logged_in(world, world.owner).post(f"/sessions/{SESSION}/replays/", data)
    assert response.status_code == 400
    html = response.content.decode()
    if field == "form":
        errors = html.split('id="replay-form-errors"')[1].split("</div>")[0]
    else:
        found = re.search(rf'<p class="error" id="replay-{field}-error">(.*?)</p>', html, re.S)
        assert found is not None, html
        errors = found.group(1)
        tag = html.split(f'id="replay-{field}"')[1].split(">")[0]
        assert 'aria-invalid="true"' in tag
    assert message in unescape(errors), errors
    assert Replay.objects.count() == 0


def test_the_form_refuses_more_policies_than_the_service_takes(world: World) -> None:
    ingest(world, bodies=BODIES[:3])
    session = Session.objects.get(external_id=SESSION)
    labels = [p["label"] for p in replays.replay_presets(session=session)]
    picked = labels[: replays.MAX_POLICIES]
    client = logged_in(world, world.owner)
    response = client.post(
        f"/sessions/{SESSION}/replays/", {"presets": picked, "strategy": "ctxweb-auto"}
    )
    assert response.status_code == 400
    html = unescape(response.content.decode())
    assert (
        f"Pick at most {replays.MAX_POLICIES} policies ({replays.MAX_POLICIES + 1} picked)" in html
    )
    # what was picked stays picked
    for label in picked:
        assert f'value="{label}" checked' in html
    assert Replay.objects.count() == 0


def test_the_form_says_when_the_project_runs_its_most_replays(world: World, settings: Any) -> None:
    ingest(world, bodies=BODIES[:3])
    settings.CTXWEB_REPLAYS_ACTIVE_PER_PROJECT = 1
    session = Session.objects.get(external_id=SESSION)
    Replay.objects.create(session=session, status="running", policies=[], total=9)
    response = logged_in(world, world.owner).post(
        f"/sessions/{SESSION}/replays/", {"presets": ["BaseAgent"]}
    )
    assert response.status_code == 400
    assert "CTXWEB_REPLAYS_ACTIVE_PER_PROJECT=1" in response.content.decode()
    assert Replay.objects.count() == 1


def test_a_session_past_the_turn_bound_says_so_instead_of_the_form(
    world: World, settings: Any
) -> None:
    ingest(world, bodies=BODIES[:3])
    settings.CTXWEB_REPLAY_MAX_TURNS = 2
    owner = logged_in(world, world.owner)
    html = unescape(owner.get(f"/sessions/{SESSION}/replays/").content.decode())
    card = html.split('id="replay-too-long"')[1].split("</p>")[0]
    assert "This session has 3 turns: a replay walks at most 2" in card
    assert "CTXWEB_REPLAY_MAX_TURNS" in card
    assert 'name="presets"' not in html
    response = owner.post(f"/sessions/{SESSION}/replays/", {"presets": ["BaseAgent"]})
    assert response.status_code == 400
    assert 'id="replay-too-long"' in response.content.decode()
    # A session whose count the page had not caught up with: the service refuses, the form says it.
    Session.objects.filter(external_id=SESSION).update(turn_count=2)
    response = owner.post(f"/sessions/{SESSION}/replays/", {"presets": ["BaseAgent"]})
    assert response.status_code == 400
    errors = unescape(
        response.content.decode().split('id="replay-form-errors"')[1].split("</div>")[0]
    )
    assert "Not replayed: The session has 3 turns: a replay walks at most 2" in errors
    assert Replay.objects.count() == 0
    settings.CTXWEB_REPLAY_MAX_TURNS = 3
    Session.objects.filter(external_id=SESSION).update(turn_count=3)
    assert 'name="presets"' in owner.get(f"/sessions/{SESSION}/replays/").content.decode()


# --- a replay and its page ----------------------------------------------------------------


def test_posting_presets_and_a_custom_row_creates_the_replay_and_shows_its_table(
    world: World, inline: Any
) -> None:
    ingest(world)
    replay, response = replay_now(
        world,
        inline,
        strategy="anthropic-clear-tool-uses",
        params='{"keep": 1}',
        trigger="6000",
        trigger_kind="tokens",
    )
    replay.refresh_from_db()
    assert replay.status == "succeeded", replay.error
    session = Session.objects.get(external_id=SESSION)
    listed = [p["label"] for p in replays.replay_presets(session=session)]
    # the presets in their listed order, then the custom row
    assert [p["label"] for p in replay.policies[1:-1]] == [x for x in listed if x in PRESETS]
    custom = replay.policies[-1]
    assert custom["strategy"] == "anthropic-clear-tool-uses"
    assert custom["params"] == {"keep": 1}
    assert custom["trigger"] == {"tokens": 6000}
    assert replay.created_by == world.owner

    html = logged_in(world, world.owner).get(response["Location"]).content.decode()
    rows = comparison(html)
    results = replay.results
    assert len(rows["input_tokens"]) == len(replay.policies) == 1 + len(PRESETS) + 1
    assert rows["input_tokens"] == [f"{r['totals']['input_tokens']:,}" for r in results]
    assert rows["cache_read"] == [f"{r['totals']['cache_read']:,}" for r in results]
    assert rows["cache_write"] == [f"{r['totals']['cache_write']:,}" for r in results]
    assert rows["compactions"] == [f"{r['totals']['compactions']:,}" for r in results]
    assert rows["turns_over_window"] == [f"{r['totals']['turns_over_window']:,}" for r in results]
    assert rows["peak_fill"] == [f"{r['totals']['peak_fill']:.1%}" for r in results]
    assert rows["facts_lost"] == [f"{r['totals']['facts_lost']:,}" for r in results]
    assert rows["cost"] == [
        "—" if r["totals"]["cost"] is None else f"${r['totals']['cost']:.4f}" for r in results
    ]
    # the best of each row is the lowest (the highest for cache reads), where they differ
    inputs = [r["totals"]["input_tokens"] for r in results]
    assert len(set(inputs)) > 1
    assert best_columns(html, "input_tokens") == [
        i for i, v in enumerate(inputs) if v == min(inputs)
    ]
    reads = [r["totals"]["cache_read"] for r in results]
    if len(set(reads)) > 1:
        assert best_columns(html, "cache_read") == [
            i for i, v in enumerate(reads) if v == max(reads)
        ]
    # "as recorded" first, each policy's label as its column's head
    heads = re.findall(r'<th scope="col" class="num policy-head[^"]*">([^<]+)', html)
    assert [unescape(h) for h in heads] == [p["label"] for p in replay.policies]
    assert heads[0] == "as recorded"


def test_the_page_hands_every_columns_turns_to_the_charts(world: World, inline: Any) -> None:
    ingest(world)
    replay, response = replay_now(world, inline, presets=("ctxweb-auto 30%",))
    replay.refresh_from_db()
    html = logged_in(world, world.owner).get(response["Location"]).content.decode()
    data = json.loads(
        unescape(
            html.split('<script id="replay-data" type="application/json">')[1].split("</script>")[0]
        )
    )
    assert [c["position"] for c in data["columns"]] == [0, 1]
    for column, result in zip(data["columns"], replay.results, strict=True):
        assert [t["total"] for t in column["turns"]] == [t["total"] for t in result["turns"]]
        assert [t["over"] for t in column["turns"]] == [t["over_window"] for t in result["turns"]]
        assert [c["turn"] for c in column["compactions"]] == [
            c["turn"] for c in result["compactions"]
        ]
        assert column["window"] == result["turns"][-1]["window"]
        assert column["usable"] == result["turns"][-1]["usable"]
    recorded, auto = data["columns"]
    assert recorded["trigger"] == int(0.8 * recorded["usable"])
    assert auto["trigger"] == int(replay.policies[1]["trigger"]["fraction"] * auto["usable"])
    # the session as recorded overflows the window; ctxweb-auto compacts
    assert any(t["over"] for t in recorded["turns"])
    assert auto["compactions"]
    assert html.count('<figure class="replay-chart"') == 2


def test_the_json_branch_gives_the_replays_progress(world: World, inline: Any) -> None:
    ingest(world, bodies=BODIES[:5])
    replay, response = replay_now(world, inline, presets=("BaseAgent",))
    replay.refresh_from_db()
    client = logged_in(world, world.teammate)
    with CaptureQueriesContext(connection) as queries:
        data = client.get(f"{response['Location']}?format=json").json()
    # a poll reads the progress, never the results (megabytes for a long session)
    assert not [q["sql"] for q in queries if '"contexts_replay"."results"' in q["sql"]]
    assert data["id"] == replay.pk
    assert data["status"] == "succeeded"
    assert data["done"] == data["total"] == replay.total == 2 * 5
    assert "results" not in data


def test_a_running_replay_shows_its_progress(world: World) -> None:
    ingest(world, bodies=BODIES[:3])
    session = Session.objects.get(external_id=SESSION)
    replay = Replay.objects.create(
        session=session,
        status="running",
        policies=[dict(replays.AS_RECORDED), {"label": "x", "strategy": "ctxweb-auto"}],
        results=[None, None],
        done=4,
        total=6,
    )
    client = logged_in(world, world.teammate)
    page = client.get(f"/sessions/{SESSION}/replays/{replay.pk}/").content.decode()
    assert re.search(
        r'<progress class="replay-progress big" data-replay-progress max="6" value="4"', page
    )
    assert "4 of 6</span> turns replayed" in page
    assert f'data-replay-url="/sessions/{SESSION}/replays/{replay.pk}/?format=json"' in page
    assert '<table class="comparison">' not in page
    listing = client.get(f"/sessions/{SESSION}/replays/").content.decode()
    assert re.search(
        r'<progress class="replay-progress" data-replay-progress max="6" value="4"', listing
    )
    follow = json.loads(
        listing.split('id="replay-follow" type="application/json">')[1].split("<")[0]
    )
    assert follow == [
        {"id": replay.pk, "url": f"/sessions/{SESSION}/replays/{replay.pk}/?format=json"}
    ]


def test_a_failed_replay_shows_its_error_escaped(world: World) -> None:
    ingest(world, bodies=BODIES[:3])
    session = Session.objects.get(external_id=SESSION)
    replay = Replay.objects.create(
        session=session,
        status="failed",
        policies=[dict(replays.AS_RECORDED), {"label": "x", "strategy": "ctxweb-auto"}],
        results=[None, None],
        error="column 1 (x): <script>alert(1)</script> broke",
    )
    page = logged_in(world, world.owner).get(f"/sessions/{SESSION}/replays/{replay.pk}/")
    html = page.content.decode()
    error = html.split('id="replay-error"')[1].split("</div>")[0]
    assert "The replay failed." in error
    assert "&lt;script&gt;alert(1)&lt;/script&gt; broke" in error
    assert "<script>alert" not in html
    assert "No policy finished" in html


def test_labels_and_facts_are_escaped(world: World, inline: Any) -> None:
    ingest(world, bodies=BODIES[:4])
    client = logged_in(world, world.owner)
    response = inline(
        client.post,
        f"/sessions/{SESSION}/replays/",
        {"strategy": "ctxweb-auto", "params": '{"target_fraction": 0.3}'},
    )
    replay = Replay.objects.get()
    replay.policies[1]["label"] = "<img src=x onerror=alert(1)>"
    replay.save()
    html = client.get(response["Location"]).content.decode()
    assert "<img src=x" not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html


# --- setting a replayed policy ---------------------------------------------------------------


def test_use_for_this_session_sets_the_columns_policy(world: World, inline: Any) -> None:
    ingest(world, bodies=BODIES[:6])
    replay, response = replay_now(world, inline, presets=("BaseAgent", "ctxweb-auto 50%"))
    client = logged_in(world, world.owner)
    page = client.get(response["Location"]).content.decode()
    assert page.count('data-apply="session"') == len(replay.policies)
    done = client.post(
        f"/sessions/{SESSION}/replays/{replay.pk}/apply/",
        {"column": "2", "target": "session"},
        follow=True,
    )
    assert done.redirect_chain[-1][0] == f"/sessions/{SESSION}/replays/{replay.pk}/"
    chosen = replay.policies[2]
    session = Session.objects.get(external_id=SESSION)
    assert session.policy["auto"]["strategy"] == chosen["strategy"] == "ctxweb-auto"
    assert session.policy["auto"]["params"]["target_fraction"] == 0.5
    assert session.policy["trigger"] == chosen["trigger"]
    html = done.content.decode()
    assert f"This session's automatic policy is now {chosen['label']}." in unescape(html)


def test_make_project_default_sets_the_projects_default_policy(world: World, inline: Any) -> None:
    ingest(world, bodies=BODIES[:6])
    replay, _ = replay_now(world, inline, presets=("BaseAgent",))
    client = logged_in(world, world.owner)
    done = client.post(
        f"/sessions/{SESSION}/replays/{replay.pk}/apply/",
        {"column": "1", "target": "project"},
        follow=True,
    )
    world.project.refresh_from_db()
    assert world.project.default_policy["auto"]["strategy"] == "baseagent-compact"
    assert world.project.default_policy["trigger"] == replay.policies[1]["trigger"]
    assert Session.objects.get(external_id=SESSION).policy == {}
    assert "The project&#x27;s default policy for new sessions is now BaseAgent." in (
        done.content.decode()
    )


@pytest.mark.parametrize(
    "data",
    [
        {"column": "9", "target": "project"},
        {"column": "-1", "target": "project"},
        {"column": "1", "target": "everything"},
        {"column": "", "target": "session"},
    ],
)
def test_a_bad_apply_changes_nothing(world: World, inline: Any, data: dict[str, str]) -> None:
    ingest(world, bodies=BODIES[:4])
    replay, _ = replay_now(world, inline, presets=("BaseAgent",))
    client = logged_in(world, world.owner)
    done = client.post(f"/sessions/{SESSION}/replays/{replay.pk}/apply/", data, follow=True)
    assert "Not set: pick a replayed policy" in done.content.decode()
    world.project.refresh_from_db()
    assert world.project.default_policy == {}
    assert Session.objects.get(external_id=SESSION).policy == {}


def test_apply_answers_post_only(world: World, inline: Any) -> None:
    ingest(world, bodies=BODIES[:4])
    replay, _ = replay_now(world, inline, presets=("BaseAgent",))
    response = logged_in(world, world.owner).get(f"/sessions/{SESSION}/replays/{replay.pk}/apply/")
    assert response.status_code == 405


@pytest.mark.parametrize(
    ("field", "limit"), [("params", MAX_PARAMS_CHARS), ("trigger", MAX_TRIGGER_CHARS)]
)
def test_the_custom_row_is_read_up_to_its_bound(world: World, field: str, limit: int) -> None:
    ingest(world, bodies=BODIES[:3])
    client = logged_in(world, world.owner)

    def post(size: int) -> tuple[int, str]:
        if field == "params":  # a JSON object of exactly ``size`` characters
            value = json.dumps({"keep_recent_outputs": ""})
            value = json.dumps({"keep_recent_outputs": "9" * (size - len(value))})
        else:
            value = "0." + "5" * (size - 2)
        assert len(value) == size
        response = client.post(
            f"/sessions/{SESSION}/replays/", {"strategy": "ctxweb-auto", field: value}
        )
        html = unescape(response.content.decode())
        found = re.search(rf'<p class="error" id="replay-{field}-error">(.*?)</p>', html, re.S)
        return response.status_code, found.group(1) if found else ""

    status, error = post(limit)
    if field == "params":  # read whole, and refused by the strategy: a string, not a number
        assert status == 400
        assert "keep_recent_outputs" in error
    else:
        assert (status, error) == (302, "")
        assert Replay.objects.get().policies[1]["trigger"] == {"fraction": float("0." + "5" * 22)}
    status, error = post(limit + 1)
    assert status == 400
    assert error == f"Ensure this value has at most {limit} characters (it has {limit + 1})."


def test_a_window_no_larger_than_its_reserve_still_offers_the_custom_row(
    world: World, inline: Any
) -> None:
    # The bodies ask for 4,096 output tokens: a window of 4,096 leaves nothing usable.
    client = world.api(world.ingest_key)
    for body in BODIES[:3]:
        response = client.post(
            f"/api/v1/sessions/{SESSION}/turns",
            data=json.dumps({**body, "context_window": 4_096}),
            content_type="application/json",
        )
        assert response.status_code == 201
    session = Session.objects.get(external_id=SESSION)
    assert session.context_window <= session.output_reserve
    owner = logged_in(world, world.owner)
    html = owner.get(f"/sessions/{SESSION}/replays/").content.decode()
    assert 'id="replay-strategy"' in html
    why = ""
    try:
        labels = [p["label"] for p in replays.replay_presets(session=session)]
    except StrategyError as problem:
        labels, why = [], f"{problem.path} {problem.reason}"
    if why:  # the presets cannot be made for this window: the form says why
        shown = html.split('id="presets-unavailable">')[1].split("</p>")[0]
        assert why in unescape(shown)
    else:
        assert 'id="presets-unavailable"' not in html
    shown_labels = re.findall(r'<input type="checkbox" name="presets" value="([^"]+)"', html)
    assert [unescape(v) for v in shown_labels] == labels
    response = inline(owner.post, f"/sessions/{SESSION}/replays/", {"strategy": "nanobot-trim"})
    assert response.status_code == 302
    assert Replay.objects.get().status in ("succeeded", "failed")
