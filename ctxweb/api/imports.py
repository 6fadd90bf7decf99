"""``POST /api/v1/import``: a transcript file uploaded as multipart, imported into the caller's
project (:func:`ctxweb.contexts.services.imports.transcript_import`)."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from ctxweb.api.access import require_access, require_writer
from ctxweb.contexts.services import imports
from ctxweb.contexts.services.imports import transcript_import

FORMAT_CHOICES = ("auto", *imports.TRANSCRIPT_FORMATS)


@extend_schema_field(OpenApiTypes.BINARY)
class UploadField(serializers.FileField):
    """A file part of a multipart body (the schema says binary, not a URL)."""


class ImportInput(serializers.Serializer):  # type: ignore[type-arg]
    file = UploadField(allow_empty_file=False)
    format = serializers.ChoiceField(choices=FORMAT_CHOICES, default="auto")
    prefix = serializers.CharField(required=False, default="", allow_blank=True, max_length=100)


class SessionImportOutput(serializers.Serializer):  # type: ignore[type-arg]
    external_id = serializers.CharField()
    turns = serializers.IntegerField(help_text="turns created")
    skipped = serializers.IntegerField(help_text="turns already stored (a re-import)")
    peak_tokens = serializers.IntegerField()
    compactions = serializers.IntegerField()


class ImportOutput(serializers.Serializer):  # type: ignore[type-arg]
    format = serializers.CharField()
    sessions = SessionImportOutput(many=True)


class ImportApi(APIView):
    """Import a transcript file (any supported format); importing it again adds no turn."""

    parser_classes = [MultiPartParser]

    @extend_schema(
        request={"multipart/form-data": ImportInput},
        responses={201: ImportOutput},
        description=(
            "Multipart upload: `file` (the transcript), optional `format` (`auto` by default) "
            "and `prefix` (put before every session's id). Each session is stored whole or not "
            "at all; turns already imported are counted in `skipped`."
        ),
    )
    def post(self, request: Request) -> Response:
        access = require_access(request)
        require_writer(access)
        data = ImportInput(data=request.data)
        data.is_valid(raise_exception=True)
        upload = data.validated_data["file"]
        result = transcript_import(
            project=access.project,
            data=upload.read(),
            name=upload.name or "",
            format=data.validated_data["format"],
            external_id_prefix=data.validated_data["prefix"],
        )
        return Response(
            {
                "format": result.format,
                "sessions": [
                    {
                        "external_id": s.external_id,
                        "turns": s.turns,
                        "skipped": s.skipped,
                        "peak_tokens": s.peak_tokens,
                        "compactions": s.compactions,
                    }
                    for s in result.sessions
                ],
            },
            status=status.HTTP_201_CREATED,
        )
