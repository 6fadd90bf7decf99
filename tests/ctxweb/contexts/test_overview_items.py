"""The overview's click-through selector names the same items ingest counts under a label: for
every region, kind and name/group shape, an item matches :func:`label_items` exactly when
:func:`item_labels` files it under that category and label. It reads rollup rows in a fixed
number of queries, and bounds its list."""

from __future__ import annotations

import itertools
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.db.models import Q
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from compaction.regions import REGIONS
from ctxweb.contexts.models import AttributionItem, Session
from ctxweb.contexts.selectors import attribution as selector
from ctxweb.contexts.services.attribution import item_labels
from tests.support.attribution import four_turns
from tests.support.world import World

KINDS = (
    "tool_definition",
    "tool_call",
    "tool_output",
    "file",
    "instruction",
    "unattributed",
    "message",
)
#: (name, group) shapes: a plain tool (its own group), an MCP tool under its server.
SHAPES = (("Read", "Read"), ("get_issue", "github"), ("/repo/app.py", "Read"))


@pytest.mark.django_db
def test_label_items_mirrors_item_labels(world: World) -> None:
    session = Session.objects.create(
        project=world.project, external_id="mirror", context_window=200_000
    )
    for n, (region, kind, (name, group)) in enumerate(itertools.product(REGIONS, KINDS, SHAPES)):
        AttributionItem.objects.create(
            session=session, key=f"{n:040d}", region=region, kind=kind, name=name, group=group
        )
    rows = list(AttributionItem.objects.filter(session=session))
    labels = {
        (c, lbl)
        for row in rows
        for c, lbl in item_labels(row.region, row.kind, row.name, row.group)
    }
    assert {c for c, _ in labels} == set(selector.TOP_LISTS)
    for category in selector.TOP_LISTS:
        for label in {"Read", "github", "get_issue", "/repo/app.py"}:
            want = {
                row.pk
                for row in rows
                if (category, label) in item_labels(row.region, row.kind, row.name, row.group)
            }
            query = Q(session=session) & selector.label_items(category=category, label=label)
            assert set(AttributionItem.objects.filter(query).values_list("pk", flat=True)) == want
    with pytest.raises(ValueError, match="category"):
        selector.label_items(category="days", label="x")


@pytest.mark.django_db
def test_a_fixed_number_of_queries_and_a_bounded_list(world: World) -> None:
    client = world.api(world.ingest_key)
    for n in range(3):
        four_turns(client, f"s{n}")
    today = timezone.now().date()
    args: dict[str, Any] = {
        "project": world.project,
        "category": "mcp_servers",
        "label": "github",
        "start": today - timedelta(days=1),
        "end": today + timedelta(days=1),
    }
    with CaptureQueriesContext(connection) as all_of_them:
        found = selector.overview_item_sessions(**args)
    assert [s["session"] for s in found["sessions"]] == ["s0", "s1", "s2"]  # ties by id
    assert len(all_of_them) == 2
    with CaptureQueriesContext(connection) as full:
        first = selector.overview_item_sessions(**args, limit=1)
    assert len(full) == 3
    assert first["count"] == 3
    assert first["sessions"] == found["sessions"][:1]
    for bad in (0, selector.ITEM_SESSIONS_MAX + 1):
        with pytest.raises(ValueError, match="limit"):
            selector.overview_item_sessions(**args, limit=bad)
    with pytest.raises(ValueError, match="category"):
        selector.overview_item_sessions(**{**args, "category": "days"})
