"""Capture routes: OTLP's own path (exporters append ``/v1/traces`` to a base endpoint) and
Langfuse's."""

from django.urls import path

from ctxweb.capture.views import LangfuseIngestionApi, TracesApi

urlpatterns = [
    path("v1/traces", TracesApi.as_view(), name="otlp-traces"),
    path("api/public/otel/v1/traces", TracesApi.as_view(), name="langfuse-otlp-traces"),
    path("api/public/ingestion", LangfuseIngestionApi.as_view(), name="langfuse-ingestion"),
]
