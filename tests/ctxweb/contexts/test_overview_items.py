"""The overview's click-through selector names the same items ingest counts under a label: for
every region, kind and name/group shape, an item matches :func:`label_items` exactly when
:func:`item_labels` files it under that category and label."""

from __future__ import annotations

import itertools

import pytest
from django.db.models import Q

from compaction.regions import REGIONS
from ctxweb.contexts.models import AttributionItem, Session
from ctxweb.contexts.selectors import attribution as selector
from ctxweb.contexts.services.attribution import item_labels
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
