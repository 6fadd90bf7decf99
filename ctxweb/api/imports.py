"""Transcript imports: ``POST /api/v1/import`` (a multipart upload), ``GET /api/v1/imports`` and
``GET /api/v1/imports/{id}``.

A file up to ``CTXWEB_IMPORT_INLINE_BYTES`` (1 MB by default) is imported within the request:
``201`` with what was stored, or ``400`` naming what is malformed. A larger one, or any file with
``background=true``, becomes a background job (a Celery worker, or a thread in the embedded
shape): ``202`` with the job, whose progress ``GET imports/{id}`` follows. Either way the import is
recorded as a job, and committed every 50 turns, so that no import holds the database for long.
"""

from __future__ import annotations

from typing import Any

from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from compaction.errors import FormatError
from ctxweb.accounts.access import actor_for_request
from ctxweb.api.access import not_found, require_access, require_writer
from ctxweb.api.pagination import StrictLimitOffsetPagination, page_parameters
from ctxweb.contexts import selectors
from ctxweb.contexts.services import imports
from ctxweb.numbers import parse_whole
from ctxweb.shapes import ImportJobOutput

FORMAT_CHOICES = ("auto", *imports.TRANSCRIPT_FORMATS)


@extend_schema_field(OpenApiTypes.BINARY)
class UploadField(serializers.FileField):
    """A file part of a multipart body (the schema says binary, not a URL)."""


class ImportInput(serializers.Serializer):  # type: ignore[type-arg]
    file = UploadField(allow_empty_file=False)
    format = serializers.ChoiceField(choices=FORMAT_CHOICES, default="auto")
    prefix = serializers.CharField(required=False, default="", allow_blank=True, max_length=100)
    background = serializers.BooleanField(
        required=False,
        default=False,
        help_text="import in the background whatever the file's size (202 with the job)",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """A misspelt field is named, not ignored (``formt=codex`` would import as ``auto``)."""
        unknown = sorted(set(self.initial_data) - set(self.fields))
        if unknown:
            raise serializers.ValidationError(
                {
                    name: f"unknown field; the fields are {', '.join(self.fields)}"
                    for name in unknown
                }
            )
        return attrs


class ImportJobWithUrlOutput(ImportJobOutput):
    url = serializers.CharField(help_text="where to follow it")


class ImportPageOutput(serializers.Serializer):  # type: ignore[type-arg]
    count = serializers.IntegerField()
    limit = serializers.IntegerField()
    offset = serializers.IntegerField()
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    results = ImportJobWithUrlOutput(many=True)


def import_job_data(job: Any) -> dict[str, Any]:
    """An import job in its one shape, with its URL."""
    return {
        **ImportJobOutput(job).data,
        "url": reverse("api-import-detail", kwargs={"job_id": job.pk}),
    }


class ImportApi(APIView):
    """Import a transcript file (any supported format); importing it again adds no turn."""

    parser_classes = [MultiPartParser]

    @extend_schema(
        request={"multipart/form-data": ImportInput},
        responses={201: ImportJobWithUrlOutput, 202: ImportJobWithUrlOutput},
        description=(
            "Multipart upload: `file` (the transcript), optional `format` (`auto` by default), "
            "`prefix` (put before every session's id) and `background`. Files up to "
            "`CTXWEB_IMPORT_INLINE_BYTES` (1 MB) are imported in the request: `201` with the "
            "sessions stored (turns already imported are counted in `skipped`); larger ones, or "
            "`background=true`, answer `202` with the job to follow at `url`. Turns are "
            "committed every 50: after a failure, importing the file again resumes."
        ),
    )
    def post(self, request: Request) -> Response:
        access = require_access(request)
        require_writer(access)
        data = ImportInput(data=request.data)
        data.is_valid(raise_exception=True)
        upload = data.validated_data["file"]
        job = imports.import_start(
            project=access.project,
            data=upload.read(),
            name=upload.name or "",
            format=data.validated_data["format"],
            prefix=data.validated_data["prefix"],
            actor=actor_for_request(request),
            background=data.validated_data["background"],
        )
        if job.status == "failed":
            raise FormatError(job.error_field, job.error)
        answer = import_job_data(job)
        if job.status == "succeeded":
            return Response(answer, status=status.HTTP_201_CREATED)
        headers = {"Location": answer["url"]}
        return Response(answer, status=status.HTTP_202_ACCEPTED, headers=headers)


class ImportListApi(APIView):
    """The project's imports, newest first."""

    @extend_schema(
        parameters=page_parameters(),
        responses={200: ImportPageOutput},
        operation_id="v1_imports_list",
    )
    def get(self, request: Request) -> Response:
        access = require_access(request)
        paginator = StrictLimitOffsetPagination()
        jobs = selectors.import_job_list(project=access.project)
        page = paginator.paginate_queryset(jobs, request, view=self) or []
        return paginator.get_paginated_response([import_job_data(job) for job in page])


class ImportDetailApi(APIView):
    """One import: its status, progress and, once done, the sessions it stored or its error."""

    @extend_schema(responses={200: ImportJobWithUrlOutput})
    def get(self, request: Request, job_id: str) -> Response:
        access = require_access(request)
        pk = parse_whole(job_id)
        job = None if pk is None else selectors.import_job_get(project=access.project, job_id=pk)
        if job is None:
            raise not_found("Import")
        return Response(import_job_data(job))
