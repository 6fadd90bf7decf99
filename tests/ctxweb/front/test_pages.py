"""The dashboard pages: sessions list, session chart page, turn inspector, project switcher.

Every page escapes message content, shows nothing of another project, and runs a constant number
of queries whatever the number of turns.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from compaction.messages import parse
from ctxweb.accounts.access import SESSION_PROJECT_KEY
from ctxweb.accounts.models import Project, Role
from ctxweb.accounts.services import membership_set, project_create
from ctxweb.contexts.models import Artifact, Session
from ctxweb.contexts.selectors import turn_diff
from ctxweb.contexts.services import turn_ingest
from ctxweb.front.charts import sparkline
from ctxweb.front.templatetags.dashboard import pointers, pretty_json
from tests.support.builders import history
from tests.support.world import World

pytestmark = pytest.mark.django_db

SYSTEM = {"role": "system", "content": "You are a careful coding agent."}
EVIL = (
    "<script>alert(1)</script> and <img src=x onerror=alert(1)> "
    "and [click](javascript:alert(1)) done"
)


def ask(n: int) -> dict[str, Any]:
    return {"role": "user", "content": f"Step {n}: list the files, please."}


def call(n: int) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": f"call_{n}",
                "type": "function",
                "function": {"name": "ls", "arguments": json.dumps({"path": f"dir{n}"})},
            }
        ],
    }


def result(n: int, text: str | None = None) -> dict[str, Any]:
    return {
        "role": "tool",
        "tool_call_id": f"call_{n}",
        "content": text if text is not None else f"file{n}.py\n" * 40,
    }


def ingest(
    project: Project, external_id: str, messages: list[dict[str, Any]], **kwargs: Any
) -> Any:
    request = {"model": "gpt-4o", "messages": messages, "tools": [TOOL]}
    return turn_ingest(
        project=project,
        external_id=external_id,
        context=parse("openai-chat", request),
        model="gpt-4o",
        **kwargs,
    ).turn


TOOL = {
    "type": "function",
    "function": {
        "name": "ls",
        "description": "List <files> in a directory.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
    },
}


def grow(project: Project, external_id: str, turns: int) -> list[dict[str, Any]]:
    """A session of ``turns`` turns, each adding a call and its result."""
    messages: list[dict[str, Any]] = [SYSTEM, ask(0)]
    for n in range(turns):
        ingest(project, external_id, messages)
        messages = [*messages, call(n), result(n)]
    return messages


def logged_in(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


# --- sessions list ----------------------------------------------------------------------------


def test_the_list_shows_each_session_with_its_fill_trend_and_compactions(world: World) -> None:
    grow(world.project, "agent-run-1", 4)
    response = logged_in(world.owner).get("/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "agent-run-1" in html
    assert "gpt-4o" in html
    assert '<svg class="spark' in html
    assert "<polyline points=" in html
    session = Session.objects.get(external_id="agent-run-1")
    assert f"{session.last_fill:.0%}" in html


def test_the_list_hides_other_projects_sessions(world: World) -> None:
    grow(world.project, "ours", 1)
    grow(world.other_project, "theirs", 1)
    html = logged_in(world.owner).get("/").content.decode()
    assert "ours" in html
    assert "theirs" not in html
    assert "beta" not in html  # the other project's name is not shown either


def test_the_list_filters_by_search_model_and_fill(world: World) -> None:
    grow(world.project, "alpha-run", 1)
    grow(world.project, "beta-run", 1)
    Session.objects.filter(external_id="beta-run").update(last_fill=0.9, model="claude-x")
    client = logged_in(world.owner)
    html = client.get("/", {"q": "alpha"}).content.decode()
    assert "alpha-run" in html
    assert "beta-run" not in html
    html = client.get("/", {"model": "claude-x"}).content.decode()
    assert "beta-run" in html
    assert "alpha-run" not in html
    html = client.get("/", {"fill": "over"}).content.decode()
    assert "beta-run" in html
    assert "alpha-run" not in html
    html = client.get("/", {"fill": "ok", "sort": "-fill"}).content.decode()
    assert "alpha-run" in html
    assert "beta-run" not in html
    html = client.get("/", {"q": "nothing-like-this"}).content.decode()
    assert "No session matches these filters" in html


def test_the_list_sorts_and_paginates_25_per_page(world: World) -> None:
    for n in range(27):
        Session.objects.create(
            project=world.project,
            external_id=f"s{n:02d}",
            format="openai-chat",
            context_window=1000,
            encoding="o200k_base",
            last_fill=n / 100,
        )
    client = logged_in(world.owner)
    first = client.get("/", {"sort": "-fill"}).content.decode()
    assert first.index("s26") < first.index("s25")
    assert "s01" not in first
    assert "Page 1 of 2" in first
    second = client.get("/", {"sort": "-fill", "page": 2}).content.decode()
    assert "s01" in second
    assert "s00" in second
    assert "s26" not in second


def test_an_empty_project_shows_how_to_post_a_first_turn(world: World) -> None:
    html = logged_in(world.owner).get("/").content.decode()
    assert "No sessions yet" in html
    assert "http://testserver/api/v1/sessions/my-first-session/turns" in html
    assert "create_api_key --project alpha" in html
    assert "Authorization: Bearer $CTXWEB_API_KEY" in html


def test_a_user_in_no_project_sees_a_friendly_page(db: None) -> None:
    lonely = User.objects.create_user("lonely", password="pw-lonely-123")
    response = logged_in(lonely).get("/")
    assert response.status_code == 200
    assert b"not in any project" in response.content


# --- the project switcher ---------------------------------------------------------------------


def test_the_switcher_lists_only_the_users_projects_and_switches(world: World) -> None:
    gamma = project_create(name="gamma", owner=world.owner)
    grow(gamma, "gamma-session", 1)
    grow(world.project, "alpha-session", 1)
    client = logged_in(world.owner)
    html = client.get("/").content.decode()
    assert 'name="project"' in html
    assert ">alpha<" in html
    assert ">gamma<" in html
    assert ">beta<" not in html
    assert "alpha-session" in html
    assert "gamma-session" not in html
    response = client.post("/accounts/project/", {"project": gamma.pk})
    assert response.status_code == 302
    html = client.get("/").content.decode()
    assert "gamma-session" in html
    assert "alpha-session" not in html


def test_the_switcher_refuses_a_project_the_user_is_not_in(world: World) -> None:
    client = logged_in(world.owner)
    client.post("/accounts/project/", {"project": world.other_project.pk})
    assert client.session.get(SESSION_PROJECT_KEY) != world.other_project.pk
    grow(world.other_project, "theirs", 1)
    assert "theirs" not in client.get("/").content.decode()


def test_a_user_in_one_project_sees_no_switcher(world: World) -> None:
    html = logged_in(world.teammate).get("/").content.decode()
    assert 'name="project"' not in html
    assert "alpha" in html


# --- session page -----------------------------------------------------------------------------


def chart_json(html: str) -> dict[str, Any]:
    found = re.search(r'<script id="chart-data" type="application/json">(.*?)</script>', html, re.S)
    assert found, "chart data missing"
    return json.loads(found.group(1))  # type: ignore[no-any-return]


def test_the_session_page_embeds_every_turn_for_the_chart(world: World) -> None:
    grow(world.project, "s1", 5)
    response = logged_in(world.teammate).get("/sessions/s1/")
    assert response.status_code == 200
    html = response.content.decode()
    data = chart_json(html)
    assert [t["index"] for t in data["turns"]] == [0, 1, 2, 3, 4]
    assert data["window"] == 128_000
    assert data["usable"] < data["window"] or data["reserve"] == 0
    assert data["trigger"] == int(data["usable"] * 0.8)
    assert "chart.js" in html
    assert "/sessions/s1/preview/" in html
    # the latest turn's breakdown works without JavaScript
    assert "tool results" in html
    assert "Tokenizer" in html
    assert "o200k_base" in html


def test_the_session_page_lists_compactions(world: World) -> None:
    messages = grow(world.project, "s1", 6)
    ingest(world.project, "s1", [SYSTEM, messages[-1] | {"role": "user", "content": "go on"}])
    html = logged_in(world.owner).get("/sessions/s1/").content.decode()
    assert "compaction" in html
    assert "/sessions/s1/turns/6/" in html
    assert any(e["type"] == "compaction" for e in chart_json(html)["turns"][-1]["events"])


def test_another_projects_session_is_not_found(world: World) -> None:
    grow(world.other_project, "theirs", 2)
    client = logged_in(world.owner)
    assert client.get("/sessions/theirs/").status_code == 404
    assert client.get("/sessions/theirs/turns/0/").status_code == 404
    assert client.get("/sessions/theirs/turns/").status_code == 404


def test_pages_need_a_login(world: World) -> None:
    grow(world.project, "s1", 1)
    for url in ("/", "/sessions/s1/", "/sessions/s1/turns/0/"):
        response = Client().get(url)
        assert response.status_code == 302
        assert response["Location"].startswith("/accounts/login/")


def test_the_turn_form_opens_the_chosen_turn(world: World) -> None:
    grow(world.project, "s1", 3)
    client = logged_in(world.owner)
    assert client.get("/sessions/s1/turns/", {"index": 1})["Location"] == "/sessions/s1/turns/1/"
    assert client.get("/sessions/s1/turns/", {"index": 99})["Location"] == "/sessions/s1/turns/2/"
    assert client.get("/sessions/s1/turns/")["Location"] == "/sessions/s1/turns/2/"


# --- turn inspector ---------------------------------------------------------------------------


def test_the_inspector_lists_every_message_with_tokens_and_a_diff(world: World) -> None:
    grow(world.project, "s1", 3)
    client = logged_in(world.owner)
    html = client.get("/sessions/s1/turns/2/").content.decode()
    assert html.count('class="message region-') == 6
    assert "2</strong> messages added" in html
    assert 'rel="prev" href="/sessions/s1/turns/1/"' in html
    assert "Latest turn" in html  # no next turn
    assert "List &lt;files&gt; in a directory." in html  # tool definitions, escaped
    assert "&quot;path&quot;: &quot;dir1&quot;" in html  # arguments pretty-printed
    assert "You are a careful coding agent." in html
    assert "'position':" not in html  # messages are never dumped as flash messages


def test_largest_first_orders_messages_by_tokens(world: World) -> None:
    grow(world.project, "s1", 2)
    html = logged_in(world.owner).get("/sessions/s1/turns/1/?order=size").content.decode()
    positions = [int(p) for p in re.findall(r'<li id="m-(\d+)"', html)]
    assert positions[0] == 3  # the tool result is the biggest message
    assert sorted(positions) == [0, 1, 2, 3]


def test_the_diff_names_messages_that_disappeared(world: World) -> None:
    messages = grow(world.project, "s1", 3)
    ingest(world.project, "s1", [SYSTEM, ask(9)])
    session = Session.objects.get(external_id="s1")
    diff = turn_diff(session=session, index=3)
    assert diff["added"] == [1]
    assert {r["role"] for r in diff["removed"]} == {"user", "assistant", "tool"}
    assert len(diff["removed"]) == len(messages) - 3  # all but the system prompt
    html = logged_in(world.owner).get("/sessions/s1/turns/3/").content.decode()
    assert "Messages that disappeared" in html


def test_the_diff_works_across_a_keyframe(world: World) -> None:
    grow(world.project, "s1", 34)
    session = Session.objects.get(external_id="s1")
    diff = turn_diff(session=session, index=32)  # turn 32 is a keyframe
    assert len(diff["added"]) == 2
    assert diff["removed"] == []


def test_externalized_pointers_link_to_their_artifact(world: World) -> None:
    key = hashlib.sha256(b"the full output").hexdigest()
    Artifact.objects.create(
        project=world.project, key=key, kind="tool_result", content="the full output", size=15
    )
    llm4s = "content_" + "a" * 64
    text = f"Output moved: [EXTERNALIZED:{key}] and [EXTERNALIZED: {llm4s} | JSON | big <list>]"
    ingest(world.project, "s1", [SYSTEM, ask(0), call(0), result(0, text)])
    html = logged_in(world.owner).get("/sessions/s1/turns/0/").content.decode()
    assert f'<a class="artifact-link" href="/artifacts/{key}/">[EXTERNALIZED:{key}]</a>' in html
    assert f'href="/artifacts/{llm4s.removeprefix("content_")}/"' in html
    assert "big &lt;list&gt;]</a>" in html
    assert "Externalized by ctxweb" in html
    assert f'<a href="/artifacts/{key}/">artifact' in html


def test_a_short_pointer_links_to_its_artifact_and_the_link_opens_it(world: World) -> None:
    key = hashlib.sha256(b"the full output").hexdigest()
    Artifact.objects.create(
        project=world.project, key=key, kind="tool_result", content="the full output", size=15
    )
    short = key[:16]  # as ctxweb-auto writes its pointers
    ingest(world.project, "s1", [SYSTEM, ask(0), call(0), result(0, f"[EXTERNALIZED:{short}] x")])
    client = logged_in(world.owner)
    html = client.get("/sessions/s1/turns/0/").content.decode()
    assert f'<a class="artifact-link" href="/artifacts/{short}/">[EXTERNALIZED:{short}]</a>' in html
    assert f'<a href="/artifacts/{short}/">artifact' in html  # the placeholder found it stored
    opened = client.get(f"/artifacts/{short}/")
    assert opened.status_code == 200
    assert key in opened.content.decode()
    assert "the full output" in opened.content.decode()


def test_the_pointer_filter_escapes_before_linking() -> None:
    assert str(pointers("<b>[EXTERNALIZED:abc]</b>")) == (
        '&lt;b&gt;<a class="artifact-link" href="/artifacts/abc/">[EXTERNALIZED:abc]</a>&lt;/b&gt;'
    )
    # an id that would break out of the attribute is quoted into the URL, escaped in the text
    hostile = str(pointers('[EXTERNALIZED:x"onmouseover=alert(1)]'))
    assert hostile == (
        '<a class="artifact-link" href="/artifacts/x%22onmouseover=alert(1)/">'
        "[EXTERNALIZED:x&quot;onmouseover=alert(1)]</a>"
    )
    script = str(pointers("[EXTERNALIZED:<script>]"))
    assert "<script>" not in script
    assert 'href="/artifacts/%3Cscript%3E/"' in script


def test_pretty_json_indents_json_and_leaves_other_text() -> None:
    assert pretty_json('{"a": [1, 2]}') == '{\n  "a": [\n    1,\n    2\n  ]\n}'
    assert pretty_json("not json") == "not json"


def test_sparklines_keep_peaks_when_down_sampled() -> None:
    totals = [10] * 500 + [900] + [10] * 499
    line = sparkline(totals, 1000)
    assert line is not None
    assert len(line.points.split()) == 60
    assert "peak 90%" in line.label
    assert min(float(p.split(",")[1]) for p in line.points.split()) < 6


# --- safety -----------------------------------------------------------------------------------


def test_hostile_tool_output_renders_as_text_everywhere(world: World) -> None:
    ingest(world.project, "evil", [SYSTEM, ask(0), call(0), result(0, EVIL)])
    ingest(world.project, "evil", [SYSTEM, ask(0), call(0), result(0, EVIL), ask(1)])
    Session.objects.filter(external_id="evil").update(model="<img src=x onerror=alert(2)>")
    client = logged_in(world.owner)
    pages = {
        "list": client.get("/").content.decode(),
        "session": client.get("/sessions/evil/").content.decode(),
        "inspector": client.get("/sessions/evil/turns/1/").content.decode(),
    }
    for name, html in pages.items():
        assert "<script>alert" not in html, name
        assert "<img src=x" not in html, name
        assert 'href="javascript:' not in html, name
    inspector = pages["inspector"]
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in inspector
    assert "&lt;img src=x onerror=alert(1)&gt;" in inspector
    assert "[click](javascript:alert(1))" in inspector  # plain text, not a link
    assert "&lt;img src=x onerror=alert(2)&gt;" in pages["list"]


def test_hostile_session_ids_are_escaped(world: World) -> None:
    ingest(world.project, "<b>x</b>", [SYSTEM, ask(0)])
    html = logged_in(world.owner).get("/").content.decode()
    assert "&lt;b&gt;x&lt;/b&gt;" in html
    assert "<b>x</b>" not in html


# --- query counts -----------------------------------------------------------------------------


def count_queries(client: Client, url: str) -> int:
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    assert response.status_code == 200, url
    return len(queries)


def test_pages_run_a_constant_number_of_queries(world: World) -> None:
    grow(world.project, "small", 5)
    grow(world.project, "large", 50)
    for n in range(3):
        grow(world.project, f"other-{n}", n + 1)
    keys = [hashlib.sha256(str(n).encode()).hexdigest() for n in range(12)]
    for key in keys:
        Artifact.objects.create(project=world.project, key=key, kind="t", content="x", size=1)
    for name, count in (("one-link", 1), ("many-links", 12)):
        messages = grow(world.project, name, 1)
        pointers = [result(0, f"[EXTERNALIZED:{key}]") for key in keys[:count]]
        ingest(world.project, name, [*messages, *pointers])
    client = logged_in(world.owner)
    client.get("/")  # the session is saved once on the first request
    for small, large in [
        ("/sessions/small/", "/sessions/large/"),
        ("/api/v1/sessions/small/turns", "/api/v1/sessions/large/turns"),
        ("/sessions/small/turns/4/", "/sessions/large/turns/49/"),
        ("/sessions/small/turns/4/?order=size", "/sessions/large/turns/40/?order=size"),
        ("/sessions/one-link/turns/1/", "/sessions/many-links/turns/1/"),
    ]:
        assert count_queries(client, small) == count_queries(client, large), (small, large)


def test_the_list_runs_a_constant_number_of_queries(world: World) -> None:
    client = logged_in(world.owner)
    grow(world.project, "first", 5)
    client.get("/")
    few = count_queries(client, "/")
    for n in range(6):
        grow(world.project, f"more-{n}", 10)
    assert count_queries(client, "/") == few
    assert count_queries(client, "/?fill=ok&sort=-turns&q=more") == few


def test_a_viewer_reads_the_same_pages(world: World) -> None:
    membership_set(project=world.project, user=world.teammate, role=Role.VIEWER)
    grow(world.project, "s1", 2)
    client = logged_in(world.teammate)
    for url in ("/", "/sessions/s1/", "/sessions/s1/turns/1/"):
        assert client.get(url).status_code == 200


def test_logging_in_and_out_goes_through_the_forms(world: World) -> None:
    client = Client()
    page = client.get("/accounts/login/?next=/")
    assert b"Log in to ctxweb" in page.content
    wrong = client.post("/accounts/login/", {"username": "owner", "password": "nope"})
    assert b"don't match" in wrong.content
    response = client.post(
        "/accounts/login/", {"username": "owner", "password": "pw-owner-123", "next": "/"}
    )
    assert response.status_code == 302
    assert response["Location"] == "/"
    assert b"Log out" in client.get("/").content
    response = client.post("/accounts/logout/")
    assert response["Location"] == "/accounts/login/"
    assert client.get("/").status_code == 302


def test_the_inspector_pages_a_turn_of_thousands_of_messages(world: World) -> None:
    messages: list[dict[str, Any]] = [SYSTEM, ask(0)]
    for n in range(250):
        messages += [call(n), result(n, f"out {n}")]
    ingest(world.project, "long", messages)
    client = logged_in(world.owner)
    first = client.get("/sessions/long/turns/0/").content.decode()
    assert "in 502 messages" in first
    assert first.count('class="message region-') == 200
    assert "Messages 1–200 of 502" in first
    last = client.get("/sessions/long/turns/0/?page=3").content.decode()
    assert last.count('class="message region-') == 102
    assert 'id="m-501"' in last
    largest = client.get("/sessions/long/turns/0/?order=size&page=2").content.decode()
    assert "order=size&amp;page=3" in largest


def long_turns(project: Project, external_id: str, pairs: int) -> None:
    """Turn 0 with ``pairs`` tool calls and their results, turn 1 adding one more, and turn 2 a
    compaction that drops them all."""
    messages: list[dict[str, Any]] = [SYSTEM, ask(0)]
    for n in range(pairs):
        messages += [call(n), result(n, f"out {n}" * (n % 7 + 1))]
    ingest(project, external_id, messages)
    ingest(project, external_id, [*messages, call(pairs), result(pairs)])
    ingest(project, external_id, [SYSTEM, ask(1)])


def test_the_inspector_runs_the_same_queries_for_a_turn_of_thousands_of_messages(
    world: World,
) -> None:
    # 1,202 messages: more ids than SQLite's 999 variables, which once split the lookups.
    long_turns(world.project, "few", 3)
    long_turns(world.project, "many", 600)
    client = logged_in(world.owner)
    client.get("/")  # the session is saved once on the first request
    counts = {}
    for path in (
        "turns/0/",
        "turns/1/",
        "turns/1/?page=4",
        "turns/1/?page=7",  # the last page
        "turns/1/?order=size",
        "turns/1/?order=size&page=7",
        "turns/2/",  # 1,203 messages disappeared
    ):
        few = count_queries(client, f"/sessions/few/{path}")
        many = count_queries(client, f"/sessions/many/{path}")
        assert few == many, path
        counts[path] = many
    assert len(set(counts.values())) == 1, counts


def test_the_inspector_loads_only_the_page_it_shows(world: World) -> None:
    long_turns(world.project, "many", 300)
    client = logged_in(world.owner)
    html = client.get("/sessions/many/turns/1/?page=3").content.decode()
    assert "in 604 messages" in html
    assert "Messages 401–600 of 604" in html
    positions = [int(p) for p in re.findall(r'<li id="m-(\d+)"', html)]
    assert positions == list(range(400, 600))
    assert '2</strong> messages added (<a href="#m-602">#602</a>' in html
    largest = client.get("/sessions/many/turns/1/?order=size").content.decode()
    positions = [int(p) for p in re.findall(r'<li id="m-(\d+)"', largest)]
    assert positions[0] == 603  # the last result is the biggest message
    assert 'style="width: 100.00%"' in largest.split('id="m-603"')[1].split("</li>")[0]
    compacted = client.get("/sessions/many/turns/2/").content.decode()
    assert "603</strong> disappeared" in compacted
    assert "was #602" in compacted


def test_a_session_the_proxy_manages_says_so_and_sources_read_in_words(world: World) -> None:
    from compaction.messages import parse
    from ctxweb.contexts.services import turn_ingest

    request = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
    turn_ingest(
        project=world.project,
        external_id="via-proxy",
        context=parse("openai-chat", request),
        events=[{"type": "managed", "source": "proxy", "operation": 1}],
        source="proxy",
    )
    client = world.login(world.owner)
    page = client.get("/sessions/via-proxy/").content.decode()
    assert "recorded by the proxy" in page
    assert ">managed</span>" in page
    listing = client.get("/").content.decode()
    assert 'title="recorded by the proxy"' in listing


# --- a turn's events and a session's operations ----------------------------------------------


@pytest.fixture
def run_operations(settings: Any, django_capture_on_commit_callbacks: Any) -> Any:
    """Apply a strategy through the service; it runs when its transaction commits."""
    from ctxweb.contexts.services import operations

    settings.CTXWEB_TASKS_INLINE = True

    def run(session_id: str, strategy: str = "baseagent-middle-out", actor: Any = None) -> Any:
        session = Session.objects.get(external_id=session_id)
        with django_capture_on_commit_callbacks(execute=True):
            operation = operations.operation_create(
                session=session, strategy=strategy, params={}, actor=actor
            )
        operation.refresh_from_db()
        assert operation.status == "succeeded", operation.error
        return operation

    return run


def test_the_turn_page_shows_a_warning_and_a_managed_event_escaped(
    world: World, run_operations: Any
) -> None:
    messages = grow(world.project, "managed", 3)
    operation = run_operations("managed", actor=world.owner)
    warning = f"managed mode: the request no longer starts with the context {EVIL}"
    ingest(
        world.project,
        "managed",
        [*messages, ask(9)],
        events=[
            {"type": "warning", "source": "proxy", "message": warning},
            {"type": "managed", "source": "proxy", "operation": operation.pk},
        ],
    )
    html = logged_in(world.teammate).get("/sessions/managed/turns/3/").content.decode()
    events = html.split('id="events-title"')[1].split("</section>")[0]
    assert "No events for this turn" not in events
    # The turn also continues from the operation's context: the ingest marks it so, last.
    warned, managed, continued = events.split('<li class="event ')[1:]
    assert warned.startswith('event-warning warning"')
    assert '<span class="tag warn event-type">warning</span>' in warned
    assert "from proxy" in warned
    assert "the request no longer starts with the context" in warned
    assert "<script>" not in events
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in warned
    assert "&lt;img src=x onerror=alert(1)&gt;" in warned
    assert managed.startswith('event-managed"')
    assert '<span class="tag event-type">managed</span>' in managed
    assert "from proxy" in managed
    assert f'href="/sessions/managed/#op-{operation.pk}"' in managed
    assert f'href="/api/v1/operations/{operation.pk}?project={world.project.pk}"' in managed
    assert continued.startswith('event-operation"')
    assert f'href="/sessions/managed/#op-{operation.pk}"' in continued


def test_a_turn_without_events_says_so(world: World) -> None:
    grow(world.project, "quiet", 2)
    html = logged_in(world.owner).get("/sessions/quiet/turns/1/").content.decode()
    events = html.split('id="events-title"')[1].split("</section>")[0]
    assert "No events for this turn" in events
    assert '<li class="event' not in events


def test_an_event_with_hostile_fields_renders_as_text(world: World) -> None:
    grow(world.project, "odd", 1)
    ingest(
        world.project,
        "odd",
        [SYSTEM, ask(0), call(0), result(0), ask(1)],
        events=[{"type": EVIL, "source": EVIL, "operation": EVIL, "extra": EVIL}],
    )
    html = logged_in(world.owner).get("/sessions/odd/turns/1/").content.decode()
    events = html.split('id="events-title"')[1].split("</section>")[0]
    assert "<script>" not in events
    assert "<img" not in events
    assert events.count("&lt;script&gt;alert(1)&lt;/script&gt;") == 3  # type, source, extra
    assert "#op-" not in events  # not an operation id: no link made of it


def operations_section(html: str) -> str:
    return html.split('id="operations-title"')[1].split("</section>")[0]


def test_the_session_page_lists_an_operation_applied_through_the_service(
    world: World, run_operations: Any
) -> None:
    ingest(world.project, "s1", history())  # long tool outputs: middle-out shortens them
    client = logged_in(world.teammate)
    assert "None yet" in operations_section(client.get("/sessions/s1/").content.decode())

    operation = run_operations("s1", actor=world.owner)
    html = client.get("/sessions/s1/").content.decode()
    listed = operations_section(html)
    assert "None yet" not in html
    assert f'<tr id="op-{operation.pk}"' in listed
    assert f'href="/api/v1/operations/{operation.pk}?project={world.project.pk}"' in listed
    assert "baseagent-middle-out" in listed
    assert "succeeded" in listed
    assert "<td>owner</td>" in listed
    assert "just now" in listed
    result = operation.result
    assert result["tokens_after"] < result["tokens_before"]
    assert f'<td class="num">{result["tokens_before"]:,}</td>' in listed
    assert f'<td class="num">{result["tokens_after"]:,}</td>' in listed
    assert "undone" not in listed


def test_the_session_page_lists_every_operation_newest_first_and_marks_the_undone(
    world: World, run_operations: Any
) -> None:
    from ctxweb.accounts.services import api_key_create
    from ctxweb.contexts.services import operations

    grow(world.project, "s1", 3)
    key, _ = api_key_create(project=world.project, role="operator")
    first = run_operations("s1", actor=world.owner)
    operations.operation_undo(operation=first, actor=world.owner)
    second = run_operations("s1", strategy="baseagent-prune", actor=key)
    listed = operations_section(logged_in(world.owner).get("/sessions/s1/").content.decode())
    rows = listed.split("<tr id=")[1:]
    assert [row.split('"')[1] for row in rows] == [f"op-{second.pk}", f"op-{first.pk}"]
    assert "baseagent-prune" in rows[0]
    assert f"key {key.prefix}" in rows[0]
    assert "undone" not in rows[0]
    assert 'class="operation-row status-succeeded undone"' in rows[1]
    assert ">undone</span>" in rows[1]


def test_the_session_page_runs_the_same_queries_for_one_operation_or_several(
    world: World, run_operations: Any
) -> None:
    from ctxweb.accounts.services import api_key_create

    key, _ = api_key_create(project=world.project, role="operator")
    grow(world.project, "one", 3)
    grow(world.project, "several", 3)
    run_operations("one", actor=world.owner)
    run_operations("several", actor=world.owner)
    run_operations("several", strategy="baseagent-prune", actor=key)
    run_operations("several", strategy="nanobot-trim")
    client = logged_in(world.owner)
    client.get("/")  # the session is saved once on the first request
    assert count_queries(client, "/sessions/one/") == count_queries(client, "/sessions/several/")


def test_the_session_page_shows_operations_twenty_a_page(world: World, run_operations: Any) -> None:
    grow(world.project, "busy", 2)
    ids = [run_operations("busy", strategy="nanobot-trim").pk for _ in range(21)]
    client = logged_in(world.owner)
    first = operations_section(client.get("/sessions/busy/").content.decode())
    assert first.count("<tr id=") == 20
    assert f'<tr id="op-{ids[-1]}"' in first
    assert f'<tr id="op-{ids[0]}"' not in first
    assert "Operations 1–20 of 21" in first
    assert 'href="?operations=2#operations" rel="next"' in first
    second = operations_section(client.get("/sessions/busy/?operations=2").content.decode())
    assert [row.split('"')[1] for row in second.split("<tr id=")[1:]] == [f"op-{ids[0]}"]
    assert 'href="?operations=1#operations" rel="prev"' in second
