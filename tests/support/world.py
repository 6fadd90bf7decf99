"""The personas of the HTTP tests: an owner, a teammate (viewer) and an outsider, two projects, and
an ingest, an operator and a foreign key."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User
from rest_framework.test import APIClient as DrfClient

from ctxweb.accounts.models import Project, Role
from ctxweb.accounts.services import api_key_create, membership_set, project_create


def streamed_json(response: Any, **extra: Any) -> Any:
    """A streamed JSON answer of the test client (a session's turns without ``limit``), read
    whole as a client of the API reads it."""
    if not hasattr(response, "_json"):
        body = b"".join(response.streaming_content)
        response._json = json.loads(body.decode(response.charset), **extra)
    return response._json


class APIClient(DrfClient):
    """DRF's test client, whose ``json()`` also reads a streamed answer (:func:`streamed_json`)."""

    def _parse_json(self, response: Any, **extra: Any) -> Any:
        if response.streaming:
            return streamed_json(response, **extra)
        return super()._parse_json(response, **extra)


@dataclass
class World:
    project: Project
    other_project: Project
    owner: User
    teammate: User
    outsider: User
    ingest_key: str
    operator_key: str
    outsider_key: str

    def api(self, key: str | None = None) -> APIClient:
        client = APIClient()
        if key is not None:
            client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
        return client

    def login(self, user: User) -> APIClient:
        client = APIClient()
        client.force_login(user)
        return client


def make_world() -> World:
    """Create the personas, their projects and keys (inside the caller's database access)."""
    owner = User.objects.create_user("owner", password="pw-owner-123")
    teammate = User.objects.create_user("teammate", password="pw-team-123")
    outsider = User.objects.create_user("outsider", password="pw-out-123")
    project = project_create(name="alpha", owner=owner)
    membership_set(project=project, user=teammate, role=Role.VIEWER)
    other = project_create(name="beta", owner=outsider)
    _, ingest = api_key_create(project=project, role="ingest")
    _, operator = api_key_create(project=project, role="operator")
    _, foreign = api_key_create(project=other, role="operator")
    return World(project, other, owner, teammate, outsider, ingest, operator, foreign)
