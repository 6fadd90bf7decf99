"""Strategies, previews and artifact downloads through the REST API."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest
from django.apps import apps
from django.core.files.uploadedfile import SimpleUploadedFile

from compaction.strategies import STRATEGIES, list_strategies
from ctxweb.contexts.models import Artifact, Session, Turn
from ctxweb.contexts.services import planning
from tests.support.world import World

pytestmark = pytest.mark.django_db


SYSTEM = {"role": "system", "content": "You are a careful coding agent."}
ASK = {"role": "user", "content": "Read the log and fix the failing test."}


def call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": arguments},
            }
        ],
    }


def result(call_id: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


HISTORY = [
    SYSTEM,
    ASK,
    call("c1", "read_file", '{"path": "logs/test.log"}'),
    result("c1", "FAILED tests/test_app.py::test_total - AssertionError\n" * 80),
    call("c2", "read_file", '{"path": "src/app.py"}'),
    result("c2", "def total(items):\n    return sum(i.amount for i in items)\n" * 60),
    {"role": "assistant", "content": "The total ignores discounts; fixing it."},
    {"role": "user", "content": "Go ahead."},
]


def chat(*messages: dict[str, Any]) -> dict[str, Any]:
    return {"model": "gpt-4o", "messages": list(messages)}


def post(client: Any, path: str, body: Any) -> Any:
    return client.post(path, data=json.dumps(body), content_type="application/json")


def ingest(world: World, external_id: str = "s1") -> None:
    client = world.api(world.ingest_key)
    for end in (2, 4, len(HISTORY)):
        response = post(
            client,
            f"/api/v1/sessions/{external_id}/turns",
            {"format": "openai-chat", "request": chat(*HISTORY[:end])},
        )
        assert response.status_code == 201, response.content


def row_counts() -> dict[str, int]:
    return {model._meta.label: model._default_manager.count() for model in apps.get_models()}


@functools.cache
def _largest_request(path: Path) -> str:
    bodies = []
    for line in path.read_text(encoding="utf-8").splitlines():
        body = json.loads(line).get("request", {}).get("body")
        if isinstance(body, dict) and "messages" in body:
            bodies.append(json.dumps(body))
    return max(bodies, key=len)


@pytest.fixture
def largest_request(transcripts: Path) -> dict[str, Any]:
    """The largest Anthropic request body Claude Code sent in the recorded traffic."""
    body: dict[str, Any] = json.loads(
        _largest_request(transcripts / "anthropic-messages" / "claude-trace-traffic.jsonl")
    )
    return body


# --- GET strategies ---------------------------------------------------------------------------


def test_it_lists_every_registered_strategy_with_its_parameters(world: World) -> None:
    response = world.api(world.ingest_key).get("/api/v1/strategies")
    assert response.status_code == 200
    body = response.json()
    assert [s["id"] for s in body] == [s.id for s in list_strategies()]
    for entry in body:
        assert entry["description"]
        assert entry["source"]
        strategy = STRATEGIES[entry["id"]]
        assert [p["name"] for p in entry["params"]] == [p.name for p in strategy.params]
        for param in entry["params"]:
            assert set(param) >= {"name", "type", "default", "min", "max", "choices", "help"}
    clear = next(s for s in body if s["id"] == "anthropic-clear-tool-uses")
    keep = next(p for p in clear["params"] if p["name"] == "keep")
    assert (keep["type"], keep["default"], keep["min"]) == ("int", 3, 0)


def test_the_strategy_list_needs_credentials(client: Any) -> None:
    assert client.get("/api/v1/strategies").status_code in (401, 403)


def test_a_dashboard_login_lists_the_strategies_too(world: World) -> None:
    assert world.login(world.teammate).get("/api/v1/strategies").status_code == 200


# --- POST preview -----------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_every_strategy_previews_the_largest_real_request(
    world: World, largest_request: dict[str, Any], strategy: str
) -> None:
    response = post(
        world.api(world.ingest_key),
        "/api/v1/preview",
        {"format": "anthropic-messages", "request": largest_request, "strategy": strategy},
    )
    assert response.status_code == 200, response.content
    plan = response.json()
    assert plan["strategy"] == strategy
    assert plan["params"] == STRATEGIES[strategy].defaults() | {
        k: v for k, v in plan["params"].items() if isinstance(v, list)
    }
    assert plan["context"]["format"] == "anthropic-messages"
    assert isinstance(plan["context"]["request"]["messages"], list)
    for side in ("before", "after"):
        assert sum(plan[side]["regions"].values()) == plan[side]["total"]
    assert plan["before"]["total"] > 10_000
    assert plan["tokens_saved"] == plan["before"]["total"] - plan["after"]["total"]
    assert plan["after"]["total"] <= plan["before"]["total"] or plan["warnings"]
    for edit in plan["edits"]:
        assert set(edit) == {
            "kind",
            "message_index",
            "part_index",
            "tokens_before",
            "tokens_after",
            "tokens_saved",
            "detail",
            "artifact_id",
        }
        assert edit["tokens_saved"] == edit["tokens_before"] - edit["tokens_after"]
    artifact_ids = {a["id"] for a in plan["artifacts"]}
    for artifact in plan["artifacts"]:
        assert set(artifact) == {"id", "kind", "size", "tokens", "summary"}  # no content
    assert {e["artifact_id"] for e in plan["edits"] if e["artifact_id"]} <= artifact_ids
    assert all(isinstance(w, str) for w in plan["warnings"])


def test_a_preview_that_cuts_the_real_request_reports_what_it_removed(
    world: World, largest_request: dict[str, Any]
) -> None:
    plan = post(
        world.api(world.ingest_key),
        "/api/v1/preview",
        {"format": "anthropic-messages", "request": largest_request, "strategy": "codex-compact"},
    ).json()
    assert plan["tokens_saved"] > 0
    assert plan["edits"]
    assert plan["artifacts"]
    assert plan["after"]["regions"]["summary"] > 0
    assert len(plan["context"]["request"]["messages"]) < len(largest_request["messages"])


def test_a_preview_stores_nothing(world: World, largest_request: dict[str, Any]) -> None:
    client = world.api(world.operator_key)
    before = row_counts()
    for strategy in ("codex-compact", "picoclaw-force-compress", "ctxweb-auto"):
        response = post(
            client,
            "/api/v1/preview",
            {
                "format": "anthropic-messages",
                "request": largest_request,
                "strategy": strategy,
                "params": {"target_tokens": 2000} if strategy == "ctxweb-auto" else {},
            },
        )
        assert response.status_code == 200, response.content
        assert response.json()["artifacts"]
    assert row_counts() == before
    assert Artifact.objects.count() == 0


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"keep": -1}, "params.keep"),
        ({"keep": "three"}, "params.keep"),
        ({"trigger": 1.5}, "params.trigger"),
        ({"exclude_tools": "bash"}, "params.exclude_tools"),
        ({"bogus": 1}, "params.bogus"),
    ],
)
def test_an_invalid_parameter_is_a_400_naming_it(
    world: World, params: dict[str, Any], field: str
) -> None:
    response = post(
        world.api(world.ingest_key),
        "/api/v1/preview",
        {
            "format": "openai-chat",
            "request": chat(*HISTORY),
            "strategy": "anthropic-clear-tool-uses",
            "params": params,
        },
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid"
    assert field in error["fields"]


def test_an_unknown_strategy_is_a_400_naming_strategy(world: World) -> None:
    response = post(
        world.api(world.ingest_key),
        "/api/v1/preview",
        {"format": "openai-chat", "request": chat(*HISTORY), "strategy": "make-it-small"},
    )
    assert response.status_code == 400
    assert "strategy" in response.json()["error"]["fields"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"format": "openai-chat", "request": {"messages": []}}, "strategy"),
        ({"format": "xml", "request": {}, "strategy": "nanobot-trim"}, "format"),
        ({"format": "openai-chat", "request": [], "strategy": "nanobot-trim"}, "request"),
        (
            {
                "format": "openai-chat",
                "request": {"messages": [{"role": 7, "content": "hi"}]},
                "strategy": "nanobot-trim",
            },
            "messages.0.role",
        ),
        (
            {"format": "openai-chat", "request": chat(ASK), "strategy": "x", "params": [1]},
            "params",
        ),
    ],
)
def test_a_malformed_preview_body_is_a_400_naming_the_field(
    world: World, body: dict[str, Any], field: str
) -> None:
    response = post(world.api(world.ingest_key), "/api/v1/preview", body)
    assert response.status_code == 400, response.content
    assert field in response.json()["error"]["fields"]


def test_a_body_that_is_not_an_object_is_a_400(world: World) -> None:
    response = post(world.api(world.ingest_key), "/api/v1/preview", [1, 2])
    assert response.status_code == 400
    assert response.json()["error"]["fields"] == {"request": "expected an object"}


# --- POST sessions/{id}/preview ---------------------------------------------------------------


def test_a_session_preview_plans_on_the_latest_turn(world: World) -> None:
    ingest(world)
    response = post(
        world.api(world.ingest_key),
        "/api/v1/sessions/s1/preview",
        {"strategy": "anthropic-clear-tool-uses", "params": {"trigger": 0, "keep": 0}},
    )
    assert response.status_code == 200, response.content
    plan = response.json()
    latest = Turn.objects.get(session__external_id="s1", index=2)
    assert plan["session"] == "s1"
    assert plan["turn"] is None
    assert plan["encoding"] == "o200k_base"
    assert plan["before"]["total"] == latest.counted_tokens
    assert plan["before"]["regions"]["tool_results"] == latest.regions["tool_results"]
    assert [e["kind"] for e in plan["edits"]] == ["clear", "clear"]
    assert [e["message_index"] for e in plan["edits"]] == [3, 5]
    assert plan["after"]["regions"]["tool_results"] < plan["before"]["regions"]["tool_results"]
    assert plan["tokens_saved"] > 0
    assert plan["regions_saved"]["tool_results"] > 0


def test_a_session_preview_can_name_a_turn(world: World) -> None:
    ingest(world)
    response = post(
        world.api(world.ingest_key),
        "/api/v1/sessions/s1/preview",
        {"strategy": "baseagent-prune", "turn": 0},
    )
    assert response.status_code == 200, response.content
    plan = response.json()
    assert plan["turn"] == 0
    assert plan["before"]["total"] == Turn.objects.get(index=0).counted_tokens
    assert plan["edits"] == []


def test_a_session_preview_of_a_missing_turn_is_a_400_naming_turn(world: World) -> None:
    ingest(world)
    response = post(
        world.api(world.ingest_key),
        "/api/v1/sessions/s1/preview",
        {"strategy": "baseagent-prune", "turn": 7},
    )
    assert response.status_code == 400
    assert "turn" in response.json()["error"]["fields"]


def test_a_session_without_turns_has_nothing_to_preview(world: World) -> None:
    Session.objects.create(
        project=world.project,
        external_id="empty",
        format="openai-chat",
        context_window=128_000,
        encoding="o200k_base",
    )
    response = post(
        world.api(world.ingest_key), "/api/v1/sessions/empty/preview", {"strategy": "nanobot-trim"}
    )
    assert response.status_code == 400
    assert "turn" in response.json()["error"]["fields"]


def test_a_session_preview_validates_its_parameters(world: World) -> None:
    ingest(world)
    response = post(
        world.api(world.ingest_key),
        "/api/v1/sessions/s1/preview",
        {"strategy": "nanobot-trim", "params": {"estimator": "guess"}},
    )
    assert response.status_code == 400
    assert "params.estimator" in response.json()["error"]["fields"]


def test_a_session_preview_stores_nothing(world: World) -> None:
    ingest(world)
    before = row_counts()
    response = post(
        world.login(world.owner),
        "/api/v1/sessions/s1/preview",
        {"strategy": "ctxweb-auto", "params": {"target_tokens": 200}},
    )
    assert response.status_code == 200, response.content
    assert response.json()["artifacts"]
    after = row_counts()
    after.pop("sessions.Session", None)  # the login's own django_session row
    before.pop("sessions.Session", None)
    assert after == before


def test_a_viewer_may_preview(world: World) -> None:
    ingest(world)
    response = post(
        world.login(world.teammate), "/api/v1/sessions/s1/preview", {"strategy": "nanobot-trim"}
    )
    assert response.status_code == 200


def test_an_outsider_cannot_preview_another_projects_session(world: World) -> None:
    ingest(world)
    body = {"strategy": "nanobot-trim"}
    by_key = post(world.api(world.outsider_key), "/api/v1/sessions/s1/preview", body)
    by_login = post(world.login(world.outsider), "/api/v1/sessions/s1/preview", body)
    assert by_key.status_code == 404
    assert by_login.status_code == 404
    assert by_key.json()["error"]["code"] == "not_found"


# --- GET artifacts/{id} -----------------------------------------------------------------------


def make_artifact(world: World, content: str = "line one\n<b>two</b>\n") -> Artifact:
    from compaction.strategies import make_artifact as build

    kept = build("tool_result", content, tokens=7, summary="a tool output")
    return Artifact.objects.create(
        project=world.project,
        key=kept.id,
        kind=kept.kind,
        content=kept.content,
        size=kept.size,
        tokens=kept.tokens,
        summary=kept.summary,
    )


def test_an_artifact_downloads_as_plain_text(world: World) -> None:
    artifact = make_artifact(world, "naïve <script>alert(1)</script>\n")
    response = world.api(world.ingest_key).get(f"/api/v1/artifacts/{artifact.key}")
    assert response.status_code == 200
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert response["X-Content-Type-Options"] == "nosniff"
    disposition = response["Content-Disposition"]
    assert disposition.startswith("attachment;")
    assert f"artifact-{artifact.key[:16]}.txt" in disposition
    assert response.content.decode("utf-8") == "naïve <script>alert(1)</script>\n"


def test_an_artifact_is_found_by_its_row_id_too(world: World) -> None:
    artifact = make_artifact(world)
    response = world.login(world.teammate).get(f"/api/v1/artifacts/{artifact.pk}")
    assert response.status_code == 200
    assert response.content == artifact.content.encode()


def test_a_client_asking_for_text_gets_the_artifact(world: World) -> None:
    artifact = make_artifact(world)
    response = world.api(world.ingest_key).get(
        f"/api/v1/artifacts/{artifact.key}", HTTP_ACCEPT="text/plain"
    )
    assert response.status_code == 200
    assert response.content == artifact.content.encode()


def test_an_artifact_is_found_by_a_short_id_as_ctxweb_auto_points_at_it(world: World) -> None:
    artifact = make_artifact(world)
    client = world.api(world.ingest_key)
    for short in (artifact.key[:16], artifact.key[:12]):
        response = client.get(f"/api/v1/artifacts/{short}")
        assert response.status_code == 200, short
        assert response.content == artifact.content.encode()
    assert client.get(f"/api/v1/artifacts/{artifact.key[:11]}").status_code == 404
    outsider = world.api(world.outsider_key).get(f"/api/v1/artifacts/{artifact.key[:16]}")
    assert outsider.status_code == 404


def test_a_short_id_that_names_two_artifacts_is_a_clear_conflict(world: World) -> None:
    first = make_artifact(world)
    twin = first.key[:16] + "0" * 48  # another content whose id starts the same
    Artifact.objects.create(project=world.project, key=twin, kind="t", content="other", size=5)
    response = world.api(world.ingest_key).get(f"/api/v1/artifacts/{first.key[:16]}")
    assert response.status_code == 409
    message = response.json()["error"]["message"]
    assert "ambiguous" in message
    assert first.key in message
    assert twin in message
    # a longer prefix tells them apart
    longer = world.api(world.ingest_key).get(f"/api/v1/artifacts/{first.key[:20]}")
    assert longer.status_code == 200
    assert longer.content == first.content.encode()


def test_another_projects_artifact_is_not_found(world: World) -> None:
    artifact = make_artifact(world)
    for client in (world.api(world.outsider_key), world.login(world.outsider)):
        for ident in (artifact.key, str(artifact.pk)):
            response = client.get(f"/api/v1/artifacts/{ident}")
            assert response.status_code == 404
            assert response.json()["error"]["code"] == "not_found"


def test_an_unknown_artifact_is_not_found(world: World) -> None:
    response = world.api(world.ingest_key).get("/api/v1/artifacts/" + "0" * 64)
    assert response.status_code == 404


def test_an_artifact_needs_credentials(world: World, client: Any) -> None:
    artifact = make_artifact(world)
    assert client.get(f"/api/v1/artifacts/{artifact.key}").status_code in (401, 403)


# --- the planning service and the schema ------------------------------------------------------


def test_plan_to_json_keeps_the_contract_shape() -> None:
    from compaction.messages import parse

    context = parse("openai-chat", chat(*HISTORY))
    plan = planning.plan_for_context(
        context=context,
        strategy="anthropic-clear-tool-uses",
        params={"trigger": 0, "keep": 1, "exclude_tools": ["bash"]},
        encoding="o200k_base",
    )
    data = planning.plan_to_json(plan)
    assert set(data) >= {
        "strategy",
        "params",
        "context",
        "before",
        "after",
        "tokens_saved",
        "edits",
        "warnings",
        "artifacts",
    }
    assert data["params"]["exclude_tools"] == ["bash"]
    assert json.loads(json.dumps(data)) == data
    assert [e["message_index"] for e in data["edits"]] == [3]
    assert planning.edit_excerpt(context, plan.edits[0]).startswith("FAILED tests/test_app.py")
    assert planning.edit_role(context, plan.edits[0]) == "tool"


def test_session_defaults_take_the_sessions_window(world: World) -> None:
    ingest(world)
    session = Session.objects.get(external_id="s1")
    defaults = planning.session_defaults(session=session, strategy="picoclaw-summarize")
    assert defaults["context_window"] == session.context_window == 128_000
    assert defaults["keep_messages"] == 4


def test_the_schema_documents_the_preview_endpoints(world: World) -> None:
    response = world.login(world.owner).get("/api/schema/", HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    paths = json.loads(response.content)["paths"]
    for path in (
        "/api/v1/strategies",
        "/api/v1/preview",
        "/api/v1/sessions/{external_id}/preview",
        "/api/v1/artifacts/{artifact_id}",
    ):
        assert path in paths


def test_every_strategy_previews_a_real_imported_session(world: World, transcripts: Path) -> None:
    """The issue's 'done when': a real transcript imported through the API, then a preview of
    each strategy on it through the API, each plan readable (edits, regions, artifacts)."""
    data = (transcripts / "codex" / "agentcmd-rollout-0924-2012.jsonl").read_bytes()
    client = world.api(world.ingest_key)
    imported = client.post(
        "/api/v1/import",
        {"file": SimpleUploadedFile("rollout.jsonl", data), "prefix": "real/"},
        format="multipart",
    )
    assert imported.status_code in (200, 201), imported.content
    [session] = imported.json()["sessions"]
    external_id = session["external_id"]
    latest = Turn.objects.filter(session__external_id=external_id).order_by("-index").first()
    assert latest is not None
    changed = []
    for strategy in list_strategies():
        params = (
            {"target_tokens": latest.counted_tokens // 2} if strategy.id == "ctxweb-auto" else {}
        )
        response = post(
            client,
            f"/api/v1/sessions/{external_id}/preview",
            {"strategy": strategy.id, "params": params},
        )
        assert response.status_code == 200, (strategy.id, response.content)
        plan = response.json()
        assert plan["session"] == external_id
        assert plan["before"]["total"] == latest.counted_tokens
        for side in ("before", "after"):
            assert sum(plan[side]["regions"].values()) == plan[side]["total"]
        for edit in plan["edits"]:
            assert edit["detail"]
            assert edit["tokens_saved"] == edit["tokens_before"] - edit["tokens_after"]
        assert {e["artifact_id"] for e in plan["edits"] if e["artifact_id"]} <= {
            a["id"] for a in plan["artifacts"]
        }
        if plan["edits"]:
            changed.append(strategy.id)
    assert Artifact.objects.count() == 0  # previews store nothing
    # at its defaults or its target, ctxweb-auto acts on this session, as do most seeds
    assert "ctxweb-auto" in changed
    assert len(changed) >= 6, changed


def test_every_preview_gives_the_prompt_cache_numbers_at_the_models_prices(world: World) -> None:
    ingest(world)
    session = post(
        world.api(world.ingest_key),
        "/api/v1/sessions/s1/preview",
        {"strategy": "anthropic-clear-tool-uses", "params": {"trigger": 0, "keep": 0}},
    ).json()
    cache = session["cache"]
    # the first edit is message 3: the system prompt, the request and the first call stay
    assert cache["prefix_messages"] == 3
    assert 0 < cache["prefix_tokens"] < session["after"]["total"]
    assert cache["rewrite_tokens"] == session["after"]["total"] - cache["prefix_tokens"]
    assert cache["priced_as"] == "gpt-4o"
    assert cache["prices"]["input"] == 2.5
    before = session["before"]["total"] * 1.25 / 1e6
    after = (cache["prefix_tokens"] * 1.25 + cache["rewrite_tokens"] * 2.5) / 1e6
    assert cache["next_call_cost_before"] == pytest.approx(before, abs=1e-6)
    assert cache["next_call_cost_after"] == pytest.approx(after, abs=1e-6)

    stateless = post(
        world.api(world.ingest_key),
        "/api/v1/preview",
        {"format": "openai-chat", "request": chat(*HISTORY), "strategy": "baseagent-prune"},
    ).json()
    assert stateless["cache"]["prefix_tokens"] == stateless["after"]["total"]  # nothing edited
    assert stateless["cache"]["rewrite_tokens"] == 0


def test_model_prices_come_from_the_settings_over_the_built_in_table(
    world: World, settings: Any
) -> None:
    settings.CTXWEB_MODEL_PRICES = {"my-model": {"input": 10, "cache_read": 1}}
    request = {**chat(*HISTORY), "model": "my-model-7b"}
    cache = post(
        world.api(world.ingest_key),
        "/api/v1/preview",
        {"format": "openai-chat", "request": request, "strategy": "baseagent-middle-out"},
    ).json()["cache"]
    assert cache["priced_as"] == "my-model"
    assert cache["prices"]["cache_write"] == 10
    assert cache["prices"]["as_of"] == "CTXWEB_MODEL_PRICES"
    unknown = post(
        world.api(world.ingest_key),
        "/api/v1/preview",
        {"format": "openai-chat", "request": {**request, "model": "x"}, "strategy": "nanobot-trim"},
    ).json()["cache"]
    assert unknown["next_call_cost_after"] is None
    assert unknown["prefix_tokens"] >= 0
