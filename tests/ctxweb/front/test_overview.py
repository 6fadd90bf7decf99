"""The project overview (/overview/): filters narrow the numbers as the selector does for the
same filters, each table's CSV matches it, hostile names are escaped, bad filters are refused
with a message, empty states, and each persona sees their own project. Sessions are posted
through the REST ingest."""

from __future__ import annotations

import csv
import html
import io
import re
from datetime import UTC, date, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from ctxweb.accounts.models import Role
from ctxweb.accounts.services import membership_set
from ctxweb.contexts.selectors import USED_REGIONS
from ctxweb.contexts.selectors import attribution as selector
from ctxweb.front.attribution import MAX_FILTER_CHARS, OVERVIEW_TABLES
from tests.support.attribution import HOSTILE, as_text, four_turns
from tests.support.world import World

OTHER_MODEL = "gpt-4o-mini"


def utc_today() -> date:
    return timezone.now().astimezone(UTC).date()


def overview_of(world: World, days: int = 30, **filters: Any) -> dict[str, Any]:
    today = utc_today()
    return selector.project_overview(
        project=world.project, start=today - timedelta(days=days - 1), end=today, **filters
    )


def two_sessions(world: World) -> None:
    client = world.api(world.ingest_key)
    four_turns(client, "s1")
    four_turns(client, "other-model", model=OTHER_MODEL)


def totals(text: str) -> tuple[int, int]:
    found = re.search(r"<strong>([\d,]+)</strong> turns · <strong>([\d,]+)</strong> token", text)
    assert found, "no totals line"
    return int(found[1].replace(",", "")), int(found[2].replace(",", ""))


def table_names(text: str, name: str) -> list[str]:
    start = text.index(f'id="top-{name}"')
    part = text[start : text.index("</section>", start)]
    return re.findall(r'<td class="item-name"><a [^>]*>(.*?)</a>', part)


@pytest.mark.django_db
def test_the_page_shows_the_selectors_numbers(world: World) -> None:
    two_sessions(world)
    data = overview_of(world)
    page = world.login(world.owner).get("/overview/")
    assert page.status_code == 200
    text = page.content.decode()
    assert totals(text) == (
        sum(d["turns"] for d in data["days"]),
        sum(d["tokens"] for d in data["days"]),
    )
    assert totals(text)[0] == 8
    for name in ("tools", "mcp_servers", "files", "instructions"):
        assert table_names(text, name) == [html.escape(r["name"]) for r in data["top"][name]]
    assert [r["name"] for r in data["top"]["mcp_servers"]] == ["github"]
    # the chart's data is the selector's days, as JSON for the script
    assert 'id="overview-data"' in text
    assert "<canvas" in text
    for model in data["choices"]["models"]:
        assert f'<option value="{model}"' in text
    # the navigation links here
    assert 'href="/overview/">Overview</a>' in text


@pytest.mark.django_db
def test_filters_narrow_the_numbers_as_the_selector_does(world: World) -> None:
    two_sessions(world)
    client = world.login(world.owner)
    everything = overview_of(world)
    cases: list[tuple[str, dict[str, Any]]] = [
        (f"?model={OTHER_MODEL}", {"model": OTHER_MODEL}),
        ("?session=other", {"session": "other"}),
        ("?agent=anthropic-messages", {"agent": "anthropic-messages"}),
        ("?source=api&range=7", {"source": "api", "days": 7}),
        ("?session=nothing-matches", {"session": "nothing-matches"}),
    ]
    for query, filters in cases:
        days = filters.pop("days", 30)
        data = overview_of(world, days=days, **filters)
        text = client.get("/overview/" + query).content.decode()
        turns = sum(d["turns"] for d in data["days"])
        if turns:
            assert totals(text) == (turns, sum(d["tokens"] for d in data["days"])), query
            names = table_names(text, "tools")
            assert names == [html.escape(r["name"]) for r in data["top"]["tools"]], query
        else:
            assert "No turns in this range with these filters." in text
    # a model no session has stays chosen in its select (and finds nothing), escaped
    text = client.get("/overview/?model=%3Cb%3Enone").content.decode()
    assert '<option value="&lt;b&gt;none" selected>&lt;b&gt;none (no session)</option>' in text
    assert "No turns in this range with these filters." in text
    # the model and session filters keep one session of two
    by_model = overview_of(world, model=OTHER_MODEL)
    assert (
        0 < sum(d["turns"] for d in by_model["days"]) < sum(d["turns"] for d in everything["days"])
    )
    # each row leads to the sessions that held it, the range and filters kept
    text = client.get(f"/overview/?model={OTHER_MODEL}&session=other").content.decode()
    link = (
        f"/overview/items/?range=30&amp;model={OTHER_MODEL}&amp;session=other"
        "&amp;category=mcp_servers&amp;label=github"
    )
    assert f'href="{link}"' in text


@pytest.mark.django_db
def test_a_custom_range_and_bad_filters(world: World) -> None:
    two_sessions(world)
    client = world.login(world.owner)
    today = utc_today()
    yesterday = today - timedelta(days=1)
    past = client.get(
        f"/overview/?range=custom&start={yesterday - timedelta(days=5)}&end={yesterday}"
    )
    assert "No turns in this range." in past.content.decode()
    exact = client.get(f"/overview/?range=custom&start={today}&end={today}").content.decode()
    assert totals(exact)[0] == 8
    for query, message in [
        (f"?range=custom&start={today}&end={yesterday}", "The end date is before the start"),
        ("?range=custom&start=soon&end=", "needs a start and an end date"),
        (f"?range=custom&start={today - timedelta(days=500)}&end={today}", "at most 400 days"),
        ("?range=forever", "Unknown range"),
        ("?source=%3Cscript%3E", "Unknown source: one of proxy"),
        ("?session=" + "x" * (MAX_FILTER_CHARS + 1), "at most 200 characters"),
    ]:
        response = client.get("/overview/" + query)
        assert response.status_code == 200
        text = response.content.decode()
        assert message in text, query
        assert totals(text)[0] == 8, query  # the default 30 days, unfiltered
    assert client.get("/overview/?format=csv&table=nope").status_code == 400


