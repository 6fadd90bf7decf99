"""The strategy preview page and the artifact page: who sees them, what they show, escaping."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.test import Client

from compaction.strategies import STRATEGIES, make_artifact
from ctxweb.contexts.models import Artifact, Operation, Session
from ctxweb.front.artifacts import ARTIFACT_PAGE_CHARS
from tests.support.world import World

pytestmark = pytest.mark.django_db

SCRIPT = "<script>alert(1)</script>"
IMG = "<img src=x onerror=alert(1)>"
LINK = '<a href="javascript:alert(1)">click me</a>'
HOSTILE = f"Build log\n{SCRIPT}\n{IMG}\n{LINK}\n" + "compiled module ok\n" * 40


def messages(tool_output: str) -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "You are a careful coding agent."},
        {"role": "user", "content": "Build the project and tell me what failed."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "bash", "arguments": '{"cmd": "make"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": tool_output},
        {"role": "assistant", "content": "The build passed."},
        {"role": "user", "content": "Thanks, now run the tests."},
    ]


def ingest(world: World, tool_output: str = HOSTILE, external_id: str = "s1") -> None:
    client = world.api(world.ingest_key)
    for end in (2, 6):
        response = client.post(
            f"/api/v1/sessions/{external_id}/turns",
            data=json.dumps(
                {
                    "format": "openai-chat",
                    "request": {"model": "gpt-4o", "messages": messages(tool_output)[:end]},
                }
            ),
            content_type="application/json",
        )
        assert response.status_code == 201, response.content


def page(client: Client, path: str, **query: Any) -> Any:
    return client.get(path, query)


CLEAR_ALL = {"strategy": "anthropic-clear-tool-uses", "trigger": "0", "keep": "0"}


def assert_escaped(html: str) -> None:
    assert SCRIPT not in html
    assert IMG not in html
    assert "<img" not in html
    assert 'href="javascript:' not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "&lt;a href=&quot;javascript:alert(1)&quot;&gt;click me&lt;/a&gt;" in html


# --- the preview page -------------------------------------------------------------------------


def test_the_preview_page_asks_an_anonymous_visitor_to_log_in(world: World) -> None:
    ingest(world)
    response = Client().get("/sessions/s1/preview/")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_a_viewer_sees_the_preview_without_the_apply_button(world: World) -> None:
    ingest(world)
    response = page(world.login(world.teammate), "/sessions/s1/preview/", **CLEAR_ALL)
    assert response.status_code == 200
    html = response.content.decode()
    assert "Before and after" in html
    assert "data-apply" not in html
    assert "/sessions/s1/operations/" not in html


def test_an_operator_sees_the_apply_button_as_a_plain_form(world: World) -> None:
    ingest(world)
    response = page(world.login(world.owner), "/sessions/s1/preview/", **CLEAR_ALL)
    assert response.status_code == 200
    html = response.content.decode()
    form = re.search(
        r'<form method="post" action="/sessions/s1/operations/"[^>]*>(.*?)</form>', html, re.S
    )
    assert form is not None
    assert "data-apply" in form.group(1)
    assert 'name="csrfmiddlewaretoken"' in form.group(1)
    assert 'name="strategy" value="anthropic-clear-tool-uses"' in form.group(1)
    params = re.search(r'name="params" value="([^"]*)"', form.group(1))
    assert params is not None
    applied = json.loads(params.group(1).replace("&quot;", '"'))
    assert applied["trigger"] == 0
    assert applied["keep"] == 0


def test_the_page_shows_before_after_bars_edits_and_savings(world: World) -> None:
    ingest(world)
    response = page(world.login(world.owner), "/sessions/s1/preview/", **CLEAR_ALL)
    html = response.content.decode()
    plan = response.context["plan"]
    assert plan.tokens_saved > 0
    assert [e.kind for e in plan.edits] == ["clear"]
    assert html.count('class="bar"') == 2
    assert 'class="seg region-tool_results region-fill"' in html
    assert 'class="seg region-free region-fill"' in html
    assert "Edits (1)" in html
    assert f"saves <strong>{plan.tokens_saved}</strong>" in html
    assert "regions.css" in html


def test_the_page_shows_the_prompt_cache_numbers_beside_before_and_after(world: World) -> None:
    ingest(world)
    response = page(world.login(world.owner), "/sessions/s1/preview/", **CLEAR_ALL)
    html = response.content.decode()
    cache = response.context["cache"]
    # the cleared output is message 3: the three messages before it stay cached
    assert cache["prefix_messages"] == 3
    assert cache["rewrite_tokens"] > 0
    assert "Prompt cache" in html
    assert f">{cache['prefix_tokens']}</td><td>3 messages</td>" in html
    assert f">{cache['rewrite_tokens']}</td>" in html
    assert "gpt-4o at $2.5 input, $2.5 cache write, $1.25 cache read" in html
    assert f"${cache['next_call_cost_after']:.4f}" in html


def test_the_form_is_built_from_the_strategys_parameters(world: World) -> None:
    ingest(world)
    response = page(world.login(world.owner), "/sessions/s1/preview/", strategy="copaw-compact")
    html = response.content.decode()
    assert response.status_code == 200
    assert '<option value="copaw-compact" selected>' in html
    for param in STRATEGIES["copaw-compact"].params:
        assert f'name="{param.name}"' in html
    assert (
        'id="param-compact_ratio" name="compact_ratio" type="number" value="0.75"'
        ' min="0.3" max="0.9" step="any"' in html
    )
    assert '<select id="param-enable_tool_result_compact" name="enable_tool_result_compact"' in html
    # The window parameter starts from the session's model (gpt-4o: 128,000), not the seed's.
    assert 'name="max_input_length" type="number" value="128000"' in html


def test_a_get_with_parameters_recomputes_the_preview(world: World) -> None:
    ingest(world)
    client = world.login(world.owner)
    untouched = page(client, "/sessions/s1/preview/", strategy="anthropic-clear-tool-uses")
    assert untouched.context["plan"].edits == ()
    assert "changes nothing" in untouched.content.decode()
    cleared = page(client, "/sessions/s1/preview/", **CLEAR_ALL)
    assert len(cleared.context["plan"].edits) == 1


def test_the_page_previews_a_named_turn(world: World) -> None:
    ingest(world)
    response = page(world.login(world.owner), "/sessions/s1/preview/", turn="0", **CLEAR_ALL)
    assert response.status_code == 200
    assert response.context["plan"].edits == ()
    # Operations apply to the latest context: no Apply button under an older turn's preview.
    assert "data-apply" not in response.content.decode()
    assert "clear the turn" in response.content.decode()
    missing = page(world.login(world.owner), "/sessions/s1/preview/", turn="9", **CLEAR_ALL)
    assert missing.context["plan"] is None
    assert "the session has no turn 9" in missing.content.decode()


@pytest.mark.parametrize(
    ("query", "path", "why"),
    [
        ({"keep": "-1"}, "params.keep", "must be at least 0"),
        ({"keep": "many"}, "params.keep", "must be a number"),
        ({"keep": "1.5"}, "params.keep", "must be an integer"),
        ({"clear_tool_inputs": "maybe"}, "params.clear_tool_inputs", "must be true or false"),
        ({"turn": "last"}, "turn", "must be a turn number"),
        ({"strategy": "shrink-it"}, "strategy", "unknown strategy"),
    ],
)
def test_a_bad_value_is_shown_beside_its_field(
    world: World, query: dict[str, str], path: str, why: str
) -> None:
    ingest(world)
    response = page(
        world.login(world.owner),
        "/sessions/s1/preview/",
        **{"strategy": "anthropic-clear-tool-uses", **query},
    )
    assert response.status_code == 200
    assert response.context["plan"] is None
    assert response.context["errors"][path].startswith(why)
    html = response.content.decode()
    assert f"<code>{path}</code>" in html
    assert "data-apply" not in html


@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_every_strategy_renders_on_the_page(world: World, strategy: str) -> None:
    ingest(world)
    response = page(world.login(world.owner), "/sessions/s1/preview/", strategy=strategy)
    assert response.status_code == 200
    assert response.context["errors"] == {}
    assert response.context["plan"] is not None


def test_an_outsider_gets_404_for_the_preview_page(world: World) -> None:
    ingest(world)
    assert page(world.login(world.outsider), "/sessions/s1/preview/").status_code == 404
    assert page(world.login(world.owner), "/sessions/nope/preview/").status_code == 404


def test_a_hostile_tool_output_is_escaped_on_the_preview_page(world: World) -> None:
    ingest(world)
    response = page(world.login(world.owner), "/sessions/s1/preview/", **CLEAR_ALL)
    assert response.status_code == 200
    assert_escaped(response.content.decode())


def test_the_preview_page_writes_nothing(world: World) -> None:
    ingest(world)
    client = world.login(world.owner)
    before = Artifact.objects.count()
    response = page(client, "/sessions/s1/preview/", strategy="ctxweb-auto", target_tokens="100")
    assert response.status_code == 200
    assert response.context["plan"].artifacts
    assert Artifact.objects.count() == before == 0


# --- the artifact page ------------------------------------------------------------------------


def store(world: World, content: str) -> Artifact:
    kept = make_artifact("tool_result", content, tokens=42, summary="bash output")
    return Artifact.objects.create(
        project=world.project,
        key=kept.id,
        kind=kept.kind,
        content=kept.content,
        size=kept.size,
        tokens=kept.tokens,
        summary=kept.summary,
    )


def test_the_artifact_page_shows_metadata_escaped_content_and_a_download_link(
    world: World,
) -> None:
    artifact = store(world, HOSTILE)
    response = page(world.login(world.teammate), f"/artifacts/{artifact.key}/")
    assert response.status_code == 200
    html = response.content.decode()
    assert artifact.key in html
    assert "bash output" in html
    assert f'href="/api/v1/artifacts/{artifact.key}" download' in html
    assert_escaped(html)


def test_a_large_artifact_is_paged(world: World) -> None:
    content = "a" * ARTIFACT_PAGE_CHARS + "b" * ARTIFACT_PAGE_CHARS + "c" * 10
    artifact = store(world, content)
    client = world.login(world.owner)
    first = page(client, f"/artifacts/{artifact.key}/")
    assert first.context["content"] == "a" * ARTIFACT_PAGE_CHARS
    assert "Page 1 of 3" in first.content.decode()
    assert 'href="?page=2" rel="next"' in first.content.decode()
    second = page(client, f"/artifacts/{artifact.key}/", page="2")
    assert second.context["content"] == "b" * ARTIFACT_PAGE_CHARS
    assert 'href="?page=1" rel="prev"' in second.content.decode()
    last = page(client, f"/artifacts/{artifact.key}/", page="99")
    assert last.context["content"] == "c" * 10
    assert last.context["page"] == 3


def test_an_outsider_gets_404_for_the_artifact_page(world: World) -> None:
    artifact = store(world, "secret")
    client = world.login(world.outsider)
    assert page(client, f"/artifacts/{artifact.key}/").status_code == 404
    assert page(client, f"/artifacts/{artifact.pk}/").status_code == 404


def test_the_artifact_page_asks_an_anonymous_visitor_to_log_in(world: World) -> None:
    artifact = store(world, "secret")
    response = Client().get(f"/artifacts/{artifact.key}/")
    assert response.status_code == 302


def test_a_session_id_with_slashes_has_a_preview_page(world: World) -> None:
    from compaction.messages import parse
    from ctxweb.contexts import services

    request = {"model": "gpt-4o", "messages": messages("ok")}
    services.turn_ingest(
        project=world.project,
        external_id="team/run-1",
        context=parse("openai-chat", request),
        source="claude-code",
    )
    response = page(world.login(world.owner), "/sessions/team/run-1/preview/", **CLEAR_ALL)
    assert response.status_code == 200
    assert response.context["session"].external_id == "team/run-1"
    assert 'action="/sessions/team/run-1/operations/"' in response.content.decode()


def test_the_page_shows_the_operation_the_apply_form_queued(world: World) -> None:
    ingest(world)
    session = Session.objects.get(external_id="s1")
    operation = Operation.objects.create(session=session, strategy="nanobot-trim")
    client = world.login(world.owner)
    response = page(client, "/sessions/s1/preview/", operation=str(operation.pk))
    html = response.content.decode()
    assert f'data-operation="{operation.pk}"' in html
    assert "<strong>queued</strong>" in html
    foreign = page(world.login(world.outsider), "/sessions/s1/preview/", operation="1")
    assert foreign.status_code == 404
    assert page(client, "/sessions/s1/preview/", operation="x").context["operation"] is None


def test_a_plan_with_many_edits_is_shown_a_page_at_a_time(world: World) -> None:
    calls = []
    for i in range(130):
        calls += [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"c{i}",
                        "type": "function",
                        "function": {"name": "bash", "arguments": '{"cmd": "ls"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": f"c{i}", "content": f"file_{i}.py\n" + "x" * 300},
        ]
    request = {"model": "gpt-4o", "messages": [{"role": "user", "content": "go"}, *calls]}
    response = world.api(world.ingest_key).post(
        "/api/v1/sessions/many/turns",
        data=json.dumps({"format": "openai-chat", "request": request}),
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    client = world.login(world.owner)
    first = page(client, "/sessions/many/preview/", **CLEAR_ALL)
    html = first.content.decode()
    assert len(first.context["plan"].edits) == 130
    assert "Edits (130)" in html
    assert '<span class="kind">clear</span> ×130' in html
    assert [e["number"] for e in first.context["edits"]] == list(range(1, 101))
    assert "Edits 1–100 of 130 (page 1 of 2)" in html
    assert 'rel="next"' in html
    assert 'rel="prev"' not in html
    # the next page keeps the strategy and its parameters
    [link] = set(re.findall(r'href="(\?[^"]*edits_page=2[^"]*)"', html))
    assert "strategy=anthropic-clear-tool-uses" in link
    assert "trigger=0" in link
    second = client.get("/sessions/many/preview/" + link.replace("&amp;", "&").split("#")[0])
    assert [e["number"] for e in second.context["edits"]] == list(range(101, 131))
    assert "Edits 101–130 of 130 (page 2 of 2)" in second.content.decode()
    # out of range or not a number: the nearest page
    assert (
        page(client, "/sessions/many/preview/", edits_page="9", **CLEAR_ALL).context["edits_page"][
            "number"
        ]
        == 2
    )
    assert (
        page(client, "/sessions/many/preview/", edits_page="x", **CLEAR_ALL).context["edits_page"][
            "number"
        ]
        == 1
    )
