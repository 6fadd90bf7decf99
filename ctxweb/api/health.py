"""Liveness: ``GET /api/v1/health``."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView


class HealthApi(APIView):
    """Liveness: answers without touching anything else."""

    permission_classes = [AllowAny]
    authentication_classes: list[type] = []

    @extend_schema(responses={200: dict})
    def get(self, request: Request) -> Response:
        return Response({"status": "ok"})
