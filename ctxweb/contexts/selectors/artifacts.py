"""Reads of artifacts: one by id (its content key, a short id or its row id) in a project, its
content in pages, which keys are stored."""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Iterable

from django.db.models import Q, QuerySet
from django.db.models.functions import Length, Substr

from ctxweb.accounts.models import Project
from ctxweb.contexts.models import Artifact as ArtifactRow
from ctxweb.numbers import parse_whole

#: A content key (sha256 hex) or a short id: a prefix of one, of at least 12 characters, that
#: resolves in its project as a git short hash does (ctxweb-auto's pointers write 16).
SHORT_ID = re.compile(r"[0-9a-f]{12,64}")


class ArtifactAmbiguous(Exception):
    """A short id that starts the content key of more than one of the project's artifacts."""

    def __init__(self, short_id: str, keys: list[str]) -> None:
        super().__init__(
            f"Artifact id {short_id} is ambiguous: it starts the ids of several artifacts"
            f" ({', '.join(keys)}); use more characters."
        )
        self.short_id = short_id
        self.keys = keys


def _prefixed(short_id: str) -> Q:
    """Keys that start with ``short_id`` (hex), as a range the key index serves: every hex
    character sorts before ``g``."""
    if len(short_id) == 64:
        return Q(key=short_id)
    return Q(key__gte=short_id, key__lt=short_id + "g")


def artifact_get(*, project: Project, artifact_id: str) -> ArtifactRow | None:
    """The project's artifact by its content key (sha256 hex), a short id (a prefix of the key,
    12 characters or more) or its row id, without loading its content; ``content_chars`` is
    annotated. Never another project's.

    Raises:
        ArtifactAmbiguous: a short id starts the keys of more than one of the project's
            artifacts.
    """
    artifacts = ArtifactRow.objects.filter(project=project)
    if SHORT_ID.fullmatch(artifact_id):
        keys = list(artifacts.filter(_prefixed(artifact_id)).values_list("key", flat=True)[:5])
        if len(keys) > 1:
            raise ArtifactAmbiguous(artifact_id, sorted(keys))
        if keys:
            return _lean(artifacts.filter(key=keys[0])).first()
    row_id = parse_whole(artifact_id)
    if row_id is not None:
        artifacts = artifacts.filter(pk=row_id)
    else:
        artifacts = artifacts.filter(key=artifact_id)
    return _lean(artifacts).first()


def _lean(artifacts: QuerySet[ArtifactRow]) -> QuerySet[ArtifactRow]:
    return (
        artifacts.defer("content")
        .select_related("session")
        .annotate(content_chars=Length("content"))
    )


def keys_named(pointed: Iterable[str], keys: list[str]) -> set[str]:
    """The ``keys`` (sorted) that the ids ``pointed`` name: a whole key, or every key a short id
    (12 hex characters or more) starts, all of them when it is ambiguous: whatever it may name
    is kept."""
    named: set[str] = set()
    for short in pointed:
        if not SHORT_ID.fullmatch(short):
            named.update(k for k in keys[bisect_left(keys, short) :][:1] if k == short)
            continue
        at = bisect_left(keys, short)
        while at < len(keys) and keys[at].startswith(short):
            named.add(keys[at])
            at += 1
    return named


def artifact_content(*, artifact: ArtifactRow, start: int = 0, length: int | None = None) -> str:
    """``length`` characters of the artifact's content from ``start`` (all of it from ``start``
    when ``length`` is None), sliced by the database."""
    if length is None:
        return ArtifactRow.objects.values_list("content", flat=True).get(pk=artifact.pk)[start:]
    piece = (
        ArtifactRow.objects.filter(pk=artifact.pk)
        .annotate(piece=Substr("content", start + 1, length))
        .values_list("piece", flat=True)
        .get()
    )
    return piece or ""


def artifact_keys_stored(*, project: Project, keys: list[str]) -> set[str]:
    """Which of ``keys`` the project already stores as artifacts."""
    if not keys:
        return set()
    return set(
        ArtifactRow.objects.filter(project=project, key__in=keys).values_list("key", flat=True)
    )


# --- operations and managed contexts ----------------------------------------------------------
