"""Reads of artifacts: one by id (or key) in a project, its content in pages, which keys are
stored."""

from __future__ import annotations

from django.db.models.functions import Length, Substr

from ctxweb.accounts.models import Project
from ctxweb.contexts.models import Artifact as ArtifactRow
from ctxweb.numbers import parse_whole


def artifact_get(*, project: Project, artifact_id: str) -> ArtifactRow | None:
    """The project's artifact by its content key (sha256 hex) or its row id, without loading its
    content; ``content_chars`` is annotated. Never another project's."""
    artifacts = ArtifactRow.objects.filter(project=project)
    row_id = parse_whole(artifact_id)
    if row_id is not None:
        artifacts = artifacts.filter(pk=row_id)
    else:
        artifacts = artifacts.filter(key=artifact_id)
    return (
        artifacts.defer("content")
        .select_related("session")
        .annotate(content_chars=Length("content"))
        .first()
    )


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