@pytest.mark.django_db
def test_each_csv_parses_and_matches_the_table(world: World) -> None:
    two_sessions(world)
    data = overview_of(world, model=OTHER_MODEL)
    tables: dict[str, list[dict[str, Any]]] = {
        **data["top"],
        "near_window": data["near_window"],
        "compactions": data["compactions"],
        "days": [],
    }
    held = {d["day"]: d for d in data["days"]}
    zero = {"sessions": 0, "turns": 0, "tokens": 0, "cost": 0.0, "regions": {}}
    for n in range(30):  # every day of the range, the selector's or none
        day = utc_today() - timedelta(days=29 - n)
        d = held.get(day, {**zero, "day": day})
        tables["days"].append({**d, **{r: d["regions"].get(r, 0) for r in USED_REGIONS}})
    assert sum(d["turns"] for d in tables["days"]) == 4
    client = world.login(world.owner)
    page = client.get(f"/overview/?model={OTHER_MODEL}").content.decode()
    for table, (_, columns) in OVERVIEW_TABLES.items():
        link = f"?range=30&amp;model={OTHER_MODEL}&amp;format=csv&amp;table={table}"
        assert f'href="{link}"' in page, table
        response = client.get("/overview/" + html.unescape(link))
        assert response.status_code == 200
        assert response["Content-Type"].startswith("text/csv")
        rows = list(csv.DictReader(io.StringIO(response.content.decode())))
        expected = [{c: as_text(r.get(c)) for c in columns} for r in tables[table]]
        assert rows == expected, table
    assert len(rows) == 30, "the days table has a row per day"


@pytest.mark.django_db
def test_a_hostile_tool_name_is_escaped(world: World) -> None:
    two_sessions(world)
    assert HOSTILE in {r["name"] for r in overview_of(world)["top"]["tools"]}
    text = world.login(world.owner).get("/overview/").content.decode()
    assert HOSTILE not in text
    assert html.escape(HOSTILE) in text
    # in the chart's JSON too: json_script escapes < and >
    data = text[text.index('id="overview-data"') :]
    assert "<script>alert" not in data[: data.index("</script>")]


@pytest.mark.django_db
def test_an_empty_project_shows_its_empty_states(world: World) -> None:
    text = world.login(world.owner).get("/overview/").content.decode()
    assert "No turns in this range. Sessions appear here" in text
    assert "<canvas" not in text
    assert text.count("None in this range.") == 4
    assert "No session reached 90% of its usable window" in text
    assert "No compaction in this range" in text
    assert "No turn in this range carried the provider's reported usage." in text


@pytest.mark.django_db
def test_each_member_sees_their_own_project(world: World) -> None:
    two_sessions(world)
    operator = User.objects.create_user("op", password="pw-op-12345")
    membership_set(project=world.project, user=operator, role=Role.OPERATOR)
    for user in (world.owner, operator, world.teammate):
        response = world.login(user).get("/overview/")
        assert response.status_code == 200
        assert totals(response.content.decode())[0] == 8
    # the outsider's project is beta: nothing of alpha's
    outsider = world.login(world.outsider).get("/overview/").content.decode()
    assert "No turns in this range." in outsider
    assert "mcp__github" not in outsider
    csv_rows = world.login(world.outsider).get("/overview/?format=csv&table=tools").content
    assert csv_rows.decode().strip() == "name,tokens,sessions,turns"
    nobody = User.objects.create_user("nobody", password="pw-nobody-123")
    assert world.login(nobody).get("/overview/").status_code == 404


@pytest.mark.django_db
def test_the_overview_follows_the_project_switcher(world: World) -> None:
    two_sessions(world)
    membership_set(project=world.other_project, user=world.owner, role=Role.VIEWER)
    client = world.login(world.owner)
    page = client.get("/overview/").content.decode()
    assert totals(page)[0] == 8
    assert 'id="project-switch"' in page
    switched = client.post("/accounts/project/", {"project": str(world.other_project.pk)})
    assert switched.status_code == 302
    page = client.get("/overview/").content.decode()
    assert 'Overview <span class="muted">of beta</span>' in page
    assert "No turns in this range." in page


def queries_of(client: Any, url: str) -> int:
    with CaptureQueriesContext(connection) as queries:
        assert client.get(url).status_code == 200, url
    return len(queries)


@pytest.mark.django_db
def test_the_pages_run_as_many_queries_for_one_session_as_for_three(world: World) -> None:
    client = world.api(world.ingest_key)
    four_turns(client, "s1")
    member = world.login(world.owner)
    urls = ["/overview/", "/overview/?format=csv&table=days", "/sessions/s1/attribution/"]
    one = [queries_of(member, url) for url in urls]
    four_turns(client, "s2", model=OTHER_MODEL)
    four_turns(client, "s3")
    assert totals(member.get("/overview/").content.decode())[0] == 12
    assert [queries_of(member, url) for url in urls] == one
