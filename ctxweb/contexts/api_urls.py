"""REST routes under /api/v1/."""

from django.urls import path

from ctxweb.contexts import apis

urlpatterns = [
    path("health", apis.HealthApi.as_view(), name="api-health"),
    path("sessions", apis.SessionListApi.as_view(), name="api-sessions"),
    path("sessions/<str:external_id>", apis.SessionDetailApi.as_view(), name="api-session"),
    path("sessions/<str:external_id>/turns", apis.TurnsApi.as_view(), name="api-turns"),
    path(
        "sessions/<str:external_id>/turns/<int:index>",
        apis.TurnDetailApi.as_view(),
        name="api-turn",
    ),
]
