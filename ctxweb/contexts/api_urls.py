"""REST routes under /api/v1/."""

from django.urls import path

from ctxweb.contexts import apis

urlpatterns = [
    path("health", apis.HealthApi.as_view(), name="api-health"),
]
