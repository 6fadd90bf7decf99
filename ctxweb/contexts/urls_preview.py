"""Pages of strategy previews and artifacts."""

from django.urls import path

from ctxweb.contexts import views_preview

urlpatterns = [
    path(
        "sessions/<path:external_id>/preview/",
        views_preview.session_preview,
        name="session-preview",
    ),
    path("artifacts/<str:artifact_id>/", views_preview.artifact_detail, name="artifact-detail"),
]
